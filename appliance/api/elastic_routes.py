"""Elasticsearch's chat_completion inference API: `POST /_inference/chat_completion/{id}/_stream`
and `POST /_inference/{id}/_stream`, answered as `event: message` server-sent events.

Errors before the stream starts get an HTTP status and Elasticsearch's error body
(`{"error": {"root_cause", "type", "reason"}, "status"}`); errors while streaming become an
`event: error`.
"""

from __future__ import annotations

import msgspec
from litestar import Request, Response, post
from litestar.response import Stream

from appliance.api.decoding import decode_body
from appliance.api.openai_routes import _record, _unless_disconnected
from appliance.api.sse import HEADERS, named_events
from appliance.errors import ApplianceError, InvalidRequest
from appliance.media import ImageLoader
from appliance.protocol.openai import ChatCompletionRequest
from appliance.service import chat, elastic
from appliance.runtime.registry import ModelRegistry

__all__ = ["routes"]

_encoder = msgspec.json.Encoder()


def _elastic_error(_: Request, exc: ApplianceError) -> Response:
    cause = {"type": exc.type, "reason": exc.message}
    response = Response(
        {"error": {"root_cause": [cause], **cause}, "status": exc.status},
        status_code=exc.status,
        media_type="application/json",
    )
    if exc.retry_after is not None:
        response.headers["Retry-After"] = str(exc.retry_after)
    return response


@post(
    ["/_inference/chat_completion/{inference_id:str}/_stream", "/_inference/{inference_id:str}/_stream"],
    status_code=200,
    exception_handlers={ApplianceError: _elastic_error},
)
async def chat_completion_stream(
    request: Request, inference_id: str, models: ModelRegistry, media: ImageLoader
) -> Stream:
    """A streamed chat completion, each chunk as `{"chat_completion": chunk}`."""
    raw = await request.body()
    try:
        parsed = msgspec.json.decode(raw) if raw.strip() else None
    except msgspec.DecodeError as exc:
        raise InvalidRequest(f"The request body is not valid JSON: {exc}", code="invalid_json") from None
    engine = elastic.chat_engine(models, parsed, inference_id)
    body = decode_body(_encoder.encode(elastic.chat_body(parsed, engine.name)), ChatCompletionRequest)
    record = _record(body.model, body.user)
    call = await _unless_disconnected(request, chat.open_chat(engine, body, media))
    if record:
        record.streams = [call.stream]
    return Stream(
        named_events(elastic.wrapped_chunks(call), "message"),
        media_type="text/event-stream",
        headers=HEADERS,
    )


routes = [chat_completion_stream]
