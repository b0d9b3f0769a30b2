"""Elasticsearch's chat_completion inference API: `POST /_inference/chat_completion/{id}/_stream`
and `POST /_inference/{id}/_stream`, answered as `event: message` server-sent events.

Errors before the stream starts (the gate's refusals and Litestar's own errors included) get an
HTTP status and Elasticsearch's error body (`{"error": {"root_cause", "type", "reason"}, "status"}`,
rendered by the routes' profile, `PROFILE`); errors while streaming become an `event: error`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from litestar import Request, post
from litestar.response import Stream

from appliance.api.handling import unless_disconnected
from appliance.api.profiles import OPERATION, DialectProfile, Operation
from appliance.api.sse import HEADERS, named_events
from appliance.dialects import elastic
from appliance.entry import Entry, named
from appliance.entry.decoding import convert_body, decode_json
from appliance.errors import ApplianceError
from appliance.protocol.elastic import ElasticError, ErrorCause, ErrorDetail
from appliance.protocol.openai import ChatCompletionRequest

__all__ = ["PROFILE", "router"]


def _error_body(exc: ApplianceError, _: Mapping[str, Any]) -> ElasticError:
    cause = ErrorCause(type=exc.type, reason=exc.message)
    return ElasticError(error=ErrorDetail(root_cause=[cause], type=exc.type, reason=exc.message), status=exc.status)


@post(
    ["/_inference/chat_completion/{inference_id:str}/_stream", "/_inference/{inference_id:str}/_stream"],
    status_code=200,
    opt={
        OPERATION: Operation(
            summary="A streamed chat completion (Elasticsearch's chat_completion inference API)",
            body=ChatCompletionRequest,
            stream='event: message and data: {"chat_completion": <ChatCompletionChunk>} per chunk',
            # The endpoint's id, or the only model served, stands for a `model` left out or unknown.
            optional=("model",),
        )
    },
)
async def chat_completion_stream(request: Request, inference_id: str, entry: Entry) -> Stream:
    """A streamed chat completion, each chunk as `{"chat_completion": chunk}`."""
    parsed = decode_json(await request.body())
    engine = elastic.chat_engine(entry.models, parsed, inference_id)
    body = convert_body(elastic.chat_body(parsed, engine.name), ChatCompletionRequest)
    named(engine.name, body.user)
    call = await unless_disconnected(request, entry.open_chat(engine, body))
    return Stream(
        named_events(elastic.wrapped_chunks(call), "message"),
        media_type="text/event-stream",
        headers=HEADERS,
    )


PROFILE = DialectProfile(name="elasticsearch", render_error=_error_body, error_bodies=(ElasticError,))
"""Elasticsearch's routes at the edge: errors in its shape."""

router = PROFILE.router("/", [chat_completion_stream])
