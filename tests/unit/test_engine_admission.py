"""Tokenize and detokenize are admitted like generations (issue 28): counted in `in_flight`, under
`max_queued_requests`, and abandoned when their caller leaves, in the client and in the engine's
inbox."""

from __future__ import annotations

import asyncio
import queue

import pytest

from appliance.engine.messages import (
    Cancel,
    ChatPrompt,
    Detokenize,
    SamplingParams,
    Shutdown,
    Submit,
    TextPrompt,
    Tokenize,
)
from appliance.engine.worker.inbox import Inbox
from appliance.errors import InvalidRequest, Overloaded, RequestTimedOut
from appliance.graphfiles import Graph, Limits
from tests.fakes import FakeEngineClient, fake_graph

PROMPT = TextPrompt(text="one two")


async def _waiting(engine: FakeEngineClient, count: int) -> list[asyncio.Task]:
    tasks = [asyncio.ensure_future(engine.tokenize(PROMPT, add_special_tokens=True)) for _ in range(count)]
    await asyncio.sleep(0)
    return tasks


def test_tokenize_counts_in_flight_and_meets_the_queue_limit() -> None:
    async def run() -> None:
        engine = FakeEngineClient(fake_graph(max_queued_requests=2))
        engine.start()
        engine.hold_answers = True
        tasks = await _waiting(engine, 2)
        assert engine.in_flight == 2
        with pytest.raises(Overloaded) as info:
            await engine.detokenize([1, 2])
        assert info.value.retry_after == 1
        with pytest.raises(Overloaded):
            await engine.submit(PROMPT, SamplingParams(max_new_tokens=2))
        # The first one's client leaves: the engine is told, and its place is free again.
        tasks[0].cancel()
        await asyncio.sleep(0.01)  # the fake engine reads its frames on a later loop iteration
        assert engine.in_flight == 1
        assert engine.cancelled == [engine.asked[0].request_id]
        engine.hold_answers = False
        assert (await engine.detokenize([1, 2])) == "w1 w2"
        tasks[1].cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert engine.in_flight == 0

    asyncio.run(run())


def test_tokenize_has_the_request_time_limit() -> None:
    async def run() -> None:
        graph = Graph(name="fake", model_path="/nonexistent", limits=Limits(request_timeout_seconds=0.05))
        engine = FakeEngineClient(graph)
        engine.start()
        engine.hold_answers = True
        with pytest.raises(RequestTimedOut):
            await engine.tokenize(PROMPT, add_special_tokens=True)
        assert engine.in_flight == 0
        await asyncio.sleep(0.01)
        assert engine.cancelled == [engine.asked[0].request_id]

    asyncio.run(run())


def test_inbox_skips_commands_cancelled_while_they_wait() -> None:
    inbox = Inbox()
    params = SamplingParams(max_new_tokens=2)
    for command in (
        Tokenize(request_id=1, prompt=PROMPT),
        Submit(request_id=2, prompt=PROMPT, params=params),
        Detokenize(request_id=3, tokens=[1]),
        Tokenize(request_id=4, prompt=PROMPT),
        Cancel(request_id=1),
        Cancel(request_id=2),
        Cancel(request_id=3),
        Shutdown(),
    ):
        inbox.put(command)
    # The cancelled commands are dropped; their Cancels still reach the engine (a running request).
    taken = [inbox.get_nowait() for _ in range(5)]
    assert taken == [
        Tokenize(request_id=4, prompt=PROMPT),
        Cancel(request_id=1),
        Cancel(request_id=2),
        Cancel(request_id=3),
        Shutdown(),
    ]
    with pytest.raises(queue.Empty):
        inbox.get(timeout=0.01)
    # A command taken before its Cancel arrived is the engine's to stop; the Cancel is passed on.
    inbox.put(Tokenize(request_id=5, prompt=PROMPT))
    assert inbox.get() == Tokenize(request_id=5, prompt=PROMPT)
    inbox.put(Cancel(request_id=5))
    assert inbox.get() == Cancel(request_id=5)
    assert not inbox._cancelled


def test_an_integer_beyond_64_bits_is_a_400_that_holds_no_place() -> None:
    # JSON allows any integer; msgpack, the engine pipe's format, 64 bits. Found by fuzzing
    # /v1/messages/count_tokens (a tool_use input of -2**63-1): it was a 500 on every route, and
    # the request kept its place in `in_flight`.
    async def run() -> None:
        engine = FakeEngineClient(fake_graph(max_queued_requests=1))
        engine.start()
        huge = ChatPrompt(messages=[{"role": "user", "content": "x"}], tools=[{"maximum": 2**70}])
        for attempt in range(2):
            with pytest.raises(InvalidRequest) as info:
                await engine.tokenize(huge, add_special_tokens=False)
            assert info.value.code == "integer_too_large"
            with pytest.raises(InvalidRequest):
                await engine.submit(huge, SamplingParams(max_new_tokens=2))
            assert engine.in_flight == 0, attempt
        await engine.stop()

    asyncio.run(run())
