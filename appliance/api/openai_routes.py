"""OpenAI routes, under both /v1 and /v3: chat completions, completions, models."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import TypeVar

from litestar import Request, Response, get, post
from litestar.response import Stream

from appliance.api.decoding import decode_body
from appliance.api.errors import ClientDisconnected
from appliance.api.gate import RequestRecord, current_record
from appliance.api.sse import HEADERS, event_stream
from appliance.media import ImageLoader
from appliance.protocol.openai import ChatCompletionRequest, CompletionRequest, Model, ModelList
from appliance.service import chat
from appliance.service import openai as service
from appliance.runtime.registry import ModelRegistry

__all__ = ["routes"]

T = TypeVar("T")
_STARTED = int(time.time())


async def _unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    # Litestar cancels a streaming body when the client leaves, but not a plain handler: watch the
    # ASGI channel for http.disconnect ourselves and cancel the generation (freeing its KV blocks).
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnect(request))
    try:
        done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if task in done:
        return task.result()
    task.cancel()
    raise ClientDisconnected


async def _disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _record(model: str, user: str | None) -> RequestRecord | None:
    """The access-log record of this request (None when served without the gate, e.g. in tests)."""
    record = current_record.get()
    if record is not None:
        record.model, record.user = model, user
    return record


def _json(payload: object) -> Response:
    return Response(payload, status_code=200, media_type="application/json")


@post(["/v1/chat/completions", "/v3/chat/completions"], status_code=200)
async def chat_completions(request: Request, models: ModelRegistry, media: ImageLoader) -> Response:
    body = decode_body(await request.body(), ChatCompletionRequest)
    record = _record(body.model, body.user)
    engine = models.get(body.model)
    call = await _unless_disconnected(request, chat.open_chat(engine, body, media))
    if record:
        record.streams = [call.stream]
    if body.stream:
        return Stream(event_stream(call.chunks()), media_type="text/event-stream", headers=HEADERS)
    return _json(await _unless_disconnected(request, call.completion()))


@post(["/v1/completions", "/v3/completions"], status_code=200)
async def completions(request: Request, models: ModelRegistry) -> Response:
    body = decode_body(await request.body(), CompletionRequest)
    record = _record(body.model, body.user)
    engine = models.get(body.model)
    streams = await _unless_disconnected(request, service.open_completion(engine, body))
    if record:
        record.streams = streams
    if body.stream:
        chunks = service.completion_chunks(body, streams)
        return Stream(event_stream(chunks), media_type="text/event-stream", headers=HEADERS)
    return _json(await _unless_disconnected(request, service.completion(body, streams)))


@get(["/v1/models", "/v3/models"])
async def list_models(models: ModelRegistry) -> ModelList:
    return ModelList(data=[Model(id=engine.name, created=_STARTED) for engine in models])


@get(["/v1/models/{model_id:path}", "/v3/models/{model_id:path}"])
async def retrieve_model(model_id: str, models: ModelRegistry) -> Model:
    return Model(id=models.get(model_id.lstrip("/")).name, created=_STARTED)


routes = [chat_completions, completions, list_models, retrieve_model]
