"""Clients that send a request and never read its answer (issue 28, item 5): the server drops them
after `write_timeout` and cancels their generation instead of buffering for them while they stay
connected; and /detokenize, whose answer can be many times its request, takes at most a context of
token ids."""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import RunningServer, copy_demo_graphs, running_server
from tests.e2e.neighbour import Neighbour

WRITE_TIMEOUT_S = 2.0
LONG_GENERATION = 6000
"""Tokens the never-read stream asks for: minutes of SmolLM2 on this machine, so it is still
generating when it is dropped, and only a cancel brings `in_flight` back to 0."""
_TCP_CLOSE, _TCP_CLOSE_WAIT = 7, 8


@pytest.fixture(scope="module")
def server(demo_root: Path, smol_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp("slow-readers")
    graphs = directory / "graphs"
    graphs.mkdir()
    copy_demo_graphs(demo_root, graphs, ["demo-chat"])
    copy_demo_graphs(smol_root, graphs, ["demo-smol"])
    smol = graphs / "demo-smol.toml"
    smol.write_text(smol.read_text().replace("max_tokens_limit = 1024", f"max_tokens_limit = {LONG_GENERATION}"))
    with running_server(graphs, directory / "server.log", "--write-timeout", str(WRITE_TIMEOUT_S)) as running:
        yield running


def _rss_mb(server: RunningServer) -> float:
    """The server process's resident memory (its engines are other processes)."""
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _never_reading(server: RunningServer, path: str, body: dict) -> socket.socket:
    """A client that sends its request and reads nothing: a small receive buffer fills at once.
    It announces Ethernet's segment size: with loopback's 64 KiB one, the server's kernel would
    size its send buffer for 4 MiB of the answer before the server itself held any."""
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 1460)
    sock.connect((host, int(port)))
    data = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    sock.sendall(head.encode() + data)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server reset (or closed) the connection, seen without reading (which would let
    the server write on)."""
    state = struct.unpack("B", sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1))[0]
    return state in (_TCP_CLOSE, _TCP_CLOSE_WAIT)


def _requests(server: RunningServer) -> list[dict]:
    """The access log's request lines so far."""
    lines = server.log().splitlines()
    return [json.loads(line.split("appliance.access: ")[1]) for line in lines if "appliance.access: " in line]


def _wait(condition, timeout: float) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"still not so after {timeout:.0f} s")
        time.sleep(0.2)
    return time.monotonic() - started


def test_clients_that_never_read_are_dropped_and_their_generation_cancelled(server: RunningServer) -> None:
    before = _rss_mb(server)
    with Neighbour(server.url, "demo-smol", max_tokens=32) as neighbour:
        stream = _never_reading(
            server,
            "/v1/chat/completions",
            {
                "model": "demo-smol",
                "messages": [{"role": "user", "content": "Tell me a long story."}],
                "max_tokens": LONG_GENERATION,
                "ignore_eos": True,
                "logprobs": True,
                "stream": True,
            },
        )
        whole = _never_reading(
            server,
            "/v1/chat/completions",
            {
                "model": "demo-chat",
                "messages": [{"role": "user", "content": "Tell me a long story."}],
                "max_tokens": 1000,
                "ignore_eos": True,
                "logprobs": True,
                "n": 4,
            },
        )
        peak = before
        started = time.monotonic()

        def both_dropped() -> bool:
            nonlocal peak
            peak = max(peak, _rss_mb(server))
            return _closed_by_server(stream) and _closed_by_server(whole)

        _wait(both_dropped, 300)
        dropped_after = time.monotonic() - started
    # Cancelled, not finished: the stream had thousands of tokens to go (the neighbour has stopped).
    idle = server.wait_idle("demo-smol", timeout=30)
    after = _rss_mb(server)
    print(
        f"dropped {dropped_after:.1f} s after sending; server RSS {before:.0f} MB before, "
        f"{peak:.0f} MB at most while they held, {after:.0f} MB after"
    )
    assert idle["in_flight"] == 0 and idle["running"] == 0, idle
    for sock in (stream, whole):
        sock.close()
    assert "write_timeout" in server.log()
    _wait(lambda: any(entry.get("finish_reason") == "cancelled" for entry in _requests(server)), 30)
    requests = _requests(server)
    dropped = [entry for entry in requests if entry.get("finish_reason") == "cancelled"]
    assert [entry["model"] for entry in dropped] == ["demo-smol"], dropped
    assert dropped[0]["completion_tokens"] < LONG_GENERATION
    # The non-streaming answer was whole (n=4, 1000 tokens each, with logprobs) when it was dropped.
    assert {"model": "demo-chat", "completion_tokens": 4000, "finish_reason": "length"}.items() <= next(
        entry for entry in requests if entry.get("model") == "demo-chat"
    ).items()
    neighbour.assert_unharmed()


def test_detokenize_takes_at_most_a_context_of_ids(server: RunningServer) -> None:
    tokenized = httpx.post(
        f"{server.url}/tokenize", json={"model": "demo-chat", "prompt": "#" * 64, "add_special_tokens": False}
    ).json()
    longest, context = tokenized["tokens"][0], tokenized["max_model_len"]
    with Neighbour(server.url, "demo-chat") as neighbour:
        # The probe's request: 24 MB of one id whose text is 64 characters, a 300 MB answer.
        bomb = httpx.post(
            f"{server.url}/detokenize",
            content=json.dumps({"model": "demo-chat", "tokens": [longest] * 4_800_000}),
            headers={"content-type": "application/json"},
            timeout=120,
        )
        assert bomb.status_code == 400, bomb.text[:300]
        error = bomb.json()["error"]
        assert error["param"] == "tokens" and str(context) in error["message"], error
        over = httpx.post(f"{server.url}/detokenize", json={"model": "demo-chat", "tokens": [longest] * (context + 1)})
        assert over.status_code == 400 and over.json()["error"]["param"] == "tokens"
        full = httpx.post(f"{server.url}/detokenize", json={"model": "demo-chat", "tokens": [longest] * context})
        assert full.status_code == 200 and full.json()["prompt"] == tokenized_text(server, longest) * context
    neighbour.assert_unharmed()


def tokenized_text(server: RunningServer, token: int) -> str:
    return httpx.post(f"{server.url}/detokenize", json={"model": "demo-chat", "tokens": [token]}).json()["prompt"]
