"""Ollama's API under /api, and `GET /` / `HEAD /` as Ollama's clients probe a server.

`/api/chat` and `/api/generate` are planned as chat completions (`dialects.ollama`; raw generation
as a completion) and submitted the way every chat is (`entry.Entry.open_chat`: bounds,
admission, cancellation when the client leaves, the access log); they stream one JSON object per
line by default (`application/x-ndjson`), as Ollama does, or answer whole with `stream: false`.
`/api/embed` and `/api/embeddings` are `/v1/embeddings` (`service.retrieval`): the same vectors.
`/api/tags`, `/api/show` and `/api/ps` describe the graphs and the lifecycle; `/api/version` gives
the Ollama API level followed. Models come from graph files: `/api/pull` of a served model answers
success, anything else that would fetch, create, copy, push or delete a model is refused.

`keep_alive`: 0 unloads the model after the answer (at once for a request with no messages or
prompt) when its graph lets it come and go (`Lifecycle.may_come_and_go`); a duration is accepted
without effect (the graph's `idle_unload_seconds` decides, for every client of the model alike).

The routes' profile (`PROFILE`) gives every error on them, the gate's and Litestar's included, in
Ollama's shape (`{"error": "..."}`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from litestar import Request, Response, Router, delete, get, head, post
from litestar.response import Redirect, Stream

from appliance.api.handling import json_response, unless_disconnected
from appliance.api.profiles import OPERATION, DialectProfile, Operation
from appliance.api.sse import HEADERS, json_lines
from appliance.dialects.ollama.errors import error_body
from appliance.dialects.ollama.models import find_model, listed, running, shown
from appliance.dialects.ollama.output import Answer, created_at, raw_lines, raw_whole
from appliance.dialects.ollama.plan import UNLOAD, keep_alive_seconds, plan_chat, plan_generate
from appliance.engine import EngineClient
from appliance.entry import Entry, RequestRecord, named
from appliance.entry.decoding import decode_body
from appliance.errors import ApplianceError, InvalidRequest, NotFound, unsupported
from appliance.protocol.ollama import (
    AnswerMessage,
    ChatRequest,
    ChatResponse,
    EmbeddingsRequest,
    EmbeddingsResponse,
    EmbedRequest,
    EmbedResponse,
    GenerateRequest,
    GenerateResponse,
    ListResponse,
    ModelRequest,
    OllamaError,
    ProcessResponse,
    ShowRequest,
    ShowResponse,
    StatusResponse,
    VersionResponse,
)
from appliance.protocol.retrieval import EmbeddingRequest
from appliance.runtime.registry import ModelRegistry
from appliance.service import completions, retrieval
from appliance.service.chat import ChatCall

__all__ = ["OLLAMA_VERSION", "PROFILE", "routers"]

log = logging.getLogger("appliance.server")

OLLAMA_VERSION = "0.12.6"
"""The Ollama API level these routes follow (clients check it before using `think`, tools, ...)."""
NDJSON = "application/x-ndjson"
_PROBE = "Ollama is running"
_UNLOAD_DRAIN_SECONDS = 60.0
"""A client's unload waits this long for the model's other requests before it stops the engine."""
_unloads: set[asyncio.Task[bool]] = set()


def _stream(lines: AsyncIterator[object]) -> Stream:
    return Stream(json_lines(lines, error_body), media_type=NDJSON, headers=HEADERS)


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
        return _stream(_unloading_after(lines(), models, engine) if unload else lines())
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


def _embedding_request(
    engine: EngineClient, model: str, texts: list[str], body: EmbedRequest | None
) -> EmbeddingRequest:
    if body is not None and body.truncate is False and engine.graph.limits.truncate_inputs:
        raise unsupported(
            "truncate: false cannot be honoured on this model: its graph cuts texts beyond the model's input "
            "(limits.truncate_inputs). Leave truncate out.",
            "truncate",
        )
    return EmbeddingRequest(input=texts, model=model, dimensions=body.dimensions if body is not None else None)


async def _vectors(
    request: Request, engine: EngineClient, embedding: EmbeddingRequest, record: RequestRecord | None
) -> tuple[list[list[float]], int]:
    """The texts' vectors, as `/v1/embeddings` gives them, and the tokens read."""
    response, answered = await unless_disconnected(request, retrieval.embed(engine, embedding))
    if record is not None:
        record.streams = [answered]
    vectors = [item.embedding for item in sorted(response.data, key=lambda item: item.index)]
    return vectors, response.usage.prompt_tokens  # type: ignore[return-value]


@post(
    "/embed",
    status_code=200,
    opt={OPERATION: Operation(summary="Embeddings of texts (Ollama)", body=EmbedRequest, answer=EmbedResponse)},
)
async def embed(request: Request, models: ModelRegistry) -> Response:
    started = time.monotonic()
    body = decode_body(await request.body(), EmbedRequest)
    record = named(body.model, None)
    engine = find_model(models, body.model)
    keep_alive_seconds(body.keep_alive)  # checked; the graph decides when the model unloads
    texts = ([body.input] if body.input else []) if isinstance(body.input, str) else body.input
    if not texts:
        engine.require("embed")
        await unless_disconnected(request, engine.ensure_loaded())
        return json_response(EmbedResponse(model=body.model, embeddings=[]))
    vectors, tokens = await _vectors(request, engine, _embedding_request(engine, body.model, texts, body), record)
    total = round((time.monotonic() - started) * 1e9)
    return json_response(
        EmbedResponse(model=body.model, embeddings=vectors, total_duration=total, prompt_eval_count=tokens)
    )


@post(
    "/embeddings",
    status_code=200,
    opt={
        OPERATION: Operation(
            summary="The embedding of one text (Ollama's older route)",
            body=EmbeddingsRequest,
            answer=EmbeddingsResponse,
        )
    },
)
async def embeddings(request: Request, models: ModelRegistry) -> Response:
    body = decode_body(await request.body(), EmbeddingsRequest)
    record = named(body.model, None)
    engine = find_model(models, body.model)
    keep_alive_seconds(body.keep_alive)
    if not body.prompt:
        engine.require("embed")
        await unless_disconnected(request, engine.ensure_loaded())
        return json_response(EmbeddingsResponse(embedding=[]))
    try:
        embedding = _embedding_request(engine, body.model, [body.prompt], None)
        vectors, _ = await _vectors(request, engine, embedding, record)
    except ApplianceError as exc:
        exc.param = "prompt" if exc.param and exc.param.startswith("input") else exc.param
        raise
    return json_response(EmbeddingsResponse(embedding=vectors[0]))


@get("/tags", cache=False, opt={OPERATION: Operation(summary="The chat and embedding models (Ollama)", errors=(401,))})
async def tags(models: ModelRegistry) -> ListResponse:
    return ListResponse(models=listed(models))


@post(
    "/show",
    status_code=200,
    opt={OPERATION: Operation(summary="One model's details (Ollama)", body=ShowRequest, answer=ShowResponse)},
)
async def show(request: Request, models: ModelRegistry) -> Response:
    body = decode_body(await request.body(), ShowRequest)
    name = body.model or body.name
    if not name:
        raise InvalidRequest("Missing required parameter: 'model'.", param="model", code="missing_required_parameter")
    return json_response(shown(find_model(models, name)))


@get("/ps", cache=False, opt={OPERATION: Operation(summary="The loaded models (Ollama)", errors=(401,))})
async def ps(models: ModelRegistry) -> ProcessResponse:
    return ProcessResponse(models=running(models))


@get("/version", cache=False, opt={OPERATION: Operation(summary="The Ollama API level served", errors=(401,))})
async def version() -> VersionResponse:
    return VersionResponse(version=OLLAMA_VERSION)


_FROM_GRAPHS = (
    "Models here come from graph files (docs/models.md): an operator adds one to the graphs directory "
    "and reloads; this server does not {verb} models."
)


@post(
    "/pull",
    status_code=200,
    opt={
        OPERATION: Operation(
            summary="Pull: success for a served model (Ollama)",
            body=ModelRequest,
            answer=StatusResponse,
            stream='{"status": "success"} as one line',
            stream_media_types=(NDJSON,),
        )
    },
)
async def pull(request: Request, models: ModelRegistry) -> Response:
    """A model already served is there: success (a client pulls before it chats). Any other is
    not found: nothing is downloaded here."""
    body = decode_body(await request.body(), ModelRequest)
    name = body.model or body.name
    try:
        find_model(models, name)
    except NotFound:
        raise NotFound(
            f"The model '{name}' is not served. " + _FROM_GRAPHS.format(verb="download"), param="model"
        ) from None
    status = StatusResponse(status="success")
    if body.stream is False:
        return json_response(status)

    async def one_line() -> AsyncIterator[object]:
        yield status

    return _stream(one_line())


async def _refuse(request: Request, verb: str) -> Response:
    decode_body(await request.body(), ModelRequest)  # a body that is not JSON says so first
    raise unsupported(_FROM_GRAPHS.format(verb=verb), "model")


_MANAGEMENT = {"errors": (400, 401, 413), "body": ModelRequest, "answer": StatusResponse}


@post(
    ["/push", "/create", "/copy"],
    status_code=200,
    opt={OPERATION: Operation(summary="Refused: models come from graph files", **_MANAGEMENT)},
)
async def manage(request: Request) -> Response:
    return await _refuse(request, request.url.path.rpartition("/")[2])


@delete(
    "/delete",
    status_code=200,
    opt={OPERATION: Operation(summary="Refused: models come from graph files", **_MANAGEMENT)},
)
async def delete_model(request: Request) -> Response:
    return await _refuse(request, "delete")


def _root(page: str | None) -> list[Any]:
    @get(
        "/",
        cache=False,
        opt={
            OPERATION: Operation(
                summary="Ollama's probe: 'Ollama is running' (a browser is sent to the playground)",
                answer_media_type="text/plain",
                errors=(401,),
                statuses=((302, "a browser (Accept: text/html) is sent to the playground"),),
            )
        },
    )
    async def root(request: Request) -> Response:
        if page is not None and "text/html" in request.headers.get("accept", ""):
            return Redirect(path=page, status_code=302)
        return Response(_PROBE, media_type="text/plain")

    @head("/", cache=False)
    async def probe() -> None:
        """Ollama's heartbeat (`ollama` CLI): 200, no body."""

    return [root, probe]


def _error_body(exc: ApplianceError, _: Mapping[str, Any]) -> OllamaError:
    return error_body(exc)


PROFILE = DialectProfile(name="ollama", render_error=_error_body, error_bodies=(OllamaError,))
"""Ollama's API at the edge: its error shape; its clients send the key as `Authorization: Bearer`."""

_HANDLERS = [chat, generate, embed, embeddings, tags, show, ps, version, pull, manage, delete_model]


def routers(page: str | None) -> list[Router]:
    """Ollama's routes under /api, and `/` (a browser sent to the playground at `page`, if served)."""
    return [PROFILE.router("/api", _HANDLERS), PROFILE.router("/", _root(page))]
