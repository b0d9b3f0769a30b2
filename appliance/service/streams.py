"""Engine streams as the response builders consume them: merged, with usage and finish reasons."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence

from appliance.engine import Delta, Finished, RequestStream
from appliance.errors import EngineFailure
from appliance.protocol.openai import CompletionUsage

__all__ = ["Usage", "finish_reason", "merged", "new_id"]


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def finish_reason(event: Finished) -> str:
    """The OpenAI finish reason of a sequence; raises for a failed or cancelled one."""
    if event.finish_reason == "error":
        raise EngineFailure(event.error or "The engine failed while generating.")
    if event.finish_reason == "cancelled":
        raise EngineFailure("The request was cancelled by the engine.")
    return event.finish_reason


class Usage:
    """Token counts of one response: each prompt once, every sequence's output."""

    def __init__(self, streams: Sequence[RequestStream]) -> None:
        # From the engine's Accepted, replaced by the count its Finished reports (final for
        # vision prompts, whose image tokens are known only once the pipeline ran).
        self._prompt = {index: stream.prompt_tokens for index, stream in enumerate(streams)}
        self.completion_tokens = 0

    def add(self, event: Finished, stream_index: int = 0) -> None:
        self._prompt[stream_index] = event.prompt_tokens
        self.completion_tokens += event.completion_tokens

    def build(self) -> CompletionUsage:
        prompt = sum(self._prompt.values())
        return CompletionUsage(
            completion_tokens=self.completion_tokens, prompt_tokens=prompt, total_tokens=prompt + self.completion_tokens
        )


async def merged(streams: Sequence[RequestStream]) -> AsyncIterator[tuple[int, Delta | Finished]]:
    """Events of several streams as they come, tagged with the stream's index; cancels on exit."""
    if len(streams) == 1:
        try:
            async for event in streams[0]:
                yield 0, event
        finally:
            streams[0].cancel()
        return
    queue: asyncio.Queue[tuple[int, Delta | Finished | None]] = asyncio.Queue()

    async def pump(index: int, stream: RequestStream) -> None:
        async for event in stream:
            queue.put_nowait((index, event))
        queue.put_nowait((index, None))

    tasks = [asyncio.ensure_future(pump(index, stream)) for index, stream in enumerate(streams)]
    try:
        remaining = len(streams)
        while remaining:
            index, event = await queue.get()
            if event is None:
                remaining -= 1
                continue
            yield index, event
    finally:
        for task in tasks:
            task.cancel()
        for stream in streams:
            stream.cancel()
