"""`WorkPool`: blocking work of one kind on a few threads of its own, stopped when its client leaves.

Work sized by a request (decoding an upload or an image, encoding speech) runs off the event
loop. On the loop's default executor it once shared threads with `GET /metrics` and everything
else: six abandoned 82 KB audio uploads held `/metrics` for 15-49 s (issue 49, H2). Here each kind
has its pool, and a pool's bound is real:

- at most `workers` pieces of work run at once; the rest wait in the pool's queue without a thread;
- a caller that leaves (its task cancelled) takes queued work off the queue, and sets the running
  work's `stop` event, which the work checks at its checkpoints (`Stopped` ends it there);
- the thread stays the pool's until the work returns: a slot is never freed while its work runs on.

The threads run on every CPU when the server's own are pinned (`cpu_affinity.unpin_this_thread`).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Concatenate, ParamSpec, TypeVar

from appliance.cpu_affinity import unpin_this_thread

__all__ = ["Stopped", "WorkPool"]

P = ParamSpec("P")
T = TypeVar("T")


class Stopped(Exception):
    """Raised by work at a checkpoint once its caller has left."""


class WorkPool:
    """`workers` threads (default: one per CPU) named `name-N` for one kind of blocking work."""

    def __init__(self, name: str, workers: int | None = None) -> None:
        self.name = name
        self.workers = workers or os.cpu_count() or 1
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix=name, initializer=unpin_this_thread)
        self.running = 0
        """Pieces of work holding a thread now (stopped ones included until they return)."""
        self._lock = threading.Lock()

    async def run(self, work: Callable[Concatenate[threading.Event, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`work(stop, *args, **kwargs)` on one of the pool's threads; `stop` is set when the caller
        leaves (this coroutine is cancelled), and the work should then raise `Stopped` soon."""
        stop = threading.Event()

        def call() -> T:
            with self._lock:
                self.running += 1
            try:
                if stop.is_set():
                    raise Stopped
                return work(stop, *args, **kwargs)
            finally:
                with self._lock:
                    self.running -= 1

        submitted = self._pool.submit(call)
        try:
            # shield: the work runs on whatever happens to this caller; a piece still queued is
            # taken off the queue below instead.
            return await asyncio.shield(asyncio.wrap_future(submitted))
        except asyncio.CancelledError:
            stop.set()
            submitted.cancel()  # drops it from the queue if no thread took it yet
            raise

    async def call(self, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`work(*args, **kwargs)`, for work with no checkpoints (short, bounded before it starts):
        a caller that leaves only takes it off the queue."""
        return await self.run(lambda _stop: work(*args, **kwargs))

    def close(self) -> None:
        """Stop the threads once their work is done (queued work is dropped)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
