"""Server-sent events framing, with one shared JSON encoder."""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec

from appliance.errors import ApplianceError

__all__ = ["DONE", "HEADERS", "event_stream"]

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
