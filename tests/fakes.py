"""A deterministic in-process engine for fast HTTP-layer tests.

`FakeEngineClient` is the real `EngineClient` (admission, dispatch, cancellation) with the engine
process replaced by a function that answers each frame on the event loop: the reply to a prompt is
its words reversed, one word per token.
"""

from __future__ import annotations

import asyncio

from appliance.config import Graph, Limits
from appliance.engine.client import EngineClient
from appliance.engine.messages import (
    Accepted,
    Batch,
    Cancel,
    ChatPrompt,
    Delta,
    Finished,
    Rejected,
    Submit,
    decode_to_engine,
)


def fake_graph(name: str = "fake", max_queued_requests: int = 512) -> Graph:
    return Graph(name=name, model_path="/nonexistent", limits=Limits(max_queued_requests=max_queued_requests))


class _Outbox:
    def __init__(self, engine: FakeEngineClient) -> None:
        self._engine = engine

    def put(self, frame: bytes | None) -> None:
        if frame is not None:
            self._engine._loop.call_soon(self._engine._answer, decode_to_engine(frame))


class FakeEngineClient(EngineClient):
    context_words = 64
    hold = False
    """When set, accepted requests produce no tokens until released (to test queues/cancels)."""

    def __init__(self, graph: Graph | None = None) -> None:
        super().__init__(graph or fake_graph())
        self.cancelled: list[int] = []
        self.submitted: list[Submit] = []

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._outbox = _Outbox(self)
        self.state = "ready"

    async def stop(self, timeout: float = 5.0) -> None:
        self.state = "stopped"

    def _answer(self, command: object) -> None:
        if isinstance(command, Cancel):
            self.cancelled.append(command.request_id)
            return
        assert isinstance(command, Submit)
        self.submitted.append(command)
        prompt = command.prompt
        text = prompt.messages[-1]["content"] if isinstance(prompt, ChatPrompt) else prompt.text
        words = text.split()
        request_id = command.request_id
        if len(words) > self.context_words:
            self._dispatch(Batch(events=[Rejected(request_id=request_id, message="too long", code="context_length_exceeded", param="messages")]))
            return
        limit = command.params.max_new_tokens or 16
        reply = list(reversed(words))[:limit]
        events: list = [Accepted(request_id=request_id, prompt_tokens=len(words))]
        if not self.hold:
            events += [Delta(request_id=request_id, text=f" {word}", tokens=i + 1) for i, word in enumerate(reply)]
            reason = "length" if len(reply) == limit else "stop"
            events.append(
                Finished(request_id=request_id, finish_reason=reason, prompt_tokens=len(words), completion_tokens=len(reply))
            )
        self._dispatch(Batch(events=events))
