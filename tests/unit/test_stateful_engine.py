"""The stateful engine's bookkeeping that needs no pipeline: cancelling a queued request, and its
stats (with how long the running request has waited, which the server's watchdog reads)."""

from __future__ import annotations

import threading
import time
from collections import deque
from types import SimpleNamespace

from appliance.engine.messages import Cancel
from appliance.engine.worker.stateful import StatefulEngine, _Job


def _engine() -> StatefulEngine:
    # Built without __init__ (which loads a pipeline): only the fields the bookkeeping uses.
    engine = object.__new__(StatefulEngine)
    engine.graph = SimpleNamespace(name="m")
    engine.max_context = 100
    engine._jobs, engine._queue, engine._wake = {}, deque(), threading.Condition()
    engine._running, engine._tokens, engine._last_progress = None, 0, time.monotonic()
    return engine


def _job(request_id: int, prompt_tokens: int = 10) -> _Job:
    prepared = SimpleNamespace(prompt_tokens=prompt_tokens)
    return _Job(request_id=request_id, prepared=prepared, outputs=None, final_ids={2})


def _queue(engine: StatefulEngine, *jobs: _Job) -> None:
    for job in jobs:
        engine._jobs[job.request_id] = job
        engine._queue.append(job)


def test_stats_say_how_long_the_running_request_waited_for_a_token() -> None:
    # The server's watchdog judges a hang from this: the engine's command thread keeps sending
    # stats while a stuck generate() holds the other.
    engine = _engine()
    assert engine._stats().stalled_seconds == 0.0  # idle: never a hang
    engine._running = _job(1)
    engine._last_progress = time.monotonic() - 6
    assert 6 <= engine._stats().stalled_seconds < 7


def test_cancel_drops_a_queued_request_and_flags_the_running_one() -> None:
    engine = _engine()
    running, queued, last = _job(1), _job(2), _job(3)
    _queue(engine, queued, last)
    engine._jobs[1], engine._running = running, running
    engine._handle(Cancel(request_id=2))
    assert list(engine._queue) == [last] and 2 not in engine._jobs
    engine._handle(Cancel(request_id=1))
    assert running.cancelled and engine._jobs[1] is running  # it ends at its next token
    engine._handle(Cancel(request_id=99))  # unknown or finished: nothing happens


def test_stats_count_the_queue_and_the_running_request() -> None:
    engine = _engine()
    running = _job(1, prompt_tokens=30)
    running.generated = 20
    _queue(engine, _job(2), _job(3))
    engine._jobs[1], engine._running = running, running
    stats = engine._stats()
    assert (stats.running, stats.waiting, stats.kv_cache_usage) == (3, 2, 0.5)
