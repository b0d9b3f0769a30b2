"""Anthropic's Messages API, under both /v1 and /v3: `POST /messages` (streamed or not) and
`POST /messages/count_tokens`.

A message is planned as a chat completion (`dialects.anthropic`) and submitted the way chat
completions are (`entry.Entry.open_chat`: admission, cancellation when the client leaves,
the access log); token counting renders the prompt as `/tokenize` does. The routes' profile
(`PROFILE`) tells the edge what is Anthropic's: every error on these routes, Litestar's own and the
gate's refusals included, in Anthropic's shape (`dialects.anthropic.errors`), the key also read
from `x-api-key`, the request id also in `request-id`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from litestar import Request, Response, post
from litestar.response import Stream

from appliance.api.handling import json_response, unless_disconnected
from appliance.api.openapi import hosted_tools_accepted
from appliance.api.profiles import OPERATION, DialectProfile, Operation
from appliance.api.sse import HEADERS, typed_events
from appliance.dialects.anthropic.errors import error_body
from appliance.dialects.anthropic.output import MessageEvents
from appliance.dialects.anthropic.plan import count_request, plan_message, prepare_body
from appliance.dialects.hosted_tools import HostedTools
from appliance.entry import Entry, current_record, named
from appliance.entry.decoding import convert_body, decode_json
from appliance.errors import ApplianceError
from appliance.protocol.anthropic import AnthropicErrorBody, CountTokensRequest, Message, MessagesRequest, TokenCount
from appliance.service import tokenize as tokenizer

__all__ = ["PROFILE", "routers"]

T = TypeVar("T")


# Anthropic's own tools are taken out before decoding: client tools leave `type` out or say custom.
_HOSTED_TOOLS = hosted_tools_accepted(("MessagesRequest", "CountTokensRequest"), ("custom",))


def _body(raw: bytes, kind: type[T]) -> tuple[T, HostedTools]:
    """The request as `kind`, and Anthropic's own tools taken out of its `tools`."""
    body = decode_json(raw)
    hosted = prepare_body(body)
    try:
        return convert_body(body, kind), hosted
    except ApplianceError as exc:
        raise hosted.rename(exc) from None


@post(
    "/messages",
    status_code=200,
    opt={
        OPERATION: Operation(
            summary="Create a message (Anthropic)",
            body=MessagesRequest,
            answer=Message,
            stream="event: <type> and data: <event> per event, from message_start to message_stop (or error)",
            edit=_HOSTED_TOOLS,
        )
    },
)
async def create_message(request: Request, entry: Entry) -> Response:
    body, hosted = _body(await request.body(), MessagesRequest)
    user = body.metadata.user_id if body.metadata is not None else None
    named(body.model, user)  # the access log names the model even when it is unknown
    engine = entry.engine(body.model)
    try:
        plan = plan_message(body, engine.tools.reasoning, hosted, engine.graph.limits.max_tokens_limit)
    except ApplianceError as exc:
        raise hosted.rename(exc) from None
    call = await unless_disconnected(request, entry.open_chat(engine, plan.chat, plan.field_name))
    events = MessageEvents(body.model, call.stream.prompt_tokens, show_thinking=_show_thinking(body))
    if body.stream:
        headers = {**HEADERS, **hosted.headers()}
        return Stream(typed_events(events.stream(call.pieces())), media_type="text/event-stream", headers=headers)
    return json_response(await unless_disconnected(request, events.final(call.pieces())), headers=hosted.headers())


def _show_thinking(body: MessagesRequest) -> bool:
    """False when `thinking.display` is `omitted`: thinking blocks come back empty, as Anthropic's do."""
    return getattr(body.thinking, "display", None) != "omitted"


@post(
    "/messages/count_tokens",
    status_code=200,
    opt={
        OPERATION: Operation(
            summary="Count a message's input tokens (Anthropic)",
            body=CountTokensRequest,
            answer=TokenCount,
            edit=_HOSTED_TOOLS,
        )
    },
)
async def count_tokens(request: Request, entry: Entry) -> Response:
    """The prompt's tokens as a create renders it (system, messages, tools); images are refused."""
    body, hosted = _body(await request.body(), CountTokensRequest)
    named(body.model, None)
    engine = entry.engine(body.model)
    tokenize, plan = count_request(body, engine.tools.reasoning, hosted)
    try:
        answer = await unless_disconnected(request, tokenizer.tokenize(engine, tokenize))
    except ApplianceError as exc:
        if exc.param is not None:  # the tokenizer route's fields, named as this request names them
            exc.param = plan.field_name(exc.param)
        raise
    return json_response(TokenCount(input_tokens=answer.count))


def _request_id() -> str | None:
    record = current_record.get()
    return record.request_id if record is not None else None


def _error_body(exc: ApplianceError, _: Mapping[str, Any]) -> AnthropicErrorBody:
    return error_body(exc, _request_id())


PROFILE = DialectProfile(
    name="anthropic",
    render_error=_error_body,
    error_bodies=(AnthropicErrorBody,),
    credential_headers=("x-api-key",),  # what Anthropic's SDK sends
    client_headers=("anthropic-version",),
    request_id_headers=("request-id",),  # the name Anthropic's SDK reads (`_request_id` on its answers)
)
"""Anthropic's Messages API at the edge."""

routers = [PROFILE.router(prefix, [create_message, count_tokens]) for prefix in ("/v1", "/v3")]
"""The Messages API, under /v1 and /v3."""
