"""`RequestStream`: the events of one accepted request, as the server's event loop reads them.

`EngineClient` makes one per submitted request and hands it what it needs as plain values and a
callable: the model's name and time limit for the error a late request gets, and `cancel` to tell
the engine a reader has gone. The client feeds it the engine's events with `arrive`, and `fail` when
the engine is lost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

from appliance.engine.messages import Delta, Finished, merge_deltas
from appliance.errors import RequestTimedOut

__all__ = ["RequestStream", "timed_out"]

_TIMED_OUT = object()
"""Put in a stream's queue when its request ran out of time (limits.request_timeout_seconds)."""


class RequestStream:
    """The events of one accepted request: `Delta`s and one `Finished` per sequence (`sequences`
    of them, told apart by `index`), or a single `Finished` with reason error/cancelled.

    `timeout`: the request's time limit in seconds from `submitted_at` (0: none); `cancel(request_id)`
    stops the request in the engine when the reader leaves or runs out of time.
    """

    def __init__(
        self,
        request_id: int,
        *,
        model: str,
        timeout: float,
        cancel: Callable[[int], None],
        prompt_tokens: int = 0,
        sequences: int = 1,
    ) -> None:
        self.request_id = request_id
        self.model = model
        self.timeout = timeout
        self._cancel = cancel
        self.prompt_tokens = prompt_tokens
        self.prompt_tail = ""
        self.prompt_text = ""
        """The prompt as text, when the request asked for it back (`SamplingParams.echo`)."""
        self.sequences = sequences
        self._events: asyncio.Queue[Delta | Finished | object] = asyncio.Queue()
        self._held: Delta | Finished | object | None = None
        """An event taken from the queue while merging deltas, to be returned next."""
        self._yielded = _Completion(sequences)
        self._arrived = _Completion(sequences)
        self._tokens_by_index: dict[int, int] = {}
        self.done = False
        # Timings and totals, for metrics and the request log (kept by `client_metrics`).
        self.submitted_at = time.monotonic()
        self.first_token_at: float | None = None
        self.last_token_at: float | None = None
        self.tokens_seen = 0
        self.completion_tokens = 0
        self.finish_reason: str | None = None

    # -- the reader's side ------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Delta | Finished]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Delta | Finished]:
        # One timer for the whole request, not a timeout per event (asyncio.wait_for makes a task
        # per call: most of the cost of a streamed token on the server side).
        timer = None
        if self.timeout:
            remaining = max(self.submitted_at + self.timeout - time.monotonic(), 0.0)
            timer = asyncio.get_running_loop().call_later(remaining, self._events.put_nowait, _TIMED_OUT)
        try:
            while not self.done:
                event = await self._next()
                if event is _TIMED_OUT:
                    self.cancel()
                    raise self.timed_out()
                if self._yielded.completed_by(event):
                    self.done = True
                yield event
        finally:
            if timer is not None:
                timer.cancel()

    async def _next(self) -> Delta | Finished | object:
        """The next event; consecutive deltas of one sequence that are already waiting come merged.

        Deltas wait here only while the consumer is behind the engine (a busy CPU, a slow
        client): sending them as one chunk then costs one response frame instead of several, so
        a loaded server catches up instead of falling further behind. A consumer that keeps up
        gets every step's delta on its own, as before.
        """
        if self._held is not None:
            event, self._held = self._held, None
        elif not self._events.empty():
            event = self._events.get_nowait()
        else:
            event = await self._events.get()
        while isinstance(event, Delta) and not self._events.empty():
            following = self._events.get_nowait()
            if not isinstance(following, Delta) or following.index != event.index:
                self._held = following
                break
            event = merge_deltas(event, following)
        return event

    def timed_out(self) -> RequestTimedOut:
        return timed_out(self.model, self.timeout)

    def cancel(self) -> None:
        """Stop generating (the client went away); the engine frees the request's KV blocks."""
        if not self.done:
            self.done = True
            self._cancel(self.request_id)

    # -- the engine's side ------------------------------------------------------------------

    def arrive(self, event: Delta | Finished) -> bool:
        """Queue an event from the engine for the reader; True when it completes the request."""
        self._events.put_nowait(event)
        return self._arrived.completed_by(event)

    def count_tokens(self, event: Delta | Finished) -> int:
        """The request's generated tokens so far, over all its sequences, with `event` counted."""
        self._tokens_by_index[event.index] = event.tokens if isinstance(event, Delta) else event.completion_tokens
        return sum(self._tokens_by_index.values())

    def fail(self, error: str) -> None:
        """The engine is lost: the reader gets a `Finished` with reason "error"."""
        self._events.put_nowait(
            Finished(
                request_id=self.request_id,
                finish_reason="error",
                prompt_tokens=self.prompt_tokens,
                completion_tokens=0,
                error=error,
            )
        )


class _Completion:
    """Counts `Finished` events until a request with `sequences` sequences is complete."""

    def __init__(self, sequences: int) -> None:
        self.remaining = sequences

    def completed_by(self, event: Delta | Finished) -> bool:
        if not isinstance(event, Finished):
            return False
        self.remaining -= 1
        return self.remaining <= 0 or event.finish_reason in ("error", "cancelled")


def timed_out(model: str, timeout: float) -> RequestTimedOut:
    """The error of a request that ran out of time."""
    return RequestTimedOut(
        f"The request ran longer than model '{model}' allows "
        f"({timeout:g} s, limits.request_timeout_seconds); it was stopped."
    )
