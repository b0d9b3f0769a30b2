"""A tiny OpenAI-compatible server for the bench's peer tests: stdlib only, no model.

    python tests/fake_openai_server.py PORT [--tokens-off-by N] [--fail-start] [--loading-seconds S]

`GET /v1/models` answers 200; `GET /health` 404, or with `--loading-seconds S` 503 for S seconds
after the start (a server that lists its models while it loads), then 200; `POST /v1/completions` streams `max_tokens` one-word chunks (a few ms
apart), then a usage chunk (`prompt_tokens` counted as space-separated words) and `data: [DONE]`,
as the bench asks. `POST /v1/chat/completions` streams the same words as `delta.content`, its
`prompt_tokens` the words of all the messages (so a conversation's history shows in the count)
and `prompt_tokens_details.cached_tokens` those of all but the last (a perfect prefix cache).
`--tokens-off-by N` generates N more tokens than asked (a peer ignoring
`max_tokens`); `--fail-start` exits with code 3 before listening.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    """HTTP/1.0: one request per connection, the body runs until the connection closes."""

    tokens_off_by = 0
    ready_at: float | None = None

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/health" and self.ready_at is not None:
            self.send_response(200 if time.monotonic() >= self.ready_at else 503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path != "/v1/models":
            self.send_error(404)
            return
        body = json.dumps({"object": "list", "data": [{"id": "fake", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        chat = self.path == "/v1/chat/completions"
        if self.path not in ("/v1/completions", "/v1/chat/completions") or not request.get("stream"):
            self.send_error(400)
            return
        if chat:
            prompt = " ".join(message["content"] for message in request["messages"])
        else:
            prompt = request["prompt"]
        tokens = int(request["max_tokens"]) + self.tokens_off_by
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        kind = "chat.completion.chunk" if chat else "text_completion"
        for index in range(tokens):
            choice = {"index": 0, "delta": {"content": f" w{index}"}} if chat else {"index": 0, "text": f" w{index}"}
            self._event({"object": kind, "choices": [choice]})
            time.sleep(0.002)
        usage: dict[str, object] = {"prompt_tokens": len(prompt.split()), "completion_tokens": tokens}
        if chat:
            history = " ".join(message["content"] for message in request["messages"][:-1])
            usage["prompt_tokens_details"] = {"cached_tokens": len(history.split())}
        self._event({"object": kind, "choices": [], "usage": usage})
        self.wfile.write(b"data: [DONE]\n\n")

    def _event(self, data: object) -> None:
        self.wfile.write(b"data: " + json.dumps(data).encode() + b"\n\n")
        self.wfile.flush()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--tokens-off-by", type=int, default=0)
    parser.add_argument("--fail-start", action="store_true")
    parser.add_argument("--loading-seconds", type=float)
    args = parser.parse_args()
    if args.fail_start:
        print("fake server: refusing to start", flush=True)
        sys.exit(3)
    Handler.tokens_off_by = args.tokens_off_by
    if args.loading_seconds is not None:
        Handler.ready_at = time.monotonic() + args.loading_seconds
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"fake server listening on {args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
