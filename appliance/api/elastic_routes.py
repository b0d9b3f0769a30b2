"""Elasticsearch's chat_completion inference API: `POST /_inference/chat_completion/{id}/_stream`
and `POST /_inference/{id}/_stream`, answered as `event: message` server-sent events.

Errors before the stream starts get an HTTP status and Elasticsearch's error body
(`{"error": {"root_cause", "type", "reason"}, "status"}`); errors while streaming become an
`event: error`.
"""

from __future__ import annotations

from litestar import Request, Response, Router, post
from litestar.response import Stream

from appliance.api.decoding import convert_body, decode_json
from appliance.api.errors import error_response
from appliance.api.handling import open_recorded_chat, record_request
from appliance.api.sse import HEADERS, named_events
from appliance.dialects import elastic
from appliance.errors import ApplianceError
from appliance.media import ImageLoader
from appliance.protocol.openai import ChatCompletionRequest
from appliance.runtime.registry import ModelRegistry

__all__ = ["router"]


def _elastic_error(_: Request, exc: ApplianceError) -> Response:
    cause = {"type": exc.type, "reason": exc.message}
    return error_response(exc, {"error": {"root_cause": [cause], **cause}, "status": exc.status})


@post(
    ["/_inference/chat_completion/{inference_id:str}/_stream", "/_inference/{inference_id:str}/_stream"],
    status_code=200,
)
async def chat_completion_stream(
    request: Request, inference_id: str, models: ModelRegistry, media: ImageLoader
) -> Stream:
    """A streamed chat completion, each chunk as `{"chat_completion": chunk}`."""
    parsed = decode_json(await request.body())
    engine = elastic.chat_engine(models, parsed, inference_id)
    body = convert_body(elastic.chat_body(parsed, engine.name), ChatCompletionRequest)
    record_request(engine.name, body.user)
    call = await open_recorded_chat(request, engine, body, media)
    return Stream(
        named_events(elastic.wrapped_chunks(call), "message"),
        media_type="text/event-stream",
        headers=HEADERS,
    )


router = Router(path="/", route_handlers=[chat_completion_stream], exception_handlers={ApplianceError: _elastic_error})
"""The Elasticsearch dialect, answering errors in Elasticsearch's shape."""
