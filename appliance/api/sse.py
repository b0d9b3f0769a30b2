"""Server-sent events and JSON Lines (NDJSON) framing, with one shared JSON encoder."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import msgspec

from appliance.errors import ApplianceError

__all__ = ["DONE", "HEADERS", "data_events", "event_stream", "json_lines", "named_events", "typed_events"]

DONE = b"data: [DONE]\n\n"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_encoder = msgspec.json.Encoder()


def data(payload: object) -> bytes:
    return b"data: " + _encoder.encode(payload) + b"\n\n"


async def event_stream(items: AsyncIterator[object]) -> AsyncIterator[bytes]:
    """`data: <json>` per item, then `data: [DONE]`; an error mid-stream becomes an error event.

    OpenAI clients raise on an event whose data holds `error`; the stream still ends with [DONE]
    so no client is left waiting.
    """
    try:
        async for item in items:
            yield data(item)
    except ApplianceError as exc:
        yield data(exc.to_dict())
    yield DONE


async def data_events(items: AsyncIterator[object]) -> AsyncIterator[bytes]:
    """`data: <json>` per item and nothing after: TGI's and LMI's SSE streams end without [DONE]."""
    async for item in items:
        yield data(item)


async def json_lines(
    items: AsyncIterator[object], error: Callable[[ApplianceError], object] | None = None
) -> AsyncIterator[bytes]:
    """One JSON document per line (LMI's default stream format, Ollama's NDJSON). With `error`, a
    failure mid-stream ends it with `error(exc)` as the last line (Ollama's `{"error": ...}`);
    without, it is raised."""
    try:
        async for item in items:
            yield _encoder.encode(item) + b"\n"
    except ApplianceError as exc:
        if error is None:
            raise
        yield _encoder.encode(error(exc)) + b"\n"


async def named_events(items: AsyncIterator[object], event: str) -> AsyncIterator[bytes]:
    """`event: <event>` + `data: <json>` per item, then [DONE] as the same event; an error
    mid-stream becomes `event: error` (Elasticsearch's stream format)."""
    prefix = f"event: {event}\n".encode()
    try:
        async for item in items:
            yield prefix + data(item)
    except ApplianceError as exc:
        yield b"event: error\n" + data(exc.to_dict())
        return
    yield prefix + DONE


async def typed_events(items: AsyncIterator[msgspec.Struct]) -> AsyncIterator[bytes]:
    """`event: <type>` + `data: <json>` per item (tagged structs: the tag is the type), and nothing
    after: the Responses API's stream, whose last event says how it ended."""
    async for item in items:
        yield b"event: " + item.__struct_config__.tag.encode() + b"\n" + data(item)
