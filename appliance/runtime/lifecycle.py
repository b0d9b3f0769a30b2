"""When engines load and unload: loads on demand, a fair queue for room, evictions, retirements.

`Lifecycle` (one per `ModelRegistry`) holds two limits over the engine *processes* that hold
memory: loading, ready, restarting or draining, still exiting, and engines outside the registry
until they are gone (retiring after a reload, a replacement loading beside its old engine).
`max_loaded_models` counts them; `memory_budget` counts their bytes: each process the larger of its
graph's estimated footprint (`Graph.footprint_bytes`, read from its files) and its measured RSS
(the larger, because an engine's RSS grows as requests fill its KV cache, up to what the estimate
counts); one still exiting, its estimate. A model loads only when it fits both, its estimate added.
0: no limit.

A request for a model that is not loaded (`load = "on_demand"`, or unloaded when idle, by an
admin or to make room) waits for its turn in a FIFO of models, every request for the same model
sharing one place (`load_queue_size` models at most; `limits.max_queued_requests` requests per
model). The first model loads as soon as it fits; only then may the next. Room is made for the
first one: an idle model first (the least recently used), else the busy one loaded longest ago,
and only once it has been loaded `min_resident_seconds`, so two models cannot take turns at every
request; as many are chosen as free the processes and the bytes the first one lacks. A model
chosen to make room takes no new requests (they queue to load it again) and
unloads once those in flight have finished, between its requests; if the model it made room for
stops waiting (its clients left, or room came from elsewhere), the unload is called off while it
still drains. The wait and the load together are bounded by the graph's `load_timeout_seconds`:
a 503 with Retry-After only when the queue is full or that time has passed.

`POST /admin/models/NAME/load` (`load`) during an admin's or an idle unload's drain cancels it: the
model serves on, the same process. During an unload that makes room for a waiting model, or once
the process is being stopped, it waits its turn and loads the model again; never a 409.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import weakref
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass

from appliance.engine import EngineClient
from appliance.errors import ModelNotReady, Overloaded
from appliance.memory_budget import format_bytes, process_rss_bytes
from appliance.metrics import Metrics

__all__ = ["Lifecycle"]

log = logging.getLogger("appliance.lifecycle")

_MUST_LOAD = ("unloaded", "unloading")
"""States in which a request waits its turn to load the model (again)."""
_RETRY_AFTER_S = 5
_RECHECK_S = 0.5
"""While a model waits and nothing can be unloaded for it yet (the others loading, restarting or
stalled at the moment), the queue looks again this often."""


@dataclass(eq=False)
class _Waiting:
    """A model's place in the queue, shared by its requests."""

    since: float
    granted: asyncio.Future[asyncio.Future[None] | None]
    """Set when the model's turn comes: its load (or None when there is nothing to load)."""
    requests: int = 0


@dataclass(eq=False)
class _Eviction:
    """An unload started to make room for `beneficiary` (the model then first in the queue)."""

    beneficiary: EngineClient


@dataclass
class _Gauges:
    """The queue's metrics (no-ops without a registry)."""

    metrics: Metrics | None

    def update(self, waiting: int, engines: int, counted_bytes: int) -> None:
        if self.metrics:
            self.metrics.load_queue_length.set(waiting)
            self.metrics.loaded_engines.set(engines)
            self.metrics.memory_counted.set(counted_bytes)

    def budget(self, budget_bytes: int) -> None:
        if self.metrics:
            self.metrics.memory_budget.set(budget_bytes)

    def rss(self, model: str, rss_bytes: int) -> None:
        if self.metrics:
            self.metrics.model_rss.labels(model).set(rss_bytes)

    def granted(self, model: str, waited: float) -> None:
        if self.metrics:
            self.metrics.load_queue_wait.labels(model).observe(waited)

    def refused(self, model: str, reason: str) -> None:
        if self.metrics:
            self.metrics.load_queue_refused.labels(model, reason).inc()

    def evicted(self, model: str) -> None:
        if self.metrics:
            self.metrics.model_evictions.labels(model).inc()


class Lifecycle:
    """Loads, unloads and evictions of the engines `served()` returns, within the limit."""

    def __init__(
        self,
        served: Callable[[], Iterable[EngineClient]],
        *,
        max_loaded_models: int = 0,
        memory_budget: int = 0,
        load_queue_size: int = 8,
        min_resident_seconds: float = 10.0,
        metrics: Metrics | None = None,
        measure_rss: Callable[[int | None], int] = process_rss_bytes,
    ) -> None:
        self._served = served
        self.max_loaded_models = max_loaded_models
        """At most this many engine processes at once; 0: no limit."""
        self.memory_budget = memory_budget
        """At most this many bytes held by engine processes at once (see `held_bytes`); 0: no limit."""
        self._measure_rss = measure_rss
        """An engine process's resident memory in bytes by pid (0: unknown); /proc unless a test fakes it."""
        self.load_queue_size = load_queue_size
        """At most this many models waiting for room."""
        self.min_resident_seconds = min_resident_seconds
        """A model loaded on demand is not unloaded to make room before it has been ready this long."""
        self._queue: dict[EngineClient, _Waiting] = {}
        self._evicting: dict[EngineClient, _Eviction] = {}
        self._retiring: set[EngineClient] = set()
        self._beside: set[EngineClient] = set()
        """Replacements loading beside the engine they will replace (reloads, recycling)."""
        self._resident_since: weakref.WeakKeyDictionary[EngineClient, float] = weakref.WeakKeyDictionary()
        self._arriving: dict[EngineClient, int] = {}
        """Requests waiting for an engine to load: once it is ready, it is not unloaded before
        they have taken their places in it (whatever `min_resident_seconds`)."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._gauges = _Gauges(metrics)
        self._gauges.budget(memory_budget)

    # -- what the registry and the routes call -----------------------------------------------

    def attach(self, engine: EngineClient) -> None:
        """Let this lifecycle decide when `engine` loads, and hear when its processes exit."""
        engine.loader = self.ensure_loaded
        engine.on_released = self._released

    def adopt(self, engine: EngineClient) -> None:
        """Count `engine`, started beside the engine it will replace (a reload, a recycle), from
        now on: a replacement loads at once, and loads on demand wait while it holds room."""
        self.attach(engine)
        self._beside.add(engine)
        self._pump()

    @property
    def engines(self) -> int:
        """Engine processes counted against `max_loaded_models` now."""
        return sum(engine.processes for engine in self._tenants())

    @property
    def counted_bytes(self) -> int:
        """Bytes counted against `memory_budget` now (see `held_bytes`)."""
        return sum(self.held_bytes(engine) for engine in self._tenants())

    def held_bytes(self, engine: EngineClient) -> int:
        """The memory `engine`'s processes hold, as the budget counts it: the running one the larger
        of its estimate and its measured RSS, each one still exiting its estimate (its pid is gone)."""
        estimate = engine.graph.footprint_bytes
        running = engine.processes - engine.exiting
        measured = self.measured_bytes(engine) if running else 0
        return engine.exiting * estimate + running * max(estimate, measured)

    def measured_bytes(self, engine: EngineClient) -> int:
        """The running engine process's resident memory in bytes (0: none runs, or unknown)."""
        return self._measure_rss(engine.pid) if engine.pid is not None else 0

    def update_gauges(self) -> None:
        """Refresh the memory gauges (each engine's RSS, the bytes counted): the supervisor calls this
        on every tick, the queue whenever room changes."""
        for engine in self._served():
            self._gauges.rss(engine.name, self.measured_bytes(engine))
        self._update_queue_gauges()

    @property
    def waiting(self) -> list[str]:
        """The models waiting for room, first first."""
        return [engine.name for engine in self._queue]

    async def ensure_loaded(self, engine: EngineClient) -> None:
        """Wait until `engine` is loaded: for its turn in the queue and room, then for its load,
        within its graph's `load_timeout_seconds`. At once for an engine loaded, or loading at
        start-up. Raises Overloaded (the queue full) or ModelNotReady (not loaded in time, or the
        load failed), both 503 with Retry-After."""
        if engine.state not in _MUST_LOAD and engine.loading is None:
            return
        deadline = time.monotonic() + engine.graph.load_timeout_seconds
        self._arriving[engine] = self._arriving.get(engine, 0) + 1
        try:
            loading = engine.loading
            if engine.state in _MUST_LOAD:
                loading = await self._wait_turn(engine, deadline)
            await engine.wait_loaded(loading, deadline - time.monotonic())
        finally:
            self._arrived(engine)

    def _arrived(self, engine: EngineClient) -> None:
        left = self._arriving.pop(engine) - 1
        if left:
            self._arriving[engine] = left
        elif self._queue:
            # Not now: the caller takes its place in the engine (in flight) once this returns.
            asyncio.get_running_loop().call_soon(self._pump)

    async def load(self, engine: EngineClient) -> None:
        """`POST /admin/models/NAME/load`: an unload still draining that is not making room for a
        waiting model is cancelled (the model serves on, the same process); otherwise as
        `ensure_loaded`."""
        engine.last_used = time.monotonic()
        if engine not in self._evicting and engine.keep():
            self._pump()  # requests that queued while it drained are served again
            return
        await self.ensure_loaded(engine)

    async def unload(self, engine: EngineClient, drain_seconds: float = 0.0) -> bool:
        """Unload `engine` once its requests finish (at most `drain_seconds`); False if it was not
        loaded or `load` cancelled the unload. (Requests for it meanwhile queue to load it again.)"""
        try:
            return await engine.unload(drain_seconds)
        finally:
            self._pump()

    @staticmethod
    def may_come_and_go(engine: EngineClient) -> bool:
        """Whether `engine`'s graph lets it unload without an operator: it loads on demand or
        unloads when idle. A client's request to unload it (Ollama's `keep_alive: 0`) is honoured
        only then; a model the operator keeps loaded stays loaded."""
        return engine.graph.load == "on_demand" or engine.graph.idle_unload_seconds > 0

    @staticmethod
    def unloads_in(engine: EngineClient) -> float | None:
        """Seconds until the idle unload takes `engine` if no request comes (the watchdog's rule,
        `idle_unload_seconds`); None when nothing will. While requests are in flight (or it is
        not ready) the whole idle time is ahead."""
        idle = engine.graph.idle_unload_seconds
        return max(0.0, idle - engine.idle_seconds) if idle else None

    def retire(self, engine: EngineClient | None, drain_seconds: float) -> None:
        """Stop `engine`, which no longer serves (replaced or removed by a reload), once its
        in-flight requests finished (or `drain_seconds` ran out); it counts until it is gone."""
        if engine is None:
            return
        self._retiring.add(engine)

        async def drain_then_stop() -> None:
            try:
                deadline = time.monotonic() + drain_seconds
                while engine.in_flight and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                await engine.stop()
                log.info("engine %s (%s): stopped after drain", engine.name, engine.graph.source)
            finally:
                self._retiring.discard(engine)
                self._pump()

        self._spawn(drain_then_stop())

    async def close(self) -> None:
        """At shutdown: wait for retiring engines to stop; call off the rest."""
        if self._timer is not None:
            self._timer.cancel()
        for victim in list(self._evicting):
            victim.keep()
        self._evicting.clear()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- the queue ---------------------------------------------------------------------------

    async def _wait_turn(self, engine: EngineClient, deadline: float) -> asyncio.Future[None] | None:
        """Queue `engine` (or join its place) and wait for its turn; returns its load."""
        entry = self._queue.get(engine)
        if entry is None:
            if len(self._queue) >= self.load_queue_size:
                self._gauges.refused(engine.name, "full")
                raise Overloaded(
                    f"Model '{engine.name}' is not loaded and {len(self._queue)} models already wait for "
                    f"room to load (load_queue_size; {self._limits()}); "
                    "try again shortly.",
                    retry_after=_RETRY_AFTER_S,
                )
            entry = self._queue[engine] = _Waiting(time.monotonic(), asyncio.get_running_loop().create_future())
        elif entry.requests >= engine.graph.limits.max_queued_requests:
            self._gauges.refused(engine.name, "full")
            raise Overloaded(
                f"Model '{engine.name}' has {entry.requests} requests waiting for it to load, its limit "
                "(max_queued_requests); try again shortly.",
                retry_after=_RETRY_AFTER_S,
            )
        entry.requests += 1
        try:
            self._pump()
            return await asyncio.wait_for(asyncio.shield(entry.granted), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            self._gauges.refused(engine.name, "timeout")
            loaded = ", ".join(sorted(e.name for e in self._tenants() if e.processes)) or "none"
            raise ModelNotReady(
                f"Model '{engine.name}' waited {engine.graph.load_timeout_seconds:g} s (load_timeout_seconds) "
                f"for room to load under {self._limits()} (loaded: {loaded}); "
                "try again shortly.",
                retry_after=_RETRY_AFTER_S,
            ) from None
        finally:
            entry.requests -= 1
            if not entry.requests and self._queue.get(engine) is entry:
                del self._queue[engine]  # nobody waits for it any more: what it evicted is called off
                self._pump()

    def _pump(self) -> None:
        """Grant turns in queue order while they fit, then make room for the first that does not.
        Called whenever room may have changed: a request queued or gone, a load done, a process
        exited, an unload ended, a residency passed."""
        while self._call_off_evictions() | self._grant_turns():
            pass
        self._make_room()
        self._update_queue_gauges()

    def _update_queue_gauges(self) -> None:
        self._gauges.update(len(self._queue), self.engines, self.counted_bytes if self.memory_budget else 0)

    def _grant_turns(self) -> bool:
        """Give their turn to models that need no room (served again, or gone), then to unloaded
        models in queue order while they fit; True if any got it."""
        granted = False
        for engine in list(self._queue):
            if engine.state not in _MUST_LOAD:
                self._grant(engine, engine.loading)
                granted = True
        for engine in list(self._queue):
            # A model still unloading holds its own room until its process is gone: those behind
            # it need not wait for it.
            if engine.state == "unloading":
                continue
            if not self._fits(engine):
                break
            self._grant(engine, self._begin_load(engine))
            granted = True
        return granted

    def _grant(self, engine: EngineClient, loading: asyncio.Future[None] | None) -> None:
        entry = self._queue.pop(engine)
        self._gauges.granted(engine.name, time.monotonic() - entry.since)
        entry.granted.set_result(loading)

    def _begin_load(self, engine: EngineClient) -> asyncio.Future[None]:
        loading = engine.begin_load()

        def loaded(future: asyncio.Future[None]) -> None:
            if not future.cancelled() and future.exception() is None:
                # Its idle time starts now, not when its first request came: the load took some.
                self._resident_since[engine] = engine.last_used = time.monotonic()
                self._pump()  # a model waiting may have room made once this one has stayed long enough

        loading.add_done_callback(loaded)
        return loading

    def _fits(self, engine: EngineClient) -> bool:
        """Whether `engine` may start loading now: one more process within `max_loaded_models`,
        its estimate within what `memory_budget` leaves."""
        if self.max_loaded_models and self.engines >= self.max_loaded_models:
            return False
        return not self.memory_budget or self.counted_bytes + engine.graph.footprint_bytes <= self.memory_budget

    def _limits(self) -> str:
        """The limits in force, for messages."""
        limits = [f"max_loaded_models = {self.max_loaded_models}"] if self.max_loaded_models else []
        limits += [f"memory_budget = {format_bytes(self.memory_budget)}"] if self.memory_budget else []
        return " and ".join(limits) or "no limit"

    # -- making room -------------------------------------------------------------------------

    def _make_room(self) -> None:
        """Start the unloads the first waiting model needs beyond those already under way, or
        wake up when a loaded model's `min_resident_seconds` has passed."""
        first = next((engine for engine in self._queue if engine.state == "unloaded"), None)
        if first is None or not (self.max_loaded_models or self.memory_budget):
            return
        tenants = self._tenants()
        shortfall = 0
        if self.max_loaded_models:
            freeing = sum(self._freeing(engine) for engine in tenants)
            shortfall = sum(engine.processes for engine in tenants) - freeing - self.max_loaded_models + 1
        bytes_short = 0
        if self.memory_budget:
            kept = sum(self.held_bytes(engine) - self._freeing_bytes(engine) for engine in tenants)
            bytes_short = kept + first.graph.footprint_bytes - self.memory_budget
        if shortfall <= 0 and bytes_short <= 0:
            return
        now = time.monotonic()
        ready = [
            e
            for e in self._served()
            if e.state == "ready" and e is not first and e not in self._evicting and e not in self._arriving
        ]
        settled = [e for e in ready if now - self._resident_since.get(e, 0.0) >= self.min_resident_seconds]
        # Idle ones first, the least recently used of them; then the busy one loaded longest ago,
        # so models with steady traffic take turns.
        settled.sort(key=lambda e: (1, self._resident_since.get(e, 0.0)) if e.in_flight else (0, e.last_used))
        victims = 0
        while victims < len(settled) and (victims < shortfall or bytes_short > 0):
            bytes_short -= self.held_bytes(settled[victims])
            self._evict(settled[victims], first)
            victims += 1
        if victims < shortfall or bytes_short > 0:
            unsettled = [self._resident_since[e] for e in ready if e not in settled]
            self._wake_in(min(unsettled) + self.min_resident_seconds - now if unsettled else _RECHECK_S)

    def _freeing(self, engine: EngineClient) -> int:
        """Of `engine`'s processes, those on their way out without anything more to do."""
        going = engine.state == "unloading" or engine in self._evicting or engine in self._retiring
        return engine.processes if going else engine.exiting

    def _freeing_bytes(self, engine: EngineClient) -> int:
        """Of the bytes `held_bytes` counts for `engine`, those on their way out (as `_freeing`)."""
        going = engine.state == "unloading" or engine in self._evicting or engine in self._retiring
        return self.held_bytes(engine) if going else engine.exiting * engine.graph.footprint_bytes

    def _evict(self, victim: EngineClient, beneficiary: EngineClient) -> None:
        eviction = self._evicting[victim] = _Eviction(beneficiary)
        log.info(
            "engine %s: unloading to make room for %s (%s), once its %d requests in flight finish",
            victim.name,
            beneficiary.name,
            self._limits(),
            victim.in_flight,
        )

        async def unload() -> None:
            try:
                # No time limit: the requests in flight finish (each within its own); new ones queue.
                if self._evicting.get(victim) is eviction and await victim.unload(math.inf):
                    self._gauges.evicted(victim.name)
            finally:
                if self._evicting.get(victim) is eviction:
                    del self._evicting[victim]
                self._pump()

        self._spawn(unload())

    def _call_off_evictions(self) -> bool:
        """Cancel the unloads whose model no longer waits, not started yet or still draining; True
        if any was."""
        called_off = False
        for victim, eviction in list(self._evicting.items()):
            if eviction.beneficiary not in self._queue and (victim.state == "ready" or victim.keep()):
                del self._evicting[victim]
                called_off = True
        return called_off

    def _wake_in(self, seconds: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(max(0.0, seconds), self._pump)

    # -- bookkeeping -------------------------------------------------------------------------

    def _tenants(self) -> set[EngineClient]:
        return {*self._served(), *self._retiring, *self._beside}

    def _released(self, engine: EngineClient) -> None:
        if not engine.processes:
            self._beside.discard(engine)
        self._pump()

    def _spawn(self, work: Coroutine[object, object, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
