"""The hang watchdog (`runtime.watchdog.restart_hung_engines` with `EngineClient.silent_seconds`): an
engine that makes no progress shows as stalled, then is killed, whether or not clients wait."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from appliance.engine.messages import Stats
from appliance.errors import ModelNotReady
from appliance.graphfiles import Graph, Limits
from appliance.runtime.registry import ModelRegistry
from appliance.runtime.watchdog import restart_hung_engines
from tests.fakes import FakeEngineClient


class _Process:
    pid = 4242

    def __init__(self) -> None:
        self.killed = False

    def is_alive(self) -> bool:
        return not self.killed

    def kill(self) -> None:
        self.killed = True


def _engine(hang_seconds: float = 10) -> tuple[FakeEngineClient, _Process]:
    engine = FakeEngineClient(
        Graph(name="fake", model_path="/nonexistent", limits=Limits(engine_hang_seconds=hang_seconds))
    )
    engine.state = "ready"
    process = _Process()
    engine._process = process
    return engine, process


def _silent_for(engine: FakeEngineClient, seconds: float) -> None:
    engine.last_heard = time.monotonic() - seconds


def test_idle_engine_silent_past_the_limit_is_killed(caplog: pytest.LogCaptureFixture) -> None:
    engine, process = _engine(hang_seconds=10)
    models, stalled = ModelRegistry([engine]), set[str]()
    _silent_for(engine, 1)
    restart_hung_engines(models, stalled)
    assert engine.status == "ready" and models.all_ready and not process.killed
    with caplog.at_level(logging.WARNING):
        _silent_for(engine, 6)  # past half the limit: shown as stalled, not yet killed
        restart_hung_engines(models, stalled)
        restart_hung_engines(models, stalled)
        assert engine.status == "stalled" and not models.all_ready and not process.killed
        assert engine.in_flight == 0
        with pytest.raises(ModelNotReady, match="stalled"):
            engine.reserve()
        _silent_for(engine, 11)
        restart_hung_engines(models, stalled)
    assert process.killed
    stall_lines = [r.message for r in caplog.records if "stalled" in r.message]
    assert len(stall_lines) == 1  # logged once per stall
    assert any(
        "killing pid 4242: no progress for 11" in r.message and "0 requests in flight" in r.message
        for r in caplog.records
    )


def test_loading_is_not_a_hang() -> None:
    engine, process = _engine(hang_seconds=1)
    engine.state = "loading"
    _silent_for(engine, 3600)
    restart_hung_engines(ModelRegistry([engine]), set())
    assert engine.status == "loading" and not process.killed


def test_short_limits_keep_a_floor_above_the_stats_interval() -> None:
    engine, _ = _engine(hang_seconds=1)
    assert engine.stall_seconds == 1
    engine, _ = _engine(hang_seconds=3)
    assert engine.stall_seconds == 2
    engine, _ = _engine(hang_seconds=120)
    assert engine.stall_seconds == 60


def test_a_stateful_engine_that_talks_but_makes_no_tokens_is_stalled() -> None:
    async def scenario() -> None:
        engine, process = _engine(hang_seconds=10)
        engine.start()
        engine._process = process
        # Its command thread keeps answering (a frame just arrived) while generate() is stuck.
        engine._dispatch(Stats(running=1, kv_cache_usage=0.1, steps=5, stalled_seconds=7))
        assert engine.status == "stalled"
        engine._dispatch(Stats(running=1, kv_cache_usage=0.1, steps=6, stalled_seconds=11))
        restart_hung_engines(ModelRegistry([engine]), set())
        assert process.killed
        engine._dispatch(Stats(running=0, kv_cache_usage=0.0, steps=6))  # idle again
        assert engine.silent_seconds < 1

    asyncio.run(scenario())


def test_restart_back_off_grows_then_repeats() -> None:
    from appliance.runtime.backoff import RESTART_DELAYS_S, restart_delay

    assert [restart_delay(n) for n in range(7)] == [*RESTART_DELAYS_S, RESTART_DELAYS_S[-1], RESTART_DELAYS_S[-1]]
    assert RESTART_DELAYS_S == tuple(sorted(RESTART_DELAYS_S))
