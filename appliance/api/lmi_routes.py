"""LMI / SageMaker routes: `POST /invocations` and `POST /predictions/{model}`.

A body with `messages` is a chat completions request (LMI's chat schema) and keeps the OpenAI
error envelope; any other body is the LMI `inputs` + `parameters` schema, whose errors take LMI's
shapes: `{"error", "code"}` for a request refused before generation (and the gate's refusals,
Litestar's own errors), a `finish_reason: "error"` answer for a generation that fails (see
`dialects.lmi.GenerationError`). The routes' profile (`PROFILE`) renders them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from litestar import Request, Response, post
from litestar.response import Stream

from appliance.api.handling import json_response, unless_disconnected
from appliance.api.profiles import OPERATION, DialectProfile, ErrorResponse, Operation
from appliance.api.sse import HEADERS, data_events, event_stream, json_lines
from appliance.dialects import lmi
from appliance.engine import EngineClient
from appliance.entry import Entry, named
from appliance.entry.decoding import convert_body, decode_json
from appliance.errors import ApplianceError
from appliance.protocol.lmi import GeneratedText, InvocationRequest, ValidationError
from appliance.protocol.openai import ChatCompletion, ChatCompletionRequest

__all__ = ["PROFILE", "router"]

_JSONLINES = "application/jsonlines"
_OPENAI_ERRORS = "openai_errors"
"""The request state entry set once a body turns out to be a chat request."""


def _stream(chunks: object, options: lmi.LmiOptions, *, chat: bool) -> Stream:
    if options.stream_format == "jsonlines":
        return Stream(json_lines(chunks), media_type=_JSONLINES, headers=HEADERS)
    # Chat streams keep OpenAI's [DONE] terminator; token streams end as TGI's do.
    framed = event_stream(chunks) if chat else data_events(chunks)
    return Stream(framed, media_type="text/event-stream", headers=HEADERS)


async def _chat(
    request: Request, entry: Entry, engine: EngineClient, parsed: dict[str, object], options: lmi.LmiOptions
) -> Response:
    # LMI's chat schema makes `model` optional: the route already chose the model.
    parsed.setdefault("model", engine.name)
    body = convert_body(parsed, ChatCompletionRequest)
    named(engine.name, body.user)
    call = await unless_disconnected(request, entry.open_chat(engine, body))
    if body.stream:
        return _stream(call.chunks(), options, chat=True)
    return json_response(await unless_disconnected(request, call.completion()))


def _error_body(exc: ApplianceError, state: Mapping[str, Any]) -> object:
    if isinstance(exc, lmi.GenerationError):
        return lmi.error_result(exc.message)
    if state.get(_OPENAI_ERRORS):
        return exc.to_dict()
    return ValidationError(error=exc.message, code=exc.status)


@post(
    ["/invocations", "/predictions/{model:str}"],
    status_code=200,
    opt={
        OPERATION: Operation(
            summary="LMI generation (rolling or dynamic batch), or a chat completion when `messages` is sent",
            body=(InvocationRequest, ChatCompletionRequest),
            answer=(GeneratedText, list[GeneratedText], ChatCompletion),
            stream="one JSON object per line (application/jsonlines), or server-sent events (output_formatter)",
            stream_media_types=(_JSONLINES, "text/event-stream"),
            optional=("model",),  # LMI's chat schema: the route's model stands for it
        )
    },
)
async def invocations(
    request: Request, entry: Entry, lmi_options: lmi.LmiOptions, model: str | None = None
) -> Response:
    """LMI rolling-batch / dynamic-batch generation, or chat completions when `messages` is sent."""
    parsed = decode_json(await request.body())  # once, for both schemas
    if isinstance(parsed, dict) and "messages" in parsed:
        request.state[_OPENAI_ERRORS] = True  # a chat body's errors keep OpenAI's envelope
        # A chat body's own `model` chooses, when the path names none; the default only without.
        chosen = model or (parsed["model"] if isinstance(parsed.get("model"), str) else None)
        engine = lmi.invocation_engine(entry.models, lmi_options, chosen)
        return await _chat(request, entry, engine, parsed, lmi_options)
    engine = lmi.invocation_engine(entry.models, lmi_options, model)
    body = convert_body(parsed, InvocationRequest)
    record = named(engine.name, None)
    generation = await unless_disconnected(request, lmi.open_generation(engine, body))
    if record:
        record.streams = generation.streams
    if body.stream:
        return _stream(lmi.stream_lines(generation), lmi_options, chat=False)
    results = await unless_disconnected(request, lmi.generate(generation))
    # A single input answers one object; a list of inputs (dynamic batch) and TGI mode, a list.
    payload = results[0] if isinstance(body.inputs, str) and not lmi_options.tgi_compat else results
    return json_response(payload)


PROFILE = DialectProfile(
    name="lmi", render_error=_error_body, error_bodies=(ValidationError, GeneratedText, ErrorResponse)
)
"""LMI's routes at the edge: errors in LMI's shapes (OpenAI's for chat bodies)."""

router = PROFILE.router("/", [invocations])
