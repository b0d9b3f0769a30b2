"""A neighbour stream, watched while a hostile request runs on the same model (issue 28).

`Neighbour` streams chat completions back to back on one model until it is told to stop, and
records the largest gap it saw (submission to first chunk, or between two chunks), whether every
stream completed, and the engine's pid before and after. A request that stalls, crashes or bloats
the engine shows in those numbers; the tests print the gap (measured, not asserted: machines
differ) and assert that nothing was lost and the engine is the same process.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx

__all__ = ["Neighbour"]


class Neighbour:
    """Use as a context manager around the hostile request(s)."""

    def __init__(
        self,
        url: str,
        model: str = "demo-chat",
        *,
        headers: dict[str, str] | None = None,
        max_tokens: int = 64,
        body: dict[str, Any] | None = None,
    ) -> None:
        self.url = url
        self.model = model
        self.headers = headers or {}
        self.body = body or {
            "model": model,
            "messages": [{"role": "user", "content": "Tell me a story."}],
            "max_tokens": max_tokens,
            "ignore_eos": True,
            "stream": True,
        }
        self.largest_gap = 0.0
        self.streams = 0
        self.failures: list[str] = []
        self.pid_before: int | None = None
        self.pid_after: int | None = None
        self._stop = threading.Event()
        self._first_chunk = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def pid(self) -> int | None:
        health = httpx.get(f"{self.url}/health", headers=self.headers, timeout=10).json()
        return health["models"][self.model]["pid"]

    def __enter__(self) -> Neighbour:
        self.pid_before = self.pid()
        self._thread.start()
        if not self._first_chunk.wait(60):
            raise AssertionError(f"the neighbour stream never started: {self.failures}")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(300)
        self.pid_after = self.pid()
        print(f"neighbour on {self.model}: {self.streams} streams, largest gap {self.largest_gap:.3f} s")

    def assert_unharmed(self) -> None:
        """Every neighbour stream completed and the engine was not restarted."""
        assert not self._thread.is_alive(), "the neighbour stream hung"
        assert not self.failures, self.failures
        assert self.streams >= 1
        assert self.pid_before is not None and self.pid_before == self.pid_after, (self.pid_before, self.pid_after)

    def _run(self) -> None:
        with httpx.Client(timeout=300, headers=self.headers) as client:
            while True:
                self._one_stream(client)
                if self._stop.is_set() or self.failures:
                    return

    def _one_stream(self, client: httpx.Client) -> None:
        last = time.monotonic()
        finish = None
        done = False
        try:
            with client.stream("POST", f"{self.url}/v1/chat/completions", json=self.body) as response:
                if response.status_code != 200:
                    self.failures.append(f"status {response.status_code}: {response.read()[:300]!r}")
                    return
                for line in response.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    now = time.monotonic()
                    self.largest_gap = max(self.largest_gap, now - last)
                    last = now
                    self._first_chunk.set()
                    if line == "data: [DONE]":
                        done = True
                        continue
                    event = json.loads(line.removeprefix("data: "))
                    if "error" in event:
                        self.failures.append(f"error event: {event['error']}")
                        return
                    for choice in event.get("choices", []):
                        finish = choice.get("finish_reason") or finish
        except httpx.HTTPError as exc:
            self.failures.append(f"{type(exc).__name__}: {exc}")
            return
        if not done or finish not in ("stop", "length"):
            self.failures.append(f"stream ended without [DONE] or a finish reason ({finish})")
        self.streams += 1
