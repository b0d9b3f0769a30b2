"""OpenAI chat completions and completions on top of the engine.

Validation that needs the graph (limits) happens here; validation that needs the tokenizer
(context length) happens in the engine process before the request reaches the pipeline.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Sequence

from appliance.config import Graph
from appliance.engine import ChatPrompt, Delta, EngineClient, Finished, RequestStream, SamplingParams, TextPrompt
from appliance.errors import EngineFailure, InvalidRequest
from appliance.protocol.openai import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionMessage,
    ChatCompletionRequest,
    Choice,
    ChoiceDelta,
    ChunkChoice,
    Completion,
    CompletionChoice,
    CompletionRequest,
    CompletionUsage,
    DeveloperMessage,
    ImageURLPart,
    Message,
    SystemMessage,
    TextPart,
)

__all__ = [
    "chat_completion",
    "chat_completion_chunks",
    "completion",
    "completion_chunks",
    "open_chat",
    "open_completion",
]


# -- requests -> engine ---------------------------------------------------------------------


def _sampling(
    graph: Graph,
    *,
    max_tokens: int | None,
    max_tokens_param: str,
    temperature: float | None,
    top_p: float | None,
    seed: int | None,
    stop: str | list[str] | None,
    ignore_eos: bool,
) -> SamplingParams:
    limit = graph.limits.max_tokens_limit
    if max_tokens is not None and max_tokens > limit:
        raise InvalidRequest(
            f"{max_tokens_param} is {max_tokens}, above this model's limit of {limit}.",
            param=max_tokens_param,
        )
    if max_tokens is None and graph.defaults.max_tokens is not None:
        max_tokens = min(graph.defaults.max_tokens, limit)
    return SamplingParams(
        max_new_tokens=max_tokens,
        temperature=graph.defaults.temperature if temperature is None else temperature,
        top_p=graph.defaults.top_p if top_p is None else top_p,
        seed=seed,
        stop=(stop,) if isinstance(stop, str) else tuple(stop or ()),
        ignore_eos=ignore_eos,
    )


def _text(content: str | list, where: str) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for index, part in enumerate(content):
        if isinstance(part, ImageURLPart):
            raise InvalidRequest(
                "This model does not accept images (it is served by a text-only graph).",
                param=f"{where}.content[{index}]",
                code="unsupported_content",
            )
        assert isinstance(part, TextPart)
        parts.append(part.text)
    return "\n".join(parts)


def _chat_messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    rendered = []
    for index, message in enumerate(messages):
        # The OpenAI `developer` role is the newer name of `system`; chat templates know `system`.
        role = "system" if isinstance(message, DeveloperMessage) else type(message).__struct_config__.tag
        if isinstance(message, AssistantMessage) and message.content is None:
            content = ""
        else:
            content = _text(message.content, f"messages[{index}]")
        entry = {"role": role, "content": content}
        if isinstance(message.name, str):
            entry["name"] = message.name
        rendered.append(entry)
    return rendered


async def open_chat(engine: EngineClient, request: ChatCompletionRequest) -> RequestStream:
    """Validate and submit a chat request; returns once the engine accepted it."""
    messages = _chat_messages(request.messages)
    uses_completion_tokens = request.max_completion_tokens is not None
    params = _sampling(
        engine.graph,
        max_tokens=request.max_completion_tokens if uses_completion_tokens else request.max_tokens,
        max_tokens_param="max_completion_tokens" if uses_completion_tokens else "max_tokens",
        temperature=request.temperature,
        top_p=request.top_p,
        seed=request.seed,
        stop=request.stop,
        ignore_eos=request.ignore_eos,
    )
    return await engine.submit(ChatPrompt(messages=messages), params)


async def open_completion(engine: EngineClient, request: CompletionRequest) -> list[RequestStream]:
    """Submit one engine request per prompt; all of them or none."""
    prompts = [request.prompt] if isinstance(request.prompt, str) else request.prompt
    params = _sampling(
        engine.graph,
        max_tokens=request.max_tokens,
        max_tokens_param="max_tokens",
        temperature=request.temperature,
        top_p=request.top_p,
        seed=request.seed,
        stop=request.stop,
        ignore_eos=request.ignore_eos,
    )
    opened: list[RequestStream] = []
    try:
        for prompt in prompts:
            opened.append(await engine.submit(TextPrompt(text=prompt), params))
    except BaseException:
        for stream in opened:
            stream.cancel()
        raise
    return opened


# -- engine events -> responses -------------------------------------------------------------


def _finish_reason(event: Finished) -> str:
    if event.finish_reason == "error":
        raise EngineFailure(event.error or "The engine failed while generating.")
    if event.finish_reason == "cancelled":
        raise EngineFailure("The request was cancelled by the engine.")
    return event.finish_reason


def _usage(finished: Sequence[Finished]) -> CompletionUsage:
    prompt = sum(event.prompt_tokens for event in finished)
    completion = sum(event.completion_tokens for event in finished)
    return CompletionUsage(completion_tokens=completion, prompt_tokens=prompt, total_tokens=prompt + completion)


async def _merged(streams: Sequence[RequestStream]) -> AsyncIterator[tuple[int, Delta | Finished]]:
    """Events of several streams as they come, tagged with the stream's index; cancels on exit."""
    if len(streams) == 1:
        try:
            async for event in streams[0]:
                yield 0, event
        finally:
            streams[0].cancel()
        return
    queue: asyncio.Queue[tuple[int, Delta | Finished]] = asyncio.Queue()

    async def pump(index: int, stream: RequestStream) -> None:
        async for event in stream:
            queue.put_nowait((index, event))

    tasks = [asyncio.ensure_future(pump(index, stream)) for index, stream in enumerate(streams)]
    try:
        remaining = len(streams)
        while remaining:
            index, event = await queue.get()
            if isinstance(event, Finished):
                remaining -= 1
            yield index, event
    finally:
        for task in tasks:
            task.cancel()
        for stream in streams:
            stream.cancel()


async def _collect(streams: Sequence[RequestStream]) -> tuple[list[str], list[Finished]]:
    texts = [""] * len(streams)
    finished: list[Finished | None] = [None] * len(streams)
    async for index, event in _merged(streams):
        texts[index] += event.text
        if isinstance(event, Finished):
            finished[index] = event
    return texts, [event for event in finished if event is not None]


def _new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


async def chat_completion(model: str, stream: RequestStream) -> ChatCompletion:
    texts, finished = await _collect([stream])
    return ChatCompletion(
        id=_new_id("chatcmpl"),
        created=int(time.time()),
        model=model,
        choices=[
            Choice(
                index=0,
                message=ChatCompletionMessage(content=texts[0]),
                finish_reason=_finish_reason(finished[0]),
            )
        ],
        usage=_usage(finished),
    )


async def chat_completion_chunks(
    model: str, stream: RequestStream, *, include_usage: bool
) -> AsyncIterator[ChatCompletionChunk]:
    """Chunks in OpenAI's order: role first, content deltas, finish_reason, then usage if asked."""
    chunk_id, created = _new_id("chatcmpl"), int(time.time())

    def chunk(choices: list[ChunkChoice], usage: CompletionUsage | None = None) -> ChatCompletionChunk:
        return ChatCompletionChunk(
            id=chunk_id, created=created, model=model, choices=choices, usage=usage, object="chat.completion.chunk"
        )

    yield chunk([ChunkChoice(index=0, delta=ChoiceDelta(role="assistant", content=""))])
    async for _, event in _merged([stream]):
        if isinstance(event, Finished):
            reason = _finish_reason(event)
            if event.text:
                yield chunk([ChunkChoice(index=0, delta=ChoiceDelta(content=event.text))])
            yield chunk([ChunkChoice(index=0, delta=ChoiceDelta(), finish_reason=reason)])
            if include_usage:
                yield chunk([], _usage([event]))
        elif event.text:
            yield chunk([ChunkChoice(index=0, delta=ChoiceDelta(content=event.text))])


async def completion(model: str, streams: Sequence[RequestStream]) -> Completion:
    texts, finished = await _collect(streams)
    return Completion(
        object="text_completion",
        id=_new_id("cmpl"),
        created=int(time.time()),
        model=model,
        choices=[
            CompletionChoice(index=index, text=texts[index], finish_reason=_finish_reason(event))
            for index, event in enumerate(finished)
        ],
        usage=_usage(finished),
    )


async def completion_chunks(
    model: str, streams: Sequence[RequestStream], *, include_usage: bool
) -> AsyncIterator[Completion]:
    completion_id, created = _new_id("cmpl"), int(time.time())
    finished: list[Finished] = []

    def chunk(choices: list[CompletionChoice], usage: CompletionUsage | None = None) -> Completion:
        return Completion(
            id=completion_id, created=created, model=model, choices=choices, usage=usage, object="text_completion"
        )

    async for index, event in _merged(streams):
        if isinstance(event, Finished):
            finished.append(event)
            reason = _finish_reason(event)
            yield chunk([CompletionChoice(index=index, text=event.text, finish_reason=reason)])
        elif event.text:
            yield chunk([CompletionChoice(index=index, text=event.text, finish_reason=None)])
    if include_usage:
        yield chunk([], _usage(finished))
