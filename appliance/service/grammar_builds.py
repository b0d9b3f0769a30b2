"""Output grammars built off the event loop, on a small pool of threads of their own (issue 40).

Building a grammar is pure Python, linear in the constraint's size but up to a few tenths of a
second for the largest the bounds accept (`grammar.bounds.INPUT_LIMITS`). Builds never run on the
event loop's default executor: `/metrics`, image decoding and reloads share that one, and six
large builds once held all of them for minutes. Here:

- at most `workers` builds run at once, and at most `max_pending` are running or queued: a build
  beyond that is refused at once with 503 and Retry-After (`Overloaded`), not queued without end;
- the same key in flight is built once, whoever waits for it;
- a build whose every waiting client has left is abandoned: dropped from the queue, or stopped
  at its next checkpoint (`grammar.bounds.checkpoint`) if already running;
- results, grammars and refusals (InvalidRequest) alike, are remembered by key (clients send the
  same tools and schemas again and again).
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from appliance.cpu_affinity import unpin_this_thread
from appliance.engine import TriggeredGrammar
from appliance.errors import InvalidRequest, Overloaded
from appliance.grammar.bounds import BuildAbandoned, abandoned_when

__all__ = ["GrammarBuilds", "OutputConstraint"]

OutputConstraint = str | TriggeredGrammar | None
"""What a build makes: a grammar for the whole output, tagged parts of free text held to grammars
(`constraints.auto_constraint`), or nothing."""
Work = Callable[[], OutputConstraint]


@dataclass
class _Build:
    future: asyncio.Future[OutputConstraint]
    abandoned: threading.Event = field(default_factory=threading.Event)
    waiters: int = 0


def _run(work: Work, abandoned: threading.Event) -> OutputConstraint:
    if abandoned.is_set():
        raise BuildAbandoned
    with abandoned_when(abandoned):
        return work()


class GrammarBuilds:
    """Builds grammars by key on `workers` threads of its own (see the module's docstring)."""

    def __init__(self, workers: int = 2, max_pending: int = 8, remembered: int = 256) -> None:
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="grammar", initializer=unpin_this_thread)
        self.max_pending = max_pending
        self.pending = 0
        """Builds submitted whose thread has not finished with them (abandoned ones included)."""
        self._lock = threading.Lock()  # `pending` drops on the pool's threads
        self._in_flight: dict[bytes, _Build] = {}
        self._remembered: OrderedDict[bytes, OutputConstraint | InvalidRequest] = OrderedDict()
        self._remembered_limit = remembered

    async def build(self, key: bytes, work: Work) -> OutputConstraint:
        """`work()`'s grammar, built once for every waiter of `key` and remembered; InvalidRequest
        (remembered too) as `work` raises it; Overloaded when too many builds are pending."""
        if key in self._remembered:
            self._remembered.move_to_end(key)
            return self._answer(self._remembered[key])
        build = self._in_flight.get(key)
        if build is None or build.future.get_loop() is not asyncio.get_running_loop():
            build = self._start(key, work)
        build.waiters += 1
        try:
            # shield: one waiter leaving must not cancel the build the others wait for.
            found = await asyncio.shield(build.future)
        except InvalidRequest as exc:
            self._remember(key, exc)
            raise
        finally:
            build.waiters -= 1
            if build.waiters == 0 and not build.future.done():
                self._abandon(key, build)
        self._remember(key, found)
        return found

    def _start(self, key: bytes, work: Work) -> _Build:
        abandoned = threading.Event()
        with self._lock:
            if self.pending >= self.max_pending:
                raise Overloaded(
                    "Too many structured-output grammars are being built at once; retry in a moment.", retry_after=1
                )
            self.pending += 1
        submitted = self._pool.submit(_run, work, abandoned)
        submitted.add_done_callback(self._finished)
        build = _Build(asyncio.wrap_future(submitted), abandoned)
        build.future.add_done_callback(lambda _: self._forget(key, build))
        self._in_flight[key] = build
        return build

    def _finished(self, _: Future) -> None:
        with self._lock:
            self.pending -= 1

    def _abandon(self, key: bytes, build: _Build) -> None:
        build.abandoned.set()
        build.future.cancel()  # also takes a build still queued off the pool's queue
        self._forget(key, build)

    def _forget(self, key: bytes, build: _Build) -> None:
        if self._in_flight.get(key) is build:
            del self._in_flight[key]

    def _remember(self, key: bytes, found: OutputConstraint | InvalidRequest) -> None:
        self._remembered[key] = found
        self._remembered.move_to_end(key)
        while len(self._remembered) > self._remembered_limit:
            self._remembered.popitem(last=False)

    @staticmethod
    def _answer(found: OutputConstraint | InvalidRequest) -> OutputConstraint:
        if isinstance(found, InvalidRequest):
            raise found
        return found

    def close(self) -> None:
        """Stop the threads once their builds are done (queued ones are dropped)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
