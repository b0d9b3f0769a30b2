"""OpenAI routes, under both /v1 and /v3: chat completions, completions, models."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from litestar import Request, Response, Router, get, post
from litestar.response import Stream

from appliance.api.handling import json_response, unless_disconnected
from appliance.api.profiles import OPERATION, Operation
from appliance.api.sse import HEADERS, event_stream
from appliance.engine import EngineClient
from appliance.entry import Entry
from appliance.entry.decoding import decode_body
from appliance.protocol.anthropic import ModelInfo, ModelInfoList
from appliance.protocol.openai import (
    ChatCompletion,
    ChatCompletionRequest,
    Completion,
    CompletionRequest,
    Model,
    ModelList,
)
from appliance.service import completions as service

__all__ = ["router"]

_STARTED = int(time.time())


@post(
    ["/v1/chat/completions", "/v3/chat/completions"],
    status_code=200,
    opt={
        OPERATION: Operation(
            summary="Chat completion",
            body=ChatCompletionRequest,
            answer=ChatCompletion,
            stream="data: <ChatCompletionChunk> events, then data: [DONE]",
        )
    },
)
async def chat_completions(request: Request, entry: Entry) -> Response:
    body = decode_body(await request.body(), ChatCompletionRequest)
    call = await unless_disconnected(request, entry.chat(body))
    if body.stream:
        return Stream(event_stream(call.chunks()), media_type="text/event-stream", headers=HEADERS)
    return json_response(await unless_disconnected(request, call.completion()))


@post(
    ["/v1/completions", "/v3/completions"],
    status_code=200,
    opt={
        OPERATION: Operation(
            summary="Text completion",
            body=CompletionRequest,
            answer=Completion,
            stream="data: <Completion> events, then data: [DONE]",
        )
    },
)
async def completions(request: Request, entry: Entry) -> Response:
    body = decode_body(await request.body(), CompletionRequest)
    streams = await unless_disconnected(request, entry.completion(body))
    if body.stream:
        chunks = service.completion_chunks(body, streams)
        return Stream(event_stream(chunks), media_type="text/event-stream", headers=HEADERS)
    return json_response(await unless_disconnected(request, service.completion(body, streams)))


def _model(engine: EngineClient) -> Model:
    return Model(id=engine.name, created=_STARTED, state=engine.status, max_model_len=engine.max_context)


def _model_info(engine: EngineClient) -> ModelInfo:
    """The model as Anthropic lists it: `anthropic`'s `client.models.list()` sends `anthropic-version`."""
    limit = min(engine.graph.limits.max_tokens_limit, engine.max_context)
    started = datetime.fromtimestamp(_STARTED, UTC).isoformat().replace("+00:00", "Z")
    return ModelInfo(
        id=engine.name,
        display_name=engine.name,
        created_at=started,
        max_input_tokens=engine.max_context,
        max_tokens=limit,
    )


def _anthropic(request: Request) -> bool:
    return "anthropic-version" in request.headers


@get(
    ["/v1/models", "/v3/models"],
    opt={
        OPERATION: Operation(
            summary="Served models (Anthropic's list when the request has an anthropic-version header)",
            answer=(ModelList, ModelInfoList),
            errors=(401,),
        )
    },
)
async def list_models(request: Request, entry: Entry) -> Response:
    if _anthropic(request):
        infos = [_model_info(engine) for engine in entry.models]
        first, last = (infos[0].id, infos[-1].id) if infos else (None, None)
        return json_response(ModelInfoList(data=infos, first_id=first, last_id=last))
    return json_response(ModelList(data=[_model(engine) for engine in entry.models]))


@get(
    ["/v1/models/{model_id:path}", "/v3/models/{model_id:path}"],
    opt={
        OPERATION: Operation(
            summary="One served model (Anthropic's shape with an anthropic-version header)",
            answer=(Model, ModelInfo),
            errors=(401, 404),
        )
    },
)
async def retrieve_model(request: Request, model_id: str, entry: Entry) -> Response:
    engine = entry.engine(model_id.lstrip("/"))
    return json_response(_model_info(engine) if _anthropic(request) else _model(engine))


router = Router(path="/", route_handlers=[chat_completions, completions, list_models, retrieve_model])
"""The OpenAI dialect; its errors take the appliance's envelope, OpenAI's (`profiles.DEFAULT_PROFILE`)."""
