"""The one-at-a-time engines' shared bookkeeping (`engine/worker/fifo.py`), with a fake pipeline:
cancelling, the stats the server's watchdog reads, the queue served in order, and a pipeline built
anew after a call of it failed, before the next request runs (issue 49, C2)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from types import SimpleNamespace

from appliance.engine.messages import Batch, EngineEvent, Rejected
from appliance.engine.worker.fifo import FifoEngine
from appliance.engine.worker.stateful import StatefulEngine, _Job


@dataclass
class Job:
    request_id: int
    fail: bool = False
    cancelled: bool = False


class FakePipeline:
    """Remembers what it read: a dirty pipeline answers with the last failed call's input."""

    def __init__(self, serial: int) -> None:
        self.serial = serial
        self.left_behind: int | None = None

    def generate(self, job: Job) -> str:
        if self.left_behind is not None:
            return f"leaked {self.left_behind}"
        if job.fail:
            self.left_behind = job.request_id
            raise RuntimeError("over the window")
        return f"heard {job.request_id} on pipeline {self.serial}"


class FakeEngine(FifoEngine[Job]):
    def __init__(self) -> None:
        self.loads = 0
        super().__init__(SimpleNamespace(name="fake"), self._build)
        self.sent: list[object] = []
        self.send = self.sent.append

    def _build(self) -> FakePipeline:
        self.loads += 1
        return FakePipeline(self.loads)

    def handle(self, command: object) -> EngineEvent | None:
        return None

    def serve(self, job: Job) -> list[EngineEvent]:
        try:
            text = self.pipe.generate(job)
        except RuntimeError as exc:
            self.pipeline_failed()
            return [Rejected(request_id=job.request_id, message=str(exc), code="engine_error")]
        return [Rejected(request_id=job.request_id, message=text, code="ok")]


def answers(engine: FakeEngine, count: int) -> list[str]:
    deadline = time.monotonic() + 10
    while len(engine.sent) < count:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return [event.message for batch in engine.sent for event in batch.events if isinstance(batch, Batch)]


def test_a_failed_call_is_followed_by_a_pipeline_built_anew() -> None:
    engine = FakeEngine()
    threading.Thread(target=engine._serve_forever, daemon=True).start()
    for job in (Job(1), Job(2, fail=True), Job(3), Job(4)):
        engine.enqueue(job)
    assert answers(engine, 4) == [
        "heard 1 on pipeline 1",
        "over the window",
        "heard 3 on pipeline 2",
        "heard 4 on pipeline 2",
    ]
    assert engine.loads == 2 and engine.rebuilds == 1


def test_stats_say_how_long_the_running_request_waited() -> None:
    # The server's watchdog judges a hang from this: the engine's command thread keeps sending
    # stats while a stuck generate() holds the other.
    engine = FakeEngine()
    assert engine._stats().stalled_seconds == 0.0  # idle: never a hang
    engine.running = Job(1)
    engine._last_progress = time.monotonic() - 6
    assert 6 <= engine._stats().stalled_seconds < 7
    engine.progressed(3)
    assert engine._stats().stalled_seconds < 1 and engine._stats().steps == 3


def test_cancel_drops_a_queued_request_and_flags_the_running_one() -> None:
    engine = FakeEngine()
    running, queued, last = Job(1), Job(2), Job(3)
    for job in (running, queued, last):
        engine.enqueue(job)
    engine._queue.popleft()
    engine.running = running
    engine._cancel(2)
    assert list(engine._queue) == [last] and 2 not in engine._jobs
    engine._cancel(1)
    assert running.cancelled and engine._jobs[1] is running  # it ends at its next checkpoint
    engine._cancel(99)  # unknown or finished: nothing happens
    assert engine._stats().running == 2 and engine._stats().waiting == 1


def test_the_stateful_engine_counts_the_running_requests_share_of_its_context() -> None:
    engine = object.__new__(StatefulEngine)  # no pipeline: only the bookkeeping
    FifoEngine.__init__(engine, SimpleNamespace(name="m"), lambda: None)
    engine.max_context = 100
    running = _Job(request_id=1, prepared=SimpleNamespace(prompt_tokens=30), outputs=None, final_ids={2})
    running.generated = 20
    for job in (running, _Job(request_id=2, prepared=None, outputs=None, final_ids=set())):
        engine.enqueue(job)
    engine._queue.popleft()
    engine.running = running
    stats = engine._stats()
    assert (stats.running, stats.waiting, stats.kv_cache_usage) == (2, 1, 0.5)
    engine.send = lambda message: None
    engine._cancel(2)
    assert engine._stats().waiting == 0
