"""A deterministic in-process engine for fast HTTP-layer tests.

`FakeEngineClient` is the real `EngineClient` (admission, dispatch, cancellation) with the engine
process replaced by a function that answers each frame on the event loop: the reply to a prompt is
its words reversed, one word per token.
"""

from __future__ import annotations

import asyncio
from typing import Any

from appliance.engine.host.client import EngineClient
from appliance.engine.host.templates import GENERIC_TOOL_PARSER, ToolFormat
from appliance.engine.messages import (
    Accepted,
    Batch,
    Cancel,
    ChatPrompt,
    Delta,
    Detokenize,
    Detokenized,
    Finished,
    Rejected,
    Submit,
    ToEngineDecoder,
    Tokenize,
    Tokenized,
    TokenPrompt,
)
from appliance.graphfiles import Graph, Limits


def fake_graph(name: str = "fake", max_queued_requests: int = 512) -> Graph:
    return Graph(name=name, model_path="/nonexistent", limits=Limits(max_queued_requests=max_queued_requests))


class _Outbox:
    def __init__(self, engine: FakeEngineClient) -> None:
        self._engine = engine
        self._decoder = ToEngineDecoder()

    def put(self, frame: bytes | memoryview | None) -> None:
        message = self._decoder.feed(bytes(frame)) if frame is not None else None
        if message is not None:
            self._engine._loop.call_soon(self._engine._answer, message)


class FakeEngineClient(EngineClient):
    context_words = 64
    hold = False
    """When set, accepted requests produce no tokens until released (to test queues/cancels)."""
    script: str | None = None
    hold_answers = False
    """When set, tokenize and detokenize commands get no answer (an engine busy with others)."""
    """When set, every reply is this text (in 4-character deltas) instead of the reversed prompt."""

    def __init__(self, graph: Graph | None = None, **options: Any) -> None:
        """`options`: `EngineClient`'s (`batch_lines`, `batch_grace_seconds`, ...)."""
        super().__init__(graph or fake_graph(), restart_delay=lambda _: 0.0, **options)
        # The fake renders every message itself, tools and tool calls included, as a template
        # that reads them would (a fake graph's model folder holds no template to read).
        self.tools = ToolFormat(
            self.graph.tool_parser or GENERIC_TOOL_PARSER, from_template=True, reasoning=self.graph.reasoning_parser
        )
        self.cancelled: list[int] = []
        self.submitted: list[Submit] = []
        self.asked: list[Tokenize | Detokenize] = []

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
        if isinstance(command, Tokenize | Detokenize):
            self.asked.append(command)
            if self.hold_answers:
                return
        if isinstance(command, Tokenize):
            prompt = command.prompt
            words = (
                " ".join(str(m.get("content", "")) for m in prompt.messages).split()
                if isinstance(prompt, ChatPrompt)
                else prompt.text.split()
            )
            tokens = [len(word) for word in words]
            self._dispatch(Batch(events=[Tokenized(request_id=command.request_id, tokens=tokens, token_strs=words)]))
            return
        if isinstance(command, Detokenize):
            text = " ".join(f"w{token}" for token in command.tokens)
            self._dispatch(Batch(events=[Detokenized(request_id=command.request_id, text=text)]))
            return
        assert isinstance(command, Submit), command
        self.submitted.append(command)
        prompt = command.prompt
        if isinstance(prompt, TokenPrompt):
            text = " ".join(f"w{token}" for token in prompt.ids)
        else:
            text = prompt.messages[-1]["content"] if isinstance(prompt, ChatPrompt) else prompt.text
        words = text.split()
        request_id = command.request_id
        if len(words) > self.context_words:
            self._dispatch(
                Batch(
                    events=[
                        Rejected(
                            request_id=request_id, message="too long", code="context_length_exceeded", param="messages"
                        )
                    ]
                )
            )
            return
        limit = command.params.max_new_tokens or 16
        if self.script is not None:
            reply = [self.script[i : i + 4] for i in range(0, len(self.script), 4)][:limit]
        else:
            reply = [f" {word}" for word in reversed(words)][:limit]
        echo = text if command.params.echo else ""
        events: list = [Accepted(request_id=request_id, prompt_tokens=len(words), prompt_text=echo)]
        if not self.hold:
            # With n > 1 every sequence is the same reply, as from a greedy engine; `index` tells them apart.
            for index in range(command.params.n):
                events += [
                    Delta(request_id=request_id, text=piece, tokens=i + 1, index=index) for i, piece in enumerate(reply)
                ]
                reason = "length" if len(reply) == limit else "stop"
                events.append(
                    Finished(
                        request_id=request_id,
                        finish_reason=reason,
                        prompt_tokens=len(words),
                        completion_tokens=len(reply),
                        index=index,
                    )
                )
        self._dispatch(Batch(events=events))
