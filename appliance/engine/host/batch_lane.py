"""The batch lane of one engine: batch lines run only in the capacity live traffic leaves.

A batch line takes a turn (`BatchLane.turn`) before it is submitted like any request. A turn is
given only while the engine has no live request in flight and fewer than `slots` batch lines
running, so a person's request never queues behind a batch's: it meets at most `slots` batch
sequences in the engine (on a continuous-batching engine they share its steps; a one-at-a-time
engine finishes the one it runs). Live admission does not count batch lines against
`max_queued_requests` (`EngineCalls._admit`), so a batch never turns people away.

Live requests are counted as the engine's `in_flight` less the batch lines holding a turn: a line
between its turn and its submit counts as one live request fewer than it should, for the
microseconds it takes, which only makes the lane wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

__all__ = ["BATCH_SLOTS", "BatchLane"]

BATCH_SLOTS = 2
"""Batch lines in flight per engine at most (`batch_lines_per_model`)."""
_POLL_SECONDS = 0.02
"""How often a waiting line looks again (it waits only while the lane is full or people are served)."""


class BatchLane:
    """Turns for batch lines on one engine; `live()` counts the engine's live requests in flight."""

    def __init__(self, live: Callable[[], int], slots: int = BATCH_SLOTS) -> None:
        self._live = live
        self.slots = slots
        self.running = 0
        """Batch lines holding a turn."""
        self.paused_seconds = 0.0
        """Time lines waited while live requests were in flight (a measure of yielding)."""

    def free(self) -> bool:
        """A turn is to be had now."""
        return self.running < self.slots and self._live() == 0

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Wait for a turn and hold it while the line runs."""
        while not self.free():
            await asyncio.sleep(_POLL_SECONDS)
            if self._live():
                self.paused_seconds += _POLL_SECONDS
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
