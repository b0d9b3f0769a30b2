"""The engine's outbox: a stream's deltas wait and merge for stream_interval_ms; first tokens, ends
and every other event go at once, in order."""

from __future__ import annotations

from appliance.engine.messages import Accepted, Delta, Finished, TokenLogprob
from appliance.engine.worker.outbox import Outbox


def _delta(request: int, text: str, tokens: int, index: int = 0) -> Delta:
    return Delta(request_id=request, text=text, tokens=tokens, index=index)


def _finished(request: int, tokens: int, index: int = 0) -> Finished:
    return Finished(request_id=request, finish_reason="length", prompt_tokens=2, completion_tokens=tokens, index=index)


def test_first_token_goes_at_once_later_ones_merge_until_the_interval() -> None:
    outbox = Outbox(0.010)
    outbox.add([Accepted(request_id=1, prompt_tokens=2)])
    assert [type(event) for event in outbox.take(0.0)] == [Accepted]
    outbox.add([_delta(1, "a", 1)])
    assert outbox.take(0.001) == [_delta(1, "a", 1)]  # the first token: at once
    outbox.add([_delta(1, "b", 2)])
    assert outbox.take(0.002) == []
    outbox.add([_delta(1, "c", 3)])
    assert outbox.take(0.005) == []
    outbox.add([_delta(1, "d", 4)])
    assert outbox.take(0.012) == [_delta(1, "bcd", 4)]  # 10 ms after the last frame


def test_an_end_sends_what_waits_in_order() -> None:
    outbox = Outbox(1.0)
    outbox.add([_delta(1, "a", 1), _delta(2, "x", 1)])
    assert len(outbox.take(0.0)) == 2
    outbox.add([_delta(1, "b", 2), _delta(2, "y", 2)])
    outbox.add([_delta(1, "c", 3), _delta(2, "z", 3), _finished(2, 3)])
    assert outbox.take(0.001) == [_delta(1, "bc", 3), _delta(2, "yz", 3), _finished(2, 3)]


def test_sequences_merge_apart_and_a_delta_never_merges_across_an_event() -> None:
    outbox = Outbox(1.0)
    outbox.add([_delta(1, "a", 1, index=0), _delta(1, "x", 1, index=1)])
    outbox.take(0.0)
    logprob = TokenLogprob(token="b", logprob=-0.5, bytes=[98])
    outbox.add([Delta(request_id=1, text="b", tokens=2, logprobs=[logprob]), _delta(1, "y", 2, index=1)])
    outbox.add([_finished(1, 2, index=1), Delta(request_id=1, text="c", tokens=3, logprobs=[logprob])])
    assert outbox.take(0.001) == [
        Delta(request_id=1, text="b", tokens=2, logprobs=[logprob]),
        _delta(1, "y", 2, index=1),
        _finished(1, 2, index=1),
        Delta(request_id=1, text="c", tokens=3, logprobs=[logprob]),
    ]


def test_zero_interval_and_flush_send_every_step() -> None:
    outbox = Outbox(0.0)
    outbox.add([_delta(1, "a", 1)])
    outbox.take(0.0)
    outbox.add([_delta(1, "b", 2)])
    assert outbox.take(0.0) == [_delta(1, "b", 2)]
    waiting = Outbox(1.0)
    waiting.add([_delta(1, "a", 1)])
    waiting.take(0.0)
    waiting.add([_delta(1, "b", 2)])
    assert waiting.take(0.001) == []
    assert waiting.take(0.001, flush=True) == [_delta(1, "b", 2)]
    assert waiting.take(5.0) == []
