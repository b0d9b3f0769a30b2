"""appliance.media.work_pool: a bounded pool of its own per kind of work, stopped when its caller leaves."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from appliance.media.work_pool import Stopped, WorkPool


def test_at_most_workers_run_at_once():
    running, most = 0, 0
    lock = threading.Lock()

    def work(index: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.03)
        with lock:
            running -= 1
        return index

    async def main() -> list[int]:
        pool = WorkPool("test", 2)
        return await asyncio.gather(*(pool.call(work, index) for index in range(6)))

    assert asyncio.run(main()) == list(range(6))
    assert most == 2


def test_a_caller_that_leaves_stops_its_work_and_frees_nothing_before_it_ends():
    checkpoints = []

    def work(stop: threading.Event) -> None:
        for step in range(1000):
            if stop.is_set():
                checkpoints.append(step)
                raise Stopped
            time.sleep(0.005)

    async def main() -> tuple[int, int]:
        pool = WorkPool("test", 1)
        task = asyncio.ensure_future(pool.run(work))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        held = pool.running  # the work has not reached its checkpoint yet
        await pool.call(lambda: None)  # queued behind it: runs once the thread is free
        return held, pool.running

    held, after = asyncio.run(main())
    assert held == 1 and after == 0
    assert checkpoints and checkpoints[0] < 1000  # stopped at a checkpoint, not run to its end


def test_queued_work_whose_caller_left_never_runs():
    ran = []
    gate = threading.Event()

    async def main() -> None:
        pool = WorkPool("test", 1)
        blocker = asyncio.ensure_future(pool.call(gate.wait, 5))
        queued = asyncio.ensure_future(pool.call(ran.append, "queued"))
        await asyncio.sleep(0.02)
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued  # the caller has left: only now does the pool hear of it
        gate.set()
        await blocker
        await pool.call(ran.append, "later")

    asyncio.run(main())
    assert ran == ["later"]
