"""The load queue under `memory_budget` (`runtime.lifecycle.Lifecycle`), on the fake engine
processes of test_lifecycle.py: a load waits until its graph's estimated footprint fits beside what
the loaded engines hold (the larger of estimate and measured RSS each), as many idle models are
unloaded as the bytes need, models with steady traffic take turns without a refusal, and
`max_loaded_models` still holds beside the budget."""

from __future__ import annotations

import asyncio

from appliance.engine import EngineClient
from appliance.graphfiles import Graph, SchedulerSettings
from appliance.graphfiles.footprint import ENGINE_OVERHEAD_BYTES, GIB
from appliance.metrics import Metrics
from appliance.runtime.registry import ModelRegistry
from tests.unit.test_lifecycle import _loads, _Process, _request, _run, _served, _until, fake_processes

__all__ = ["fake_processes"]  # the fixture, autouse here too

SMALL = 1 * GIB + ENGINE_OVERHEAD_BYTES
"""The footprint of a graph with `cache_size = 1` and no model files (no weights)."""


def _engine(name: str, cache_size: int = 1) -> EngineClient:
    graph = Graph(
        name=name,
        model_path="/nonexistent",
        load="on_demand",
        load_timeout_seconds=30,
        scheduler=SchedulerSettings(cache_size=cache_size),
    )
    return EngineClient(graph, restart_delay=lambda _: 0.0)


def _registry(*engines: EngineClient, budget: int, rss: dict[int, int] | None = None, **options) -> ModelRegistry:
    measured = rss if rss is not None else {}
    return ModelRegistry(
        list(engines), memory_budget=budget, measure_rss=lambda pid: measured.get(pid or 0, 0), **options
    )


def test_the_footprint_is_what_the_graph_says() -> None:
    assert _engine("a").graph.footprint_bytes == SMALL
    assert _engine("big", cache_size=2).graph.footprint_bytes == 2 * GIB + ENGINE_OVERHEAD_BYTES


def test_a_budget_for_two_serves_three_models_with_steady_traffic() -> None:
    """The issue's case in bytes: three models, room for two; every request of all three served,
    the bytes counted never above the budget."""

    async def scenario() -> None:
        a, b, c = _engine("a"), _engine("b"), _engine("c")
        metrics = Metrics()
        budget = 2 * SMALL + SMALL // 2
        models = _registry(a, b, c, budget=budget, min_resident_seconds=0.05, metrics=metrics)
        stop = asyncio.Event()
        served = {"a": 0, "b": 0, "c": 0}
        counted: list[int] = []

        async def steady(engine: EngineClient) -> None:
            while not stop.is_set():
                await _served(engine, 0.01)
                served[engine.name] += 1

        async def sample() -> None:
            while not stop.is_set():
                counted.append(models.lifecycle.counted_bytes)
                await asyncio.sleep(0.002)

        sampler = asyncio.create_task(sample())
        clients = [asyncio.create_task(steady(engine)) for engine in (a, b, c)]
        await _until(lambda: min(served.values()) >= 5)
        stop.set()
        await asyncio.gather(*clients, sampler)  # no request failed
        assert max(counted) <= budget and max(counted) > SMALL
        evictions = sum(
            metrics.registry.get_sample_value("appliance_model_evictions_total", {"model": name}) or 0 for name in "abc"
        )
        assert evictions >= 1
        assert metrics.registry.get_sample_value("appliance_memory_budget_bytes") == budget
        assert metrics.registry.get_sample_value("appliance_memory_counted_bytes") <= budget

    _run(scenario)


def test_a_big_model_unloads_as_many_idle_ones_as_its_bytes_need(fake_processes: list[_Process]) -> None:
    async def scenario() -> None:
        a, b, big = _engine("a"), _engine("b"), _engine("big", cache_size=2)
        models = _registry(a, b, big, budget=2 * SMALL, min_resident_seconds=0)
        await _served(a)
        await _served(b)
        assert (a.state, b.state) == ("ready", "ready")  # two small ones fit
        await _served(big)  # 2 GiB + overhead: both had to go
        assert (a.state, b.state, big.state) == ("unloaded", "unloaded", "ready")
        assert models.lifecycle.counted_bytes == big.graph.footprint_bytes
        await _served(a)  # the big one is unloaded for it: a small one beside it is over the budget
        assert (a.state, big.state) == ("ready", "unloaded")
        assert _loads(fake_processes) == ["a", "b", "big", "a"]

    _run(scenario)


def test_one_idle_model_is_enough_when_it_frees_the_bytes(fake_processes: list[_Process]) -> None:
    async def scenario() -> None:
        a, b, big = _engine("a"), _engine("b"), _engine("big", cache_size=2)
        models = _registry(a, b, big, budget=3 * SMALL, min_resident_seconds=0)
        await _served(a)
        await _served(b)  # b used last: a is the least recently used
        await _served(big)
        assert (a.state, b.state, big.state) == ("unloaded", "ready", "ready")
        assert models.lifecycle.counted_bytes == SMALL + big.graph.footprint_bytes

    _run(scenario)


def test_measured_rss_above_the_estimate_is_what_counts(fake_processes: list[_Process]) -> None:
    async def scenario() -> None:
        a, b = _engine("a"), _engine("b")
        rss: dict[int, int] = {}
        models = _registry(a, b, budget=2 * SMALL, rss=rss, min_resident_seconds=0)
        await _served(a)
        assert a.pid is not None
        assert models.lifecycle.counted_bytes == SMALL  # RSS unknown: the estimate counts
        rss[a.pid] = 200 * 1024 * 1024
        # An idle engine's RSS is below its estimate (its KV cache not written yet): the estimate
        # still counts, or b would be let in and a could fill its cache past the budget.
        assert models.lifecycle.counted_bytes == SMALL
        assert models.lifecycle.measured_bytes(a) == 200 * 1024 * 1024
        rss[a.pid] = SMALL + GIB  # a grew past its estimate: b no longer fits beside it
        assert models.lifecycle.counted_bytes == SMALL + GIB
        await _served(b)
        assert (a.state, b.state) == ("unloaded", "ready")

    _run(scenario)


def test_a_model_waits_while_nothing_can_be_unloaded_yet(fake_processes: list[_Process]) -> None:
    """Room is made only once the loaded model has stayed `min_resident_seconds`."""

    async def scenario() -> None:
        a, b = _engine("a"), _engine("b")
        models = _registry(a, b, budget=SMALL + SMALL // 2, min_resident_seconds=0.3)
        await _served(a)
        waiting = asyncio.create_task(_served(b))
        await _until(lambda: models.lifecycle.waiting == ["b"])
        await asyncio.sleep(0.1)
        assert (a.state, b.state) == ("ready", "unloaded")
        await waiting
        assert (a.state, b.state) == ("unloaded", "ready")

    _run(scenario)


def test_max_loaded_models_still_holds_beside_the_budget(fake_processes: list[_Process]) -> None:
    async def scenario() -> None:
        a, b = _engine("a"), _engine("b")
        models = _registry(a, b, budget=10 * SMALL, max_loaded_models=1, min_resident_seconds=0)
        await _served(a)
        busy = await _request(a)
        waiting = asyncio.create_task(_served(b))
        await _until(lambda: a.state == "unloading")  # room for b's bytes, not for a second engine
        busy.release()
        await waiting
        assert (a.state, b.state) == ("unloaded", "ready") and models.lifecycle.engines == 1

    _run(scenario)
