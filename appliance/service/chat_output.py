"""The chat answer's pieces (`pieces`) -> OpenAI's chat completion, or its chunks.

Streams follow OpenAI's order: a role delta per choice, content/reasoning/tool-call deltas, a
finish_reason per choice, then the usage chunk if asked.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from appliance.engine import TokenLogprob
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
from appliance.service.pieces import (
    AnswerPiece,
    ContentPiece,
    FinishPiece,
    ReasoningPiece,
    ToolCallPiece,
    UsagePiece,
)
from appliance.service.streams import new_id

__all__ = ["chat_completion", "chat_completion_chunks"]


def _logprobs(entries: list[TokenLogprob] | None) -> ChoiceLogprobs | None:
    if entries is None:
        return None
    return ChoiceLogprobs(
        content=[ChatCompletionTokenLogprob(token=e.token, logprob=e.logprob, bytes=e.bytes) for e in entries]
    )


def _usage(piece: UsagePiece) -> CompletionUsage:
    return CompletionUsage(
        completion_tokens=piece.completion_tokens, prompt_tokens=piece.prompt_tokens, total_tokens=piece.total_tokens
    )


async def chat_completion(request: ChatCompletionRequest, pieces: AsyncIterator[AnswerPiece]) -> ChatCompletion:
    """The whole answer (non-streaming)."""
    reasoning: list[list[str]] = [[] for _ in range(request.n)]
    content: list[list[str]] = [[] for _ in range(request.n)]
    calls: list[list[ChatCompletionMessageToolCall]] = [[] for _ in range(request.n)]
    logprobs: list[list[TokenLogprob] | None] = [[] if request.logprobs else None for _ in range(request.n)]
    reasons: dict[int, str] = {}
    usage = None
    async for piece in pieces:
        if isinstance(piece, ReasoningPiece):
            reasoning[piece.choice].append(piece.text)
        elif isinstance(piece, ContentPiece):
            content[piece.choice].append(piece.text)
            if piece.logprobs is not None and logprobs[piece.choice] is not None:
                logprobs[piece.choice] += piece.logprobs
        elif isinstance(piece, ToolCallPiece):
            function = Function(name=piece.name, arguments=piece.arguments)
            calls[piece.choice].append(ChatCompletionMessageToolCall(id=piece.id, function=function))
        elif isinstance(piece, FinishPiece):
            reasons[piece.choice] = piece.reason
        else:
            usage = _usage(piece)
    choices = []
    for index in range(request.n):
        text = "".join(content[index])
        message = ChatCompletionMessage(
            role="assistant",
            content=None if calls[index] and not text.strip() else text,
            reasoning_content="".join(reasoning[index]) or None,
            tool_calls=calls[index] or None,
        )
        choices.append(
            Choice(index=index, message=message, finish_reason=reasons[index], logprobs=_logprobs(logprobs[index]))
        )
    return ChatCompletion(
        id=new_id("chatcmpl"), created=int(time.time()), model=request.model, choices=choices, usage=usage
    )


async def chat_completion_chunks(
    request: ChatCompletionRequest, pieces: AsyncIterator[AnswerPiece]
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

    def delta(index: int, delta: ChoiceDelta, **fields: object) -> ChatCompletionChunk:
        return chunk([ChunkChoice(index=index, delta=delta, **fields)])

    for index in range(request.n):
        yield delta(index, ChoiceDelta(role="assistant", content=""))
    async for piece in pieces:
        if isinstance(piece, ReasoningPiece):
            yield delta(piece.choice, ChoiceDelta(reasoning_content=piece.text))
        elif isinstance(piece, ContentPiece):
            logprobs = _logprobs(piece.logprobs) if request.logprobs else None
            yield delta(piece.choice, ChoiceDelta(content=piece.text or None), logprobs=logprobs)
        elif isinstance(piece, ToolCallPiece):
            function = ChoiceDeltaFunction(name=piece.name, arguments=piece.arguments)
            call = ChoiceDeltaToolCall(index=piece.position, id=piece.id, type="function", function=function)
            yield delta(piece.choice, ChoiceDelta(tool_calls=[call]))
        elif isinstance(piece, FinishPiece):
            yield delta(piece.choice, ChoiceDelta(), finish_reason=piece.reason)
        elif include_usage:
            yield chunk([], _usage(piece))
