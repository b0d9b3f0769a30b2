"""RequestStream: deltas that wait in the queue come merged, a consumer that keeps up gets each one,
and the request's time limit ends the stream."""

from __future__ import annotations

import asyncio

import pytest

from appliance.engine.host.streams import RequestStream
from appliance.engine.messages import Delta, Finished, TokenLogprob
from appliance.errors import RequestTimedOut


class _Client:
    """What a stream is given of its client: a time limit and a way to cancel."""

    def __init__(self, timeout: float = 0.0) -> None:
        self.timeout = timeout
        self.cancelled: list[int] = []


def _logprob(token: str) -> TokenLogprob:
    return TokenLogprob(token=token, logprob=-1.0, bytes=list(token.encode()))


def _stream(client: _Client, sequences: int = 1) -> RequestStream:
    return RequestStream(
        7, model="m", timeout=client.timeout, cancel=client.cancelled.append, prompt_tokens=3, sequences=sequences
    )


async def _collect(stream: RequestStream) -> list[Delta | Finished]:
    return [event async for event in stream]


def test_waiting_deltas_of_one_sequence_come_as_one() -> None:
    stream = _stream(_Client())
    for number, text in enumerate(["Hel", "lo", " wor", "ld"], start=1):
        stream._events.put_nowait(Delta(request_id=7, text=text, tokens=number, logprobs=[_logprob(text)]))
    stream._events.put_nowait(Finished(request_id=7, finish_reason="stop", prompt_tokens=3, completion_tokens=4))
    events = asyncio.run(_collect(stream))
    assert [type(event) for event in events] == [Delta, Finished]
    merged = events[0]
    assert merged.text == "Hello world"
    assert merged.tokens == 4
    assert [entry.token for entry in merged.logprobs] == ["Hel", "lo", " wor", "ld"]
    assert events[1].completion_tokens == 4


def test_deltas_of_different_sequences_stay_apart_and_keep_their_order() -> None:
    stream = _stream(_Client(), sequences=2)
    for index, text in [(0, "a"), (0, "b"), (1, "x"), (0, "c"), (1, "y"), (1, "z")]:
        stream._events.put_nowait(Delta(request_id=7, text=text, tokens=1, index=index))
    for index in (0, 1):
        stream._events.put_nowait(
            Finished(request_id=7, finish_reason="length", prompt_tokens=3, completion_tokens=3, index=index)
        )
    events = asyncio.run(_collect(stream))
    assert [(event.index, event.text) for event in events if isinstance(event, Delta)] == [
        (0, "ab"),
        (1, "x"),
        (0, "c"),
        (1, "yz"),
    ]
    assert [event.index for event in events if isinstance(event, Finished)] == [0, 1]
    # Without logprobs asked for, a merged delta carries none.
    assert all(event.logprobs is None for event in events)


def test_a_consumer_that_keeps_up_gets_every_delta() -> None:
    async def scenario() -> list[Delta | Finished]:
        stream = _stream(_Client())
        seen: list[Delta | Finished] = []

        async def consume() -> None:
            async for event in stream:
                seen.append(event)

        consumer = asyncio.ensure_future(consume())
        for number in range(1, 4):
            stream._events.put_nowait(Delta(request_id=7, text=f"t{number}", tokens=number))
            await asyncio.sleep(0)  # the consumer takes it before the next arrives
            await asyncio.sleep(0)
        stream._events.put_nowait(Finished(request_id=7, finish_reason="stop", prompt_tokens=3, completion_tokens=3))
        await consumer
        return seen

    events = asyncio.run(scenario())
    assert [event.text for event in events] == ["t1", "t2", "t3", ""]


def test_the_time_limit_ends_a_silent_stream_and_cancels_the_request() -> None:
    client = _Client(timeout=0.05)
    stream = _stream(client)
    stream._events.put_nowait(Delta(request_id=7, text="a", tokens=1))

    async def scenario() -> list[Delta | Finished]:
        seen = []
        with pytest.raises(RequestTimedOut, match="limits.request_timeout_seconds"):
            async for event in stream:
                seen.append(event)
        return seen

    assert [event.text for event in asyncio.run(scenario())] == ["a"]
    assert client.cancelled == [7]
