"""Engine events -> chat completion responses: choices, reasoning, tool calls, logprobs, usage.

Each choice's text passes through the graph's reasoning parser (reasoning_content) and, when the
request's tool plan has tools in play, its tool parser (tool_calls); both hold back text only while
it may still be markup. Streams follow OpenAI's order: a role delta per choice, content/tool-call deltas, a
finish_reason per choice, then the usage chunk if asked.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from appliance.engine import Finished, RequestStream, TokenLogprob
from appliance.protocol.openai import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionMessage,
    ChatCompletionMessageToolCall,
    ChatCompletionRequest,
    ChatCompletionTokenLogprob,
    Choice,
    ChoiceDelta,
    ChoiceDeltaFunction,
    ChoiceDeltaToolCall,
    ChoiceLogprobs,
    ChunkChoice,
    CompletionUsage,
    Function,
)
from appliance.service.reasoning import ReasoningStream
from appliance.service.streams import Usage, finish_reason, merged, new_id
from appliance.service.tool_parsers import ParsedCall, ToolCallStream, new_call_id, tool_parser

__all__ = ["chat_completion", "chat_completion_chunks"]


@dataclass
class _Piece:
    reasoning: str = ""
    content: str = ""
    calls: list[tuple[str, ParsedCall]] = field(default_factory=list)


class _ChoiceText:
    """One choice's generated text, split into reasoning, content and tool calls as it arrives."""

    def __init__(self, reasoning_parser: str | None, tool_parser_name: str | None, prompt_tail: str) -> None:
        self._reasoning = ReasoningStream(prompt_tail=prompt_tail) if reasoning_parser else None
        self._parser = tool_parser(tool_parser_name) if tool_parser_name else None
        self._tools = ToolCallStream(self._parser) if self._parser else None
        self.reasoning: list[str] = []
        self.content: list[str] = []
        self.calls: list[tuple[str, ParsedCall]] = []

    def feed(self, text: str, *, final: bool = False) -> _Piece:
        piece = _Piece()
        if self._reasoning is not None:
            piece.reasoning, text = self._reasoning.feed(text)
            if final:
                more_reasoning, more_text = self._reasoning.finish()
                piece.reasoning += more_reasoning
                text += more_text
        if self._tools is not None:
            piece.content, calls = self._tools.feed(text)
            if final:
                more_content, more_calls = self._tools.finish()
                piece.content += more_content
                calls = calls + more_calls
            piece.calls = [(new_call_id(self._parser), call) for call in calls]
        else:
            piece.content = text
        self.reasoning.append(piece.reasoning)
        self.content.append(piece.content)
        self.calls += piece.calls
        return piece


def _logprobs(entries: list[TokenLogprob] | None) -> ChoiceLogprobs | None:
    if entries is None:
        return None
    return ChoiceLogprobs(
        content=[ChatCompletionTokenLogprob(token=e.token, logprob=e.logprob, bytes=e.bytes) for e in entries]
    )


def _reason(event: Finished, text: _ChoiceText) -> str:
    reason = finish_reason(event)
    return "tool_calls" if text.calls and reason == "stop" else reason


async def chat_completion(
    request: ChatCompletionRequest, stream: RequestStream, *, reasoning_parser: str | None, tool_parser: str | None
) -> ChatCompletion:
    """The whole answer (non-streaming); `tool_parser` reads calls when tools are in play."""
    texts = [_ChoiceText(reasoning_parser, tool_parser, stream.prompt_tail) for _ in range(request.n)]
    logprobs: list[list[TokenLogprob] | None] = [[] if request.logprobs else None for _ in range(request.n)]
    finished: dict[int, Finished] = {}
    usage = Usage([stream])
    async for _, event in merged([stream]):
        texts[event.index].feed(event.text, final=isinstance(event, Finished))
        if event.logprobs is not None and logprobs[event.index] is not None:
            logprobs[event.index] += event.logprobs
        if isinstance(event, Finished):
            finish_reason(event)
            finished[event.index] = event
            usage.add(event)
    choices = []
    for index, text in enumerate(texts):
        content = "".join(text.content)
        calls = [
            ChatCompletionMessageToolCall(id=call_id, function=Function(name=call.name, arguments=call.arguments))
            for call_id, call in text.calls
        ]
        message = ChatCompletionMessage(
            role="assistant",
            content=None if calls and not content.strip() else content,
            reasoning_content="".join(text.reasoning) or None,
            tool_calls=calls or None,
        )
        choices.append(
            Choice(
                index=index,
                message=message,
                finish_reason=_reason(finished[index], text),
                logprobs=_logprobs(logprobs[index]),
            )
        )
    return ChatCompletion(
        id=new_id("chatcmpl"), created=int(time.time()), model=request.model, choices=choices, usage=usage.build()
    )


async def chat_completion_chunks(
    request: ChatCompletionRequest, stream: RequestStream, *, reasoning_parser: str | None, tool_parser: str | None
) -> AsyncIterator[ChatCompletionChunk]:
    """Chunks in OpenAI's order: role first, deltas, finish_reason per choice, then usage if asked."""
    chunk_id, created = new_id("chatcmpl"), int(time.time())
    include_usage = bool(request.stream_options and request.stream_options.include_usage)

    def chunk(choices: list[ChunkChoice], usage: CompletionUsage | None = None) -> ChatCompletionChunk:
        return ChatCompletionChunk(
            id=chunk_id,
            created=created,
            model=request.model,
            choices=choices,
            usage=usage,
            object="chat.completion.chunk",
        )

    texts = [_ChoiceText(reasoning_parser, tool_parser, stream.prompt_tail) for _ in range(request.n)]
    call_counts = [0] * request.n
    for index in range(request.n):
        yield chunk([ChunkChoice(index=index, delta=ChoiceDelta(role="assistant", content=""))])
    usage = Usage([stream])
    async for _, event in merged([stream]):
        index, final = event.index, isinstance(event, Finished)
        reason = finish_reason(event) if final else None
        piece = texts[index].feed(event.text, final=final)
        logprobs = _logprobs(event.logprobs) if request.logprobs else None
        if piece.reasoning or piece.content or logprobs and logprobs.content:
            delta = ChoiceDelta(content=piece.content or None, reasoning_content=piece.reasoning or None)
            yield chunk([ChunkChoice(index=index, delta=delta, logprobs=logprobs)])
        for call_id, call in piece.calls:
            tool_call = ChoiceDeltaToolCall(
                index=call_counts[index],
                id=call_id,
                type="function",
                function=ChoiceDeltaFunction(name=call.name, arguments=call.arguments),
            )
            call_counts[index] += 1
            yield chunk([ChunkChoice(index=index, delta=ChoiceDelta(tool_calls=[tool_call]))])
        if final:
            usage.add(event)
            if texts[index].calls and reason == "stop":
                reason = "tool_calls"
            yield chunk([ChunkChoice(index=index, delta=ChoiceDelta(), finish_reason=reason)])
    if include_usage:
        yield chunk([], usage.build())
