"""The load queue under `max_loaded_models` (`runtime.lifecycle.Lifecycle`), on real `EngineClient`s
whose engine processes are fakes that load at once and exit when told: loads wait in FIFO order
for room, the queue is bounded, a wait past `load_timeout_seconds` is a 503 that calls its eviction
off, models with steady traffic are unloaded between their requests, never before
`min_resident_seconds`, engines retiring after a reload count until gone, and a load during an
unload's drain cancels it."""

from __future__ import annotations

import asyncio
import itertools
import queue
import time
from collections.abc import Awaitable, Callable

import pytest

import appliance.engine.host.process_lifecycle as lifecycle_module
from appliance.engine import EngineClient
from appliance.engine.host.calls import Reservation
from appliance.engine.messages import Ready
from appliance.errors import ModelNotReady, Overloaded
from appliance.graphfiles import Graph, Limits
from appliance.metrics import Metrics
from appliance.runtime.registry import ModelRegistry

_pids = itertools.count(1000)


class _Process:
    """An engine process: ready on the loop's next turn, gone when shut down."""

    log: list[_Process]

    def __init__(self, graph: Graph, *, on_message: Callable[[object], None], on_exit: Callable[[], None]) -> None:
        self.model = graph.name
        self.pid = next(_pids)
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.alive = True
        self.started_at = time.monotonic()
        self.ready_at: float | None = None
        self.exited_at: float | None = None
        self._on_message = on_message
        asyncio.get_running_loop().call_soon(self._ready)
        _Process.log.append(self)

    def _ready(self) -> None:
        if self.alive:
            self.ready_at = time.monotonic()
            self._on_message(Ready(max_context=64, load_seconds=0.0))

    def is_alive(self) -> bool:
        return self.alive

    def kill(self) -> None:
        self.alive = False

    def exit_code(self) -> int:
        return 0

    async def shut_down(self, timeout: float) -> None:
        await asyncio.sleep(0.01)  # exiting takes a moment, during which its memory is still held
        self.alive = False
        self.exited_at = time.monotonic()


@pytest.fixture(autouse=True)
def fake_processes(monkeypatch: pytest.MonkeyPatch) -> list[_Process]:
    _Process.log = []
    monkeypatch.setattr(lifecycle_module, "EngineProcess", _Process)
    return _Process.log


def _engine(name: str, *, load_timeout: float = 30.0, max_queued: int = 512) -> EngineClient:
    graph = Graph(
        name=name,
        model_path="/nonexistent",
        load="on_demand",
        load_timeout_seconds=load_timeout,
        limits=Limits(max_queued_requests=max_queued),
    )
    return EngineClient(graph, restart_delay=lambda _: 0.0)


def _registry(*engines: EngineClient, limit: int, **options) -> ModelRegistry:
    return ModelRegistry(list(engines), max_loaded_models=limit, **options)


async def _request(engine: EngineClient) -> Reservation:
    """What a request does before its engine sees it: wait for the model, then take a place."""
    await engine.ensure_loaded()
    return engine.reserve()


async def _served(engine: EngineClient, seconds: float = 0.0) -> None:
    """One request, in flight for `seconds`."""
    with await _request(engine):
        await asyncio.sleep(seconds)


async def _until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the condition"
        await asyncio.sleep(0.005)


def _run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())


def _loads(log: list[_Process]) -> list[str]:
    return [process.model for process in log]


def test_loads_wait_their_turn_in_order(fake_processes: list[_Process]) -> None:
    async def scenario() -> None:
        a, b, c, d = (_engine(name) for name in "abcd")
        models = _registry(a, b, c, d, limit=1, min_resident_seconds=0.05)
        await _served(a)
        waiting = []
        for engine in (b, c, d):  # queued in this order
            waiting.append(asyncio.create_task(_served(engine)))
            await _until(lambda engine=engine: engine.name in models.lifecycle.waiting or engine.state == "ready")
        await asyncio.gather(*waiting)
        assert _loads(fake_processes) == ["a", "b", "c", "d"]
        assert models.lifecycle.engines == 1 and [e.name for e in models.loaded()] == ["d"]

    _run(scenario)


def test_requests_for_one_model_share_its_place_and_its_load(fake_processes: list[_Process]) -> None:
    async def scenario() -> None:
        a, b = _engine("a"), _engine("b")
        models = _registry(a, b, limit=1, min_resident_seconds=0.05)
        await _served(a)
        await asyncio.gather(*(_served(b) for _ in range(10)))
        assert _loads(fake_processes) == ["a", "b"]
        assert models.lifecycle.waiting == []

    _run(scenario)


def test_the_queue_is_bounded() -> None:
    async def scenario() -> None:
        a, b, c = _engine("a"), _engine("b", max_queued=2), _engine("c")
        metrics = Metrics()
        models = _registry(a, b, c, limit=1, load_queue_size=1, min_resident_seconds=60, metrics=metrics)
        await _served(a)  # resident for a minute: nothing can be unloaded for the others
        waiting = [asyncio.create_task(_served(b)) for _ in range(2)]
        await _until(lambda: models.lifecycle.waiting == ["b"])
        await asyncio.sleep(0.01)
        with pytest.raises(Overloaded, match="max_queued_requests") as refused:
            await _served(b)  # a third request for b: beyond its max_queued_requests
        assert refused.value.retry_after
        with pytest.raises(Overloaded, match=r"1 models already wait .*load_queue_size") as refused:
            await _served(c)
        assert refused.value.status == 503 and refused.value.retry_after
        assert metrics.registry.get_sample_value("appliance_load_queue_length") == 1
        assert metrics.registry.get_sample_value("appliance_load_queue_refused_total", {"model": "c", "reason": "full"})
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        assert models.lifecycle.waiting == [] and b.state == "unloaded"
        assert metrics.registry.get_sample_value("appliance_load_queue_length") == 0

    _run(scenario)


def test_a_wait_past_load_timeout_is_a_503_and_its_eviction_is_called_off(fake_processes: list[_Process]) -> None:
    async def scenario() -> None:
        a, b = _engine("a"), _engine("b", load_timeout=0.3)
        metrics = Metrics()
        models = _registry(a, b, limit=1, min_resident_seconds=0, metrics=metrics)
        long_request = await _request(a)  # a request in flight for longer than b waits
        pid = a.pid
        with pytest.raises(ModelNotReady, match=r"waited 0.3 s .*load_timeout_seconds.* for room") as refused:
            await _served(b)
        assert refused.value.status == 503 and refused.value.retry_after
        # a was draining to make room for b; with b gone it serves on, the same process.
        assert a.state == "ready" and a.pid == pid and not a.draining
        await _served(a)
        long_request.release()
        await asyncio.sleep(0.1)
        assert a.state == "ready" and a.pid == pid and _loads(fake_processes) == ["a"]
        assert metrics.registry.get_sample_value(
            "appliance_load_queue_refused_total", {"model": "b", "reason": "timeout"}
        )
        assert models.lifecycle.waiting == []

    _run(scenario)


def test_models_with_steady_traffic_are_unloaded_between_their_requests() -> None:
    """The issue's case: two models busy with back-to-back requests, a third asked again and again:
    every request of all three is served, none refused."""

    async def scenario() -> None:
        a, b, c = _engine("a"), _engine("b"), _engine("c")
        metrics = Metrics()
        models = _registry(a, b, c, limit=2, min_resident_seconds=0.1, metrics=metrics)
        stop = asyncio.Event()
        served = {"a": 0, "b": 0, "c": 0}

        async def steady(engine: EngineClient) -> None:
            while not stop.is_set():
                await _served(engine, 0.01)
                served[engine.name] += 1

        neighbours = [asyncio.create_task(steady(engine)) for engine in (a, b)]
        await _until(lambda: served["a"] and served["b"])
        for _ in range(5):
            await _served(c, 0.01)
            served["c"] += 1
        stop.set()
        await asyncio.gather(*neighbours)  # no request of theirs failed either
        assert served["c"] == 5 and served["a"] > 1 and served["b"] > 1
        evictions = sum(
            metrics.registry.get_sample_value("appliance_model_evictions_total", {"model": name}) or 0 for name in "abc"
        )
        assert evictions >= 1
        assert metrics.registry.get_sample_value("appliance_load_queue_wait_seconds_count", {"model": "c"}) >= 1
        assert models.lifecycle.engines <= 2

    _run(scenario)


def test_no_model_is_unloaded_to_make_room_before_its_minimum_residency(fake_processes: list[_Process]) -> None:
    """Two models taking turns under a limit of one: each load serves for at least
    `min_resident_seconds` before it is unloaded, however often the other is asked for."""

    async def scenario() -> None:
        a, b = _engine("a"), _engine("b")
        models = _registry(a, b, limit=1, min_resident_seconds=0.2)
        stop = asyncio.Event()

        async def steady(engine: EngineClient) -> None:
            while not stop.is_set():
                await _served(engine, 0.005)

        clients = [asyncio.create_task(steady(engine)) for engine in (a, b)]
        await _until(lambda: len(fake_processes) >= 4)
        stop.set()
        await asyncio.gather(*clients)
        unloaded = [process for process in fake_processes if process.exited_at is not None]
        assert len(unloaded) >= 3
        for process in unloaded:
            assert process.ready_at is not None and process.exited_at - process.ready_at >= 0.2
        assert models.lifecycle.engines <= 1

    _run(scenario)


def test_an_idle_model_goes_first_then_the_busy_one_loaded_longest_ago(fake_processes: list[_Process]) -> None:
    async def scenario() -> None:
        a, b, c, d = (_engine(name) for name in "abcd")
        models = _registry(a, b, c, d, limit=2, min_resident_seconds=0)
        await _served(a)
        busy_b = await _request(b)
        await _served(c)  # a was idle: unloaded for c, though b was loaded later
        assert (a.state, b.state, c.state) == ("unloaded", "ready", "ready")
        busy_c = await _request(c)
        waiting = asyncio.create_task(_served(d))
        await _until(lambda: b.state == "unloading")  # both busy: b was loaded before c
        assert c.state == "ready"
        busy_b.release()
        await waiting
        busy_c.release()
        assert (b.state, c.state, d.state) == ("unloaded", "ready", "ready")
        assert models.lifecycle.engines == 2

    _run(scenario)


def test_engines_retiring_after_a_reload_count_until_they_are_gone(fake_processes: list[_Process]) -> None:
    async def scenario() -> None:
        old_a, b, c = _engine("a"), _engine("b"), _engine("c")
        models = _registry(old_a, b, c, limit=2, min_resident_seconds=0)
        in_flight = await _request(old_a)
        await _served(b)
        old_process = old_a._process
        # A reload replaces a: the new engine serves from now on, the old one drains its request.
        new_a = _engine("a")
        models.lifecycle.retire(models.put(new_a), drain_seconds=30)
        assert models.lifecycle.engines == 2
        waiting = asyncio.create_task(_served(c))
        await asyncio.sleep(0.1)
        # c waits for the retiring engine, which is on its way out: b, idle, is not unloaded for it.
        assert models.lifecycle.waiting == ["c"] and c.state == "unloaded" and b.state == "ready"
        in_flight.release()
        await waiting
        started = next(process for process in fake_processes if process.model == "c")
        assert old_process.exited_at is not None and started.started_at >= old_process.exited_at
        assert b.state == "ready" and models.lifecycle.engines == 2
        # The new a fits only once one of the others goes: b, the least recently used.
        await _served(new_a)
        assert (b.state, c.state, new_a.state) == ("unloaded", "ready", "ready")
        assert models.lifecycle.engines == 2

    _run(scenario)


def test_a_replacement_loading_beside_its_engine_counts() -> None:
    async def scenario() -> None:
        a, b = _engine("a"), _engine("b", load_timeout=0.2)
        models = _registry(a, b, limit=2, min_resident_seconds=60)
        await _served(a)
        fresh = _engine("a")
        fresh.start()
        models.lifecycle.adopt(fresh)  # a recycle: a fresh process of a loads beside the old one
        assert models.lifecycle.engines == 2
        with pytest.raises(ModelNotReady, match="for room"):
            await _served(b)
        models.lifecycle.retire(models.put(fresh), drain_seconds=0)
        await _served(b)  # the old a gone, b fits
        assert models.lifecycle.engines == 2

    _run(scenario)


def test_a_load_during_an_unload_drain_cancels_the_unload(fake_processes: list[_Process]) -> None:
    async def scenario() -> None:
        a = _engine("a")
        models = _registry(a, limit=0)
        in_flight = await _request(a)
        pid = a.pid
        unloading = asyncio.create_task(models.lifecycle.unload(a, drain_seconds=30))
        await _until(lambda: a.state == "unloading")
        queued = asyncio.create_task(_served(a))  # a request meanwhile waits to load it again
        await asyncio.sleep(0.05)
        assert not queued.done()
        await models.lifecycle.load(a)
        assert a.state == "ready" and a.pid == pid
        await queued  # served by the same process
        in_flight.release()
        assert await unloading is False
        assert a.state == "ready" and a.pid == pid and _loads(fake_processes) == ["a"]

    _run(scenario)


def test_a_request_during_an_unload_drain_is_served_after_it(fake_processes: list[_Process]) -> None:
    async def scenario() -> None:
        a = _engine("a")
        models = _registry(a, limit=1)
        in_flight = await _request(a)
        unloading = asyncio.create_task(models.lifecycle.unload(a, drain_seconds=30))
        await _until(lambda: a.state == "unloading")
        queued = asyncio.create_task(_served(a))
        await asyncio.sleep(0.05)
        in_flight.release()
        assert await unloading is True
        await queued
        assert _loads(fake_processes) == ["a", "a"] and a.state == "ready"

    _run(scenario)


def test_a_load_during_an_unload_that_makes_room_waits_its_turn(fake_processes: list[_Process]) -> None:
    async def scenario() -> None:
        a, b = _engine("a"), _engine("b")
        models = _registry(a, b, limit=1, min_resident_seconds=0)
        in_flight = await _request(a)
        waiting = asyncio.create_task(_served(b))
        await _until(lambda: a.state == "unloading")
        loading = asyncio.create_task(models.lifecycle.load(a))
        await asyncio.sleep(0.05)
        assert a.state == "unloading" and not loading.done()  # not cancelled: b would starve
        in_flight.release()
        await waiting
        await loading
        assert _loads(fake_processes) == ["a", "b", "a"] and a.state == "ready"

    _run(scenario)


def test_without_a_limit_nothing_waits(fake_processes: list[_Process]) -> None:
    async def scenario() -> None:
        engines = [_engine(name) for name in "abcde"]
        models = _registry(*engines, limit=0)
        await asyncio.gather(*(_served(engine) for engine in engines))
        assert models.lifecycle.engines == 5 and len(fake_processes) == 5

    _run(scenario)


def test_a_model_still_unloading_does_not_hold_up_the_models_behind_it(fake_processes: list[_Process]) -> None:
    async def scenario() -> None:
        a, b = _engine("a"), _engine("b")
        models = _registry(a, b, limit=2)
        in_flight = await _request(a)
        unloading = asyncio.create_task(models.lifecycle.unload(a, drain_seconds=30))
        await _until(lambda: a.state == "unloading")
        queued = asyncio.create_task(_served(a))  # first in the queue, until a has unloaded
        await _until(lambda: models.lifecycle.waiting == ["a"])
        await _served(b)  # room for one more: b does not wait for a's drain
        assert not queued.done() and a.state == "unloading"
        in_flight.release()
        assert await unloading is True
        await queued
        assert _loads(fake_processes) == ["a", "b", "a"] and models.lifecycle.engines == 2

    _run(scenario)
