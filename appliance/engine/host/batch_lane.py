"""The batch lane of one engine: batch lines run only in the capacity live traffic leaves.

A batch line takes a turn (`BatchLane.turn`) and runs its request inside it (`Turn.run`). A turn
is given only while the engine has no live request in flight and fewer than `slots` batch lines
running (the `batch_lines_per_model` setting, `BATCH_SLOTS` by default). A live request admitted
while batch lines run preempts them (`preempt`, called by the engine's admission): their requests
are cancelled in the engine, freeing its steps for the person's prefill, and each line is run
again from the start once the lane is free (`Preempted`). A person's request therefore never
queues behind a batch's and meets batch sequences only for the step in which they leave. Lines
start again only once no live request has been in flight for `grace` seconds (the
`batch_grace_seconds` setting, `LIVE_GRACE_SECONDS` by default): a line started between two
people's requests close together (a client's next turn, an agent's next call) puts its prefill
step in the next person's way, and that step (two prompts at once) was what a person beside a
batch waited for (see `LIVE_GRACE_SECONDS`). Live admission does not count batch lines against
`max_queued_requests` (`EngineCalls._admit`), so a batch never turns a person away.

Live requests are counted as the engine's `in_flight` less the batch lines holding a turn: a line
between its turn and its submit counts as one live request fewer than it should, for the
microseconds it takes, which only makes the lane wait. A request is a batch line's when it is
made inside `Turn.run` (a context variable says so), so the line's own admission preempts nothing.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

__all__ = ["BATCH_SLOTS", "LIVE_GRACE_SECONDS", "BatchLane", "Preempted", "in_batch_line"]

T = TypeVar("T")

BATCH_SLOTS = 2
"""Batch lines in flight per engine at most (the `batch_lines_per_model` setting's default)."""
LIVE_GRACE_SECONDS = 0.5
"""How long after the last live request was seen in flight batch lines wait before they start
again (the `batch_grace_seconds` setting's default). Without it, on demo-1b with people 0.2 s
apart, lines restarted 20 ms after each person's request ended and the next person met their
prefill step in flight: live TTFT p50 1.6x, p95 2x (docs/bench.md, "Batches beside people"). A
person idle longer than this meets at most one step."""
_POLL_SECONDS = 0.02
"""How often a waiting line looks again (it waits only while the lane is full or people are served)."""

in_batch_line: contextvars.ContextVar[bool] = contextvars.ContextVar("in_batch_line", default=False)
"""Set while a batch line's request is made: its admission is not a person's."""


class Preempted(Exception):
    """A live request took the engine while this batch line ran: run the line again later."""


class Turn:
    """One batch line's turn in the lane."""

    def __init__(self) -> None:
        self.task: asyncio.Task | None = None
        self.preempted = False

    async def run(self, work: Callable[[], Awaitable[T]]) -> T:
        """`work()`'s result; Preempted when a live request cancelled it first."""
        context = contextvars.copy_context()
        context.run(in_batch_line.set, True)  # in the line's task only
        self.task = asyncio.get_running_loop().create_task(work(), context=context)
        try:
            return await self.task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self.preempted and (current is None or not current.cancelling()):
                raise Preempted from None
            raise
        finally:
            self.task = None


class BatchLane:
    """Turns for batch lines on one engine; `live()` counts the engine's live requests in flight."""

    def __init__(
        self,
        live: Callable[[], int],
        slots: int = BATCH_SLOTS,
        grace: float = LIVE_GRACE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._live = live
        self.slots = slots
        self.grace = grace
        self._clock = clock
        self._live_seen = -grace
        """When a live request was last admitted or seen in flight (`clock`'s seconds)."""
        self._turns: set[Turn] = set()
        self.paused_seconds = 0.0
        """Time lines waited while live requests were in flight (a measure of yielding)."""
        self.preemptions = 0
        """Batch lines cancelled for a live request (each ran again later)."""

    @property
    def running(self) -> int:
        """Batch lines holding a turn."""
        return len(self._turns)

    def free(self) -> bool:
        """A turn is to be had now: a slot is free and no live request was in flight for `grace`."""
        now = self._clock()
        if self._live():
            self._live_seen = now
            return False
        return self.running < self.slots and now - self._live_seen >= self.grace

    def preempt(self) -> None:
        """A live request is being admitted: cancel the batch lines running (no-op inside one)."""
        if in_batch_line.get():
            return
        self._live_seen = self._clock()  # a request shorter than one poll still holds lines back
        for turn in self._turns:
            if turn.task is not None and not turn.task.done() and not turn.preempted:
                turn.preempted = True
                turn.task.cancel()
                self.preemptions += 1

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[Turn]:
        """Wait for a turn and hold it while the line runs (with `Turn.run`)."""
        while not self.free():
            await asyncio.sleep(_POLL_SECONDS)
            if self._live():
                self.paused_seconds += _POLL_SECONDS
        turn = Turn()
        self._turns.add(turn)
        try:
            yield turn
        finally:
            self._turns.discard(turn)
