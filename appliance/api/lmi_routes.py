"""LMI / SageMaker routes: `POST /invocations` and `POST /predictions/{model}`.

A body with `messages` is a chat completions request (LMI's chat schema) and keeps the OpenAI
error envelope; any other body is the LMI `inputs` + `parameters` schema, whose errors take LMI's
shapes: `{"error", "code"}` for a request refused before generation, a `finish_reason: "error"`
answer for a generation that fails (see `service.lmi.GenerationError`).
"""

from __future__ import annotations

import msgspec
from litestar import Request, Response, post
from litestar.response import Stream

from appliance.api.decoding import decode_body
from appliance.api.errors import exception_handlers as openai_handlers
from appliance.api.openai_routes import _record, _unless_disconnected
from appliance.api.sse import HEADERS, data_events, event_stream, json_lines
from appliance.engine import EngineClient
from appliance.errors import ApplianceError
from appliance.media import ImageLoader
from appliance.protocol.lmi import InvocationRequest, ValidationError
from appliance.protocol.openai import ChatCompletionRequest
from appliance.service import lmi
from appliance.service.chat import open_chat
from appliance.runtime.registry import ModelRegistry

__all__ = ["routes"]

_encoder = msgspec.json.Encoder()
_JSONLINES = "application/jsonlines"


def _chat_body(raw: bytes, model: str) -> bytes | None:
    """The body as a chat request naming `model` when it has `messages`; None otherwise."""
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    if not isinstance(body, dict) or "messages" not in body:
        return None
    # LMI's chat schema makes `model` optional: the route already chose the model.
    body.setdefault("model", model)
    return _encoder.encode(body)


def _stream(chunks: object, options: lmi.LmiOptions, *, chat: bool) -> Stream:
    if options.stream_format == "jsonlines":
        return Stream(json_lines(chunks), media_type=_JSONLINES, headers=HEADERS)
    # Chat streams keep OpenAI's [DONE] terminator; token streams end as TGI's do.
    framed = event_stream(chunks) if chat else data_events(chunks)
    return Stream(framed, media_type="text/event-stream", headers=HEADERS)


async def _chat(request: Request, engine: EngineClient, raw: bytes, media: ImageLoader, options: lmi.LmiOptions) -> Response:
    request.state.openai_errors = True
    body = decode_body(raw, ChatCompletionRequest)
    record = _record(body.model, body.user)
    call = await _unless_disconnected(request, open_chat(engine, body, media))
    if record:
        record.streams = [call.stream]
    if body.stream:
        return _stream(call.chunks(), options, chat=True)
    answer = await _unless_disconnected(request, call.completion())
    return Response(answer, status_code=200, media_type="application/json")


def _error_response(status: int, payload: object, exc: ApplianceError) -> Response:
    response = Response(payload, status_code=status, media_type="application/json")
    if exc.retry_after is not None:
        response.headers["Retry-After"] = str(exc.retry_after)
    return response


def _validation_error(request: Request, exc: ApplianceError) -> Response:
    if getattr(request.state, "openai_errors", False):
        return openai_handlers[ApplianceError](request, exc)
    return _error_response(exc.status, ValidationError(error=exc.message, code=exc.status), exc)


def _generation_error(request: Request, exc: lmi.GenerationError) -> Response:
    return _error_response(exc.status, lmi.error_result(exc.message), exc)


@post(
    ["/invocations", "/predictions/{model:str}"],
    status_code=200,
    exception_handlers={lmi.GenerationError: _generation_error, ApplianceError: _validation_error},
)
async def invocations(
    request: Request, models: ModelRegistry, media: ImageLoader, lmi_options: lmi.LmiOptions, model: str | None = None
) -> Response:
    """LMI rolling-batch / dynamic-batch generation, or chat completions when `messages` is sent."""
    raw = await request.body()
    engine = lmi.invocation_engine(models, lmi_options, model)
    chat = _chat_body(raw, engine.name)
    if chat is not None:
        return await _chat(request, engine, chat, media, lmi_options)
    body = decode_body(raw, InvocationRequest)
    record = _record(engine.name, None)
    generation = await _unless_disconnected(request, lmi.open_generation(engine, body))
    if record:
        record.streams = generation.streams
    if body.stream:
        return _stream(lmi.stream_lines(generation), lmi_options, chat=False)
    results = await _unless_disconnected(request, lmi.generate(generation))
    # A single input answers one object; a list of inputs (dynamic batch) and TGI mode, a list.
    payload = results[0] if isinstance(body.inputs, str) and not lmi_options.tgi_compat else results
    return Response(payload, status_code=200, media_type="application/json")


routes = [invocations]
