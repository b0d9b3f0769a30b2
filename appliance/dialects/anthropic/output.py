"""The chat answer's pieces -> Anthropic's message, and its stream events.

The pieces (`service.pieces`) hold the answer split into reasoning, text and tool calls; here they
become content blocks in the order they arrive: `thinking`, `text`, one `tool_use` per call. A
stream (see the SDK's `anthropic/lib/streaming/`) starts with `message_start` (the prompt's token
count known since the engine accepted the request) and a `ping`; each block is opened
(`content_block_start`), grows by deltas (`thinking_delta` then an empty `signature_delta`,
`text_delta`, one `input_json_delta` holding a call's whole arguments: calls are parsed complete)
and is closed (`content_block_stop`) before the next begins; `message_delta` carries the stop
reason and the output token count, and `message_stop` ends it. An engine failure mid-stream ends it
with an `error` event instead.

Stop reasons: `max_tokens` when the token limit cut the answer, `tool_use` when it made calls,
`stop_sequence` (naming it) when it ended at one of `stop_sequences`, else `end_turn`.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

from appliance.dialects.anthropic.errors import error_object
from appliance.dialects.shared import tool_input
from appliance.errors import ApplianceError
from appliance.protocol.anthropic import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    DeltaUsage,
    InputJSONDelta,
    Message,
    MessageDelta,
    MessageStart,
    MessageStop,
    OutputBlock,
    Ping,
    SignatureDelta,
    StopDelta,
    StreamError,
    StreamEvent,
    TextDelta,
    TextOut,
    ThinkingDelta,
    ThinkingOut,
    ToolUseOut,
    Usage,
)
from appliance.service.pieces import AnswerPiece, ContentPiece, FinishPiece, ReasoningPiece, ToolCallPiece, UsagePiece

__all__ = ["MessageEvents", "object_id"]


def object_id(prefix: str) -> str:
    """An id as Anthropic writes them: `msg_...`, `toolu_...`."""
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def stop_reason(finish: FinishPiece | None) -> tuple[str | None, str | None]:
    """Anthropic's stop_reason and stop_sequence for a choice's finish."""
    if finish is None:
        return None, None
    if finish.reason == "length":
        return "max_tokens", None
    if finish.reason == "tool_calls":
        return "tool_use", None
    if finish.stop_string is not None:
        return "stop_sequence", finish.stop_string
    return "end_turn", None


@dataclass
class _OpenBlock:
    kind: str
    index: int
    texts: list[str] = field(default_factory=list)


class MessageEvents:
    """One message's events, built from its chat answer's pieces; `message` is the latest state."""

    def __init__(self, model: str, input_tokens: int, *, show_thinking: bool = True) -> None:
        """`show_thinking` False (`thinking.display: "omitted"`): thinking blocks are sent without
        their text (no `thinking_delta`, `thinking` empty), as Anthropic sends them then."""
        self._show_thinking = show_thinking
        self.message = Message(
            id=object_id("msg"),
            model=model,
            content=[],
            stop_reason=None,
            stop_sequence=None,
            usage=Usage(input_tokens=input_tokens, output_tokens=0),
        )
        self._open: _OpenBlock | None = None
        self._finish: FinishPiece | None = None

    async def stream(self, pieces: AsyncIterator[AnswerPiece]) -> AsyncIterator[StreamEvent | StreamError]:
        """Every event, from `message_start` to `message_stop` (or `error` when the engine failed)."""
        yield MessageStart(message=self.message)
        yield Ping()
        try:
            async for piece in pieces:
                for event in self._feed(piece):
                    yield event
        except ApplianceError as exc:
            yield StreamError(error=error_object(exc))
            return
        for event in self._close():
            yield event
        reason, sequence = stop_reason(self._finish)
        self.message.stop_reason, self.message.stop_sequence = reason, sequence  # type: ignore[assignment]
        yield MessageDelta(
            delta=StopDelta(stop_reason=reason, stop_sequence=sequence),  # type: ignore[arg-type]
            usage=DeltaUsage(output_tokens=self.message.usage.output_tokens),
        )
        yield MessageStop()

    async def final(self, pieces: AsyncIterator[AnswerPiece]) -> Message:
        """The whole message (non-streaming); an engine failure is raised."""
        async for piece in pieces:
            for _ in self._feed(piece):
                pass
        for _ in self._close():
            pass
        reason, sequence = stop_reason(self._finish)
        self.message.stop_reason, self.message.stop_sequence = reason, sequence  # type: ignore[assignment]
        return self.message

    def _feed(self, piece: AnswerPiece) -> Iterator[StreamEvent]:
        if isinstance(piece, ReasoningPiece):
            yield from self._text("thinking", piece.text)
        elif isinstance(piece, ContentPiece):
            if piece.text:
                yield from self._text("text", piece.text)
        elif isinstance(piece, ToolCallPiece):
            yield from self._call(piece)
        elif isinstance(piece, FinishPiece):
            self._finish = piece
        elif isinstance(piece, UsagePiece):
            self.message.usage = Usage(input_tokens=piece.prompt_tokens, output_tokens=piece.completion_tokens)

    def _text(self, kind: str, text: str) -> Iterator[StreamEvent]:
        block = self._open
        if block is None or block.kind != kind:
            yield from self._close()
            block = self._open = _OpenBlock(kind=kind, index=len(self.message.content))
            empty: OutputBlock = TextOut(text="") if kind == "text" else ThinkingOut(thinking="")
            yield ContentBlockStart(index=block.index, content_block=empty)
        if kind == "thinking" and not self._show_thinking:
            return
        block.texts.append(text)
        delta = TextDelta(text=text) if kind == "text" else ThinkingDelta(thinking=text)
        yield ContentBlockDelta(index=block.index, delta=delta)

    def _call(self, call: ToolCallPiece) -> Iterator[StreamEvent]:
        yield from self._close()
        index = len(self.message.content)
        call_id = object_id("toolu")
        yield ContentBlockStart(index=index, content_block=ToolUseOut(id=call_id, name=call.name, input={}))
        yield ContentBlockDelta(index=index, delta=InputJSONDelta(partial_json=call.arguments))
        self.message.content.append(ToolUseOut(id=call_id, name=call.name, input=tool_input(call.arguments)))
        yield ContentBlockStop(index=index)

    def _close(self) -> Iterator[StreamEvent]:
        block, self._open = self._open, None
        if block is None:
            return
        text = "".join(block.texts)
        if block.kind == "thinking":
            # Anthropic signs thinking so it can check it when sent back; nothing is signed here.
            yield ContentBlockDelta(index=block.index, delta=SignatureDelta(signature=""))
            self.message.content.append(ThinkingOut(thinking=text))
        else:
            self.message.content.append(TextOut(text=text))
        yield ContentBlockStop(index=block.index)
