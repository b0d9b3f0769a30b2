"""A chat answer as typed pieces: the seam between the chat core and everything that renders it.

The engine's events carry raw text. Here each choice's text passes through the graph's reasoning
parser and, when the request's tool plan has tools in play, its tool parser; both hold back text
only while it may still be markup. What comes out, in order, are pieces: reasoning text, content
text (with its tokens' logprobs), complete tool calls, one finish per choice (its reason decided
here once: `tool_calls` when a call was made and the model stopped), then the usage of the whole
answer. OpenAI's chunks (`chat_output`), the Responses API's events and every other dialect are
renderings of these pieces; none of them reads another's output back apart.

An engine failure is raised from the iterator (`ApplianceError`), as `streams.finish_reason` does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from appliance.engine import Finished, RequestStream, TokenLogprob
from appliance.protocol.openai import Tool
from appliance.service.reasoning import reasoning_stream
from appliance.service.streams import Usage, finish_reason, merged
from appliance.service.tool_parsers import ToolCallStream, new_call_id, tool_parser, tool_schemas

__all__ = [
    "AnswerPiece",
    "ContentPiece",
    "FinishPiece",
    "ReasoningPiece",
    "ToolCallPiece",
    "UsagePiece",
    "answer_pieces",
]


@dataclass(frozen=True)
class ReasoningPiece:
    choice: int
    text: str


@dataclass(frozen=True)
class ContentPiece:
    """Answer text; `logprobs` (when asked) are those of the tokens generated since the last piece,
    and may come with no text while the parsers hold it back."""

    choice: int
    text: str
    logprobs: list[TokenLogprob] | None = None


@dataclass(frozen=True)
class ToolCallPiece:
    """One complete tool call; `position` counts the choice's calls from 0."""

    choice: int
    position: int
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class FinishPiece:
    choice: int
    reason: str
    """`stop`, `length` or `tool_calls`."""
    stop_string: str | None = None
    """The stop string the text ended at, if it ended at one."""


@dataclass(frozen=True)
class UsagePiece:
    """The answer's token counts: always the last piece."""

    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


AnswerPiece = ReasoningPiece | ContentPiece | ToolCallPiece | FinishPiece | UsagePiece


class _ChoiceParsers:
    """One choice's text, split into reasoning, content and tool calls as it arrives."""

    def __init__(
        self,
        choice: int,
        reasoning_parser: str | None,
        tool_parser_name: str | None,
        prompt_tail: str,
        tools: tuple[Tool, ...] = (),
    ):
        self._choice = choice
        if tool_parser_name == "harmony":
            reasoning_parser = "harmony"  # calls are messages among the channels: split those first
        self._reasoning = reasoning_stream(reasoning_parser, prompt_tail=prompt_tail) if reasoning_parser else None
        self._parser = tool_parser(tool_parser_name) if tool_parser_name else None
        self._tools = ToolCallStream(self._parser, tool_schemas(tools)) if self._parser else None
        self.calls = 0

    def feed(self, text: str, logprobs: list[TokenLogprob] | None, *, final: bool) -> list[AnswerPiece]:
        reasoning = ""
        if self._reasoning is not None:
            reasoning, text = self._reasoning.feed(text)
            if final:
                more_reasoning, more_text = self._reasoning.finish()
                reasoning += more_reasoning
                text += more_text
        calls = []
        if self._tools is not None:
            text, calls = self._tools.feed(text)
            if final:
                more_text, more_calls = self._tools.finish()
                text += more_text
                calls += more_calls
        pieces: list[AnswerPiece] = []
        if reasoning:
            pieces.append(ReasoningPiece(self._choice, reasoning))
        if text or logprobs:
            pieces.append(ContentPiece(self._choice, text, logprobs))
        for call in calls:
            pieces.append(ToolCallPiece(self._choice, self.calls, new_call_id(self._parser), call.name, call.arguments))
            self.calls += 1
        return pieces


async def answer_pieces(
    stream: RequestStream,
    choices: int,
    *,
    logprobs: bool,
    reasoning_parser: str | None,
    tool_parser: str | None,
    tools: tuple[Tool, ...] = (),
) -> AsyncIterator[AnswerPiece]:
    """The pieces of `stream`'s `choices` sequences as they arrive, then the usage; `tools`: the
    request's tools in play (formats whose values are typed by their schemas read them)."""
    parsers = [
        _ChoiceParsers(index, reasoning_parser, tool_parser, stream.prompt_tail, tools) for index in range(choices)
    ]
    usage = Usage([stream])
    async for _, event in merged([stream]):
        final = isinstance(event, Finished)
        reason = finish_reason(event) if final else None  # raises for a failed sequence
        choice = parsers[event.index]
        for piece in choice.feed(event.text, event.logprobs if logprobs else None, final=final):
            yield piece
        if final:
            usage.add(event)
            reason = "tool_calls" if choice.calls and reason == "stop" else reason
            yield FinishPiece(event.index, reason, event.stop_string)
    counts = usage.build()
    yield UsagePiece(prompt_tokens=counts.prompt_tokens, completion_tokens=counts.completion_tokens)
