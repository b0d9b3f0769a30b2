"""Grammar builds run on a small pool of their own, once per key in flight, are abandoned when
their last waiter leaves, and are refused beyond a bound (issue 40, H1)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from appliance.errors import InvalidRequest, Overloaded
from appliance.grammar.bounds import checkpoint
from appliance.service.grammar_builds import GrammarBuilds


@pytest.fixture
def builds() -> Iterator[GrammarBuilds]:
    pool = GrammarBuilds(workers=1, max_pending=2)
    yield pool
    pool.close()


class Work:
    """A build that waits on `release` (checking for abandonment meanwhile; at most 10 s, so that a
    test that fails does not hang), counting its runs and naming the thread it ran on."""

    def __init__(self, result: str | None = "root ::= x", error: InvalidRequest | None = None) -> None:
        self.result, self.error = result, error
        self.started = threading.Event()
        self.release = threading.Event()
        self.runs = 0
        self.threads: list[str] = []
        self.stopped = threading.Event()

    def __call__(self) -> str | None:
        self.runs += 1
        self.threads.append(threading.current_thread().name)
        self.started.set()
        try:
            for _ in range(2_000):
                if self.release.wait(0.005):
                    break
                checkpoint()
        except BaseException:
            self.stopped.set()
            raise
        if self.error is not None:
            raise self.error
        return self.result


async def started(work: Work) -> None:
    assert await asyncio.to_thread(work.started.wait, 10)


def test_builds_run_on_the_pool_not_the_default_executor(builds: GrammarBuilds) -> None:
    work = Work()
    work.release.set()
    assert asyncio.run(builds.build(b"k", work)) == "root ::= x"
    assert work.threads[0].startswith("grammar"), work.threads


def test_the_same_key_in_flight_is_built_once_and_then_remembered(builds: GrammarBuilds) -> None:
    work = Work()

    async def scenario() -> list[str | None]:
        waiters = [asyncio.ensure_future(builds.build(b"k", work)) for _ in range(5)]
        await started(work)
        work.release.set()
        return [*await asyncio.gather(*waiters), await builds.build(b"k", work)]

    assert asyncio.run(scenario()) == ["root ::= x"] * 6
    assert work.runs == 1


def test_refusals_are_remembered_too(builds: GrammarBuilds) -> None:
    work = Work(error=InvalidRequest("no", param="response_format"))
    work.release.set()
    for _ in range(2):
        with pytest.raises(InvalidRequest, match="no"):
            asyncio.run(builds.build(b"k", work))
    assert work.runs == 1


def test_one_waiter_leaving_does_not_stop_the_build_for_the_others(builds: GrammarBuilds) -> None:
    work = Work()

    async def scenario() -> str | None:
        leaving = asyncio.ensure_future(builds.build(b"k", work))
        staying = asyncio.ensure_future(builds.build(b"k", work))
        await started(work)
        leaving.cancel()
        await asyncio.sleep(0.05)
        work.release.set()
        return await staying

    assert asyncio.run(scenario()) == "root ::= x"
    assert work.runs == 1 and not work.stopped.is_set()


def test_the_last_waiter_leaving_abandons_the_build(builds: GrammarBuilds) -> None:
    work, queued = Work(), Work()

    async def scenario() -> None:
        waiters = [asyncio.ensure_future(builds.build(b"k", work)) for _ in range(2)]
        behind = asyncio.ensure_future(builds.build(b"other", queued))  # queued: one worker
        await started(work)
        assert builds.pending == 2
        for waiter in (*waiters, behind):
            waiter.cancel()
        assert await asyncio.to_thread(work.stopped.wait, 10)  # stopped at its next checkpoint
        for _ in range(200):
            if builds.pending == 0:
                break
            await asyncio.sleep(0.01)
        assert builds.pending == 0

    asyncio.run(scenario())
    assert queued.runs == 0  # taken off the queue before it ran
    # Not remembered: the next request builds it again.
    again = Work()
    again.release.set()
    assert asyncio.run(builds.build(b"k", again)) == "root ::= x"
    assert again.runs == 1


def test_too_many_pending_builds_are_refused_with_retry_after(builds: GrammarBuilds) -> None:
    first, second = Work(), Work()

    async def scenario() -> None:
        running = [asyncio.ensure_future(builds.build(b"a", first)), asyncio.ensure_future(builds.build(b"b", second))]
        await started(first)
        with pytest.raises(Overloaded) as info:
            await builds.build(b"c", Work())
        assert info.value.status == 503 and info.value.retry_after == 1
        joined = asyncio.ensure_future(builds.build(b"a", Work()))  # the same key joins, not refused
        first.release.set()
        second.release.set()
        assert await asyncio.gather(*running, joined) == ["root ::= x"] * 3

    asyncio.run(scenario())
    assert first.runs == 1
