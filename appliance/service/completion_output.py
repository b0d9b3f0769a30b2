"""Engine events -> text completion responses (one engine request per prompt, `n` sequences each).

Choice `i * n + j` is sequence `j` of prompt `i`, as in OpenAI's API. With `echo` each choice's
text opens with its prompt (a stream sends it first, in a chunk of its own, as vLLM does).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence

from appliance.engine import Finished, RequestStream, TokenLogprob
from appliance.protocol.openai import (
    Completion,
    CompletionChoice,
    CompletionLogprobs,
    CompletionRequest,
    CompletionUsage,
)
from appliance.service.streams import Usage, finish_reason, merged, new_id

__all__ = ["completion", "completion_chunks"]


class _Logprobs:
    """The legacy `logprobs` object of one choice, built up as tokens arrive."""

    def __init__(self) -> None:
        self.value = _empty_logprobs()
        self._offset = 0

    def add(self, entries: list[TokenLogprob]) -> CompletionLogprobs:
        """Adds `entries`; returns an object with just them (for a stream chunk)."""
        part = _empty_logprobs()
        for entry in entries:
            for target in (self.value, part):
                target.tokens.append(entry.token)
                target.token_logprobs.append(entry.logprob)
                target.text_offset.append(self._offset)
                # `logprobs: 0` asks for no alternatives: the chosen token is each step's only entry.
                target.top_logprobs.append({entry.token: entry.logprob})
            self._offset += len(bytes(entry.bytes).decode("utf-8", "replace"))
        return part


def _empty_logprobs() -> CompletionLogprobs:
    return CompletionLogprobs(tokens=[], token_logprobs=[], text_offset=[], top_logprobs=[])


def _wants_logprobs(request: CompletionRequest) -> bool:
    return request.logprobs is not None


def _echo(request: CompletionRequest, stream: RequestStream) -> str:
    """The text a choice opens with: with `echo`, its prompt (token ids decoded by the engine)."""
    return stream.prompt_text if request.echo else ""


async def completion(request: CompletionRequest, streams: Sequence[RequestStream]) -> Completion:
    n = request.n
    texts = [_echo(request, stream) for stream in streams for _ in range(n)]
    reasons: list[str | None] = [None] * len(texts)
    logprobs = [_Logprobs() for _ in texts] if _wants_logprobs(request) else None
    usage = Usage(streams)
    async for stream_index, event in merged(streams):
        index = stream_index * n + event.index
        texts[index] += event.text
        if logprobs is not None and event.logprobs:
            logprobs[index].add(event.logprobs)
        if isinstance(event, Finished):
            reasons[index] = finish_reason(event)
            usage.add(event, stream_index)
    return Completion(
        object="text_completion",
        id=new_id("cmpl"),
        created=int(time.time()),
        model=request.model,
        choices=[
            CompletionChoice(
                index=index,
                text=text,
                finish_reason=reasons[index],
                logprobs=logprobs[index].value if logprobs is not None else None,
            )
            for index, text in enumerate(texts)
        ],
        usage=usage.build(),
    )


async def completion_chunks(request: CompletionRequest, streams: Sequence[RequestStream]) -> AsyncIterator[Completion]:
    completion_id, created, n = new_id("cmpl"), int(time.time()), request.n
    include_usage = bool(request.stream_options and request.stream_options.include_usage)
    logprobs = [_Logprobs() for _ in range(len(streams) * n)] if _wants_logprobs(request) else None
    usage = Usage(streams)

    def chunk(choices: list[CompletionChoice], usage: CompletionUsage | None = None) -> Completion:
        return Completion(
            id=completion_id,
            created=created,
            model=request.model,
            choices=choices,
            usage=usage,
            object="text_completion",
        )

    if request.echo:
        for stream_index, stream in enumerate(streams):
            for sequence in range(n):
                yield chunk(
                    [
                        CompletionChoice(
                            index=stream_index * n + sequence, text=_echo(request, stream), finish_reason=None
                        )
                    ]
                )
    async for stream_index, event in merged(streams):
        index = stream_index * n + event.index
        part = logprobs[index].add(event.logprobs or []) if logprobs is not None else None
        if isinstance(event, Finished):
            reason = finish_reason(event)
            usage.add(event, stream_index)
            yield chunk([CompletionChoice(index=index, text=event.text, finish_reason=reason, logprobs=part)])
        elif event.text or part is not None and part.tokens:
            yield chunk([CompletionChoice(index=index, text=event.text, finish_reason=None, logprobs=part)])
    if include_usage:
        yield chunk([], usage.build())
