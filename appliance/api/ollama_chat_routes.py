"""Ollama's `/api/chat` and `/api/generate`, and what `keep_alive` asks of the model.

Both are planned as chat completions (`dialects.ollama`; raw generation as a completion) and
submitted the way every chat is (`entry.Entry.open_chat`: bounds, admission, cancellation when the
client leaves, the access log); they stream one JSON object per line by default
(`application/x-ndjson`), as Ollama does, or answer whole with `stream: false`.

`keep_alive`: 0 unloads the model after the answer (at once for a request with no messages or
prompt) when its graph lets it come and go (`Lifecycle.may_come_and_go`); a duration is accepted
without effect (the graph's `idle_unload_seconds` decides, for every client of the model alike).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from litestar import Request, Response, post

from appliance.api.handling import json_response, unless_disconnected
from appliance.api.ollama_lines import NDJSON, ndjson_stream
from appliance.api.profiles import OPERATION, Operation
from appliance.dialects.ollama.models import find_model
from appliance.dialects.ollama.output import Answer, created_at, raw_lines, raw_whole
from appliance.dialects.ollama.plan import UNLOAD, keep_alive_seconds, plan_chat, plan_generate
from appliance.engine import EngineClient
from appliance.entry import Entry, named
from appliance.entry.decoding import decode_body
from appliance.errors import ApplianceError, InvalidRequest
from appliance.protocol.ollama import AnswerMessage, ChatRequest, ChatResponse, GenerateRequest, GenerateResponse
from appliance.runtime.registry import ModelRegistry
from appliance.service import completions
from appliance.service.chat import ChatCall

__all__ = ["HANDLERS", "chat", "generate"]

log = logging.getLogger("appliance.server")

_UNLOAD_DRAIN_SECONDS = 60.0
"""A client's unload waits this long for the model's other requests before it stops the engine."""
_unloads: set[asyncio.Task[bool]] = set()


def _unload_later(models: ModelRegistry, engine: EngineClient) -> None:
    """Unload `engine` (its requests in flight finish first), after the answer that asked for it."""
    task = asyncio.get_running_loop().create_task(models.lifecycle.unload(engine, _UNLOAD_DRAIN_SECONDS))
    _unloads.add(task)
    task.add_done_callback(_unloads.discard)
    log.info("engine %s: unloading, as a client asked (keep_alive 0)", engine.name)


def _unloading_after(
    lines: AsyncIterator[object], models: ModelRegistry, engine: EngineClient
) -> AsyncIterator[object]:
    async def then_unload() -> AsyncIterator[object]:
        async for line in lines:
            yield line
        _unload_later(models, engine)

    return then_unload()


async def _load_or_unload(
    request: Request, models: ModelRegistry, engine: EngineClient, keep_alive: float | None, shape: str
) -> Response:
    """A chat with no messages or a generate with no prompt: load the model, or unload it with
    `keep_alive: 0`; answered with `done_reason` `load` or `unload`."""
    if keep_alive == UNLOAD:
        if not models.lifecycle.may_come_and_go(engine):
            raise InvalidRequest(
                f"The model '{engine.name}' stays loaded: its graph loads it at start and has no "
                "idle_unload_seconds, so only an operator unloads it (POST /admin/models/NAME/unload).",
                param="keep_alive",
            )
        _unload_later(models, engine)
        reason = "unload"
    else:
        await unless_disconnected(request, engine.ensure_loaded())
        reason = "load"
    if shape == "chat":
        message = AnswerMessage(role="assistant", content="")
        answer: object = ChatResponse(
            model=engine.name, created_at=created_at(), message=message, done=True, done_reason=reason
        )
    else:
        answer = GenerateResponse(
            model=engine.name, created_at=created_at(), response="", done=True, done_reason=reason
        )
    return json_response(answer)


async def _respond(
    request: Request,
    models: ModelRegistry,
    engine: EngineClient,
    keep_alive: float | None,
    streamed: bool,
    lines: Callable[[], AsyncIterator[object]],
    whole: Callable[[], Awaitable[object]],
) -> Response:
    """The answer streamed (`lines()`) or whole (`whole()`); the model unloaded after it when
    `keep_alive` is 0 and its graph lets it come and go."""
    unload = keep_alive == UNLOAD and models.lifecycle.may_come_and_go(engine)
    if streamed:
        return ndjson_stream(_unloading_after(lines(), models, engine) if unload else lines())
    result = await unless_disconnected(request, whole())
    if unload:
        _unload_later(models, engine)
    return json_response(result)


def _rendered(
    answer: Answer, call: ChatCall
) -> tuple[Callable[[], AsyncIterator[object]], Callable[[], Awaitable[object]]]:
    """How `_respond` gets the chat answer's lines, or the whole of it."""
    return lambda: answer.lines(call.pieces()), lambda: answer.whole(call.pieces())


_TEXT_STREAM = "one JSON object per line (done: false), the last with done: true and the counts; or {error}"


@post(
    "/chat",
    status_code=200,
    opt={
        OPERATION: Operation(
            summary="Chat (Ollama)",
            body=ChatRequest,
            answer=ChatResponse,
            stream=_TEXT_STREAM,
            stream_media_types=(NDJSON,),
        )
    },
)
async def chat(request: Request, entry: Entry) -> Response:
    models = entry.models
    started = time.monotonic()
    body = decode_body(await request.body(), ChatRequest)
    named(body.model, None)  # the access log names the model even when it is unknown
    engine = find_model(models, body.model)
    keep_alive = keep_alive_seconds(body.keep_alive)
    if not body.messages:
        return await _load_or_unload(request, models, engine, keep_alive, "chat")
    plan = plan_chat(body, engine.graph, engine.tools.reasoning)
    call = await unless_disconnected(request, entry.open_chat(engine, plan.chat, plan.field_name))  # type: ignore[arg-type]
    answer = Answer(body.model, "chat", call.stream, started)
    return await _respond(request, models, engine, keep_alive, body.stream, *_rendered(answer, call))


@post(
    "/generate",
    status_code=200,
    opt={
        OPERATION: Operation(
            summary="Generate from a prompt (Ollama)",
            body=GenerateRequest,
            answer=GenerateResponse,
            stream=_TEXT_STREAM,
            stream_media_types=(NDJSON,),
        )
    },
)
async def generate(request: Request, entry: Entry) -> Response:
    models = entry.models
    started = time.monotonic()
    body = decode_body(await request.body(), GenerateRequest)
    record = named(body.model, None)
    engine = find_model(models, body.model)
    keep_alive = keep_alive_seconds(body.keep_alive)
    if not body.prompt and not body.images:
        return await _load_or_unload(request, models, engine, keep_alive, "generate")
    plan = plan_generate(body, engine.graph, engine.tools.reasoning)
    if plan.chat is not None:
        call = await unless_disconnected(request, entry.open_chat(engine, plan.chat, plan.field_name))
        answer = Answer(body.model, "generate", call.stream, started)
        return await _respond(request, models, engine, keep_alive, body.stream, *_rendered(answer, call))
    try:
        streams = await unless_disconnected(request, completions.open_completion(engine, plan.completion))  # type: ignore[arg-type]
    except ApplianceError as exc:
        exc.param = plan.field_name(exc.param) if exc.param else exc.param
        raise
    if record is not None:
        record.streams = streams
    stream = streams[0]  # one prompt, one stream
    return await _respond(
        request,
        models,
        engine,
        keep_alive,
        body.stream,
        lambda: raw_lines(body.model, stream, started),
        lambda: raw_whole(body.model, stream, started),
    )


HANDLERS = [chat, generate]
