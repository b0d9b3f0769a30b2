"""The Responses API, under both /v1 and /v3: create (streamed or not), retrieve and delete.

A response is planned as a chat completion (`dialects.responses`) and submitted the way chat
completions are (`entry.Entry.response`: admission, the access log; cancelled when the client
leaves); its errors take the OpenAI envelope. Stored responses belong to the API key that
created them (`dialects.responses.store`).
"""

from __future__ import annotations

from typing import Any

from litestar import HttpMethod, Request, Response, post, route
from litestar.response import Stream

from appliance.api.gate import api_key
from appliance.api.handling import json_response, unless_disconnected
from appliance.api.openapi import hosted_tools_accepted
from appliance.api.profiles import OPERATION, Operation
from appliance.api.sse import HEADERS, typed_events
from appliance.dialects.responses.input import prepare_body
from appliance.dialects.responses.store import ResponseStore, owner_of
from appliance.entry import Entry
from appliance.entry.decoding import convert_body, decode_json
from appliance.errors import ApplianceError, InvalidRequest, NotFound
from appliance.protocol.responses import DeletedResponse, ResponsesRequest
from appliance.protocol.responses import Response as ModelResponse

__all__ = ["routes"]


def _owner(request: Request) -> str:
    return owner_of(api_key(request))


def _easy_input_items(components: dict[str, Any], document: dict[str, Any]) -> None:
    """Message items and item references may leave `type` out (the SDK's "easy" messages do;
    `prepare_body` fills it in), so `type` no longer tells every input item apart."""
    for name in ("InputMessage", "ItemReference"):
        required = components[name]["required"]
        if "type" in required:  # edited once for all the routes that take them
            required.remove("type")
    for variant in components["ResponsesRequest"]["properties"]["input"]["anyOf"]:
        variant.get("items", {}).pop("discriminator", None)
    _HOSTED_TOOLS(components, document)


_HOSTED_TOOLS = hosted_tools_accepted(("ResponsesRequest",), ("function", "namespace"))
"""Hosted tools (web search, ...) are taken out of `tools` before decoding."""


@post(
    ["/v1/responses", "/v3/responses"],
    status_code=200,
    opt={
        OPERATION: Operation(
            summary="Create a model response",
            body=ResponsesRequest,
            answer=ModelResponse,
            # The Responses API streams typed events (`event: <type>`) and ends without [DONE].
            stream="event: <type> and data: <ResponseEvent> per event, from response.created to "
            "response.completed, response.incomplete or response.failed",
            edit=_easy_input_items,
        )
    },
)
async def create_response(request: Request, entry: Entry) -> Response:
    raw = decode_json(await request.body())
    hosted = prepare_body(raw)
    try:
        body = convert_body(raw, ResponsesRequest)
    except ApplianceError as exc:
        raise hosted.rename(exc) from None
    answer = await unless_disconnected(request, entry.response(body, hosted, _owner(request)))
    if body.stream:
        headers = {**HEADERS, **hosted.headers()}
        return Stream(typed_events(answer.events()), media_type="text/event-stream", headers=headers)
    return json_response(await unless_disconnected(request, answer.response()), headers=hosted.headers())


# One handler for both methods: Litestar's automatic OPTIONS answer lists only the methods of the
# first handler registered on a path, and the Allow header must list GET and DELETE.
@route(
    ["/v1/responses/{response_id:str}", "/v3/responses/{response_id:str}"],
    http_method=[HttpMethod.GET, HttpMethod.DELETE],
    status_code=200,
    cache=False,
    opt={
        OPERATION: {
            "GET": Operation(summary="A stored response", answer=ModelResponse, errors=(400, 401, 404)),
            "DELETE": Operation(summary="Delete a stored response", answer=DeletedResponse, errors=(401, 404)),
        }
    },
)
async def stored_response(
    request: Request, response_id: str, response_store: ResponseStore, stream: bool = False
) -> Response:
    """GET: the stored response (whole: `stream=true` is refused). DELETE: forget it."""
    owner = _owner(request)
    found = await response_store.get(owner, response_id)
    if found is None:
        raise NotFound(
            f"Response with id '{response_id}' not found: it was not stored, was deleted, expired or "
            "was evicted, or belongs to another API key.",
            param="response_id",
            code="response_not_found",
        )
    if request.method == HttpMethod.DELETE:
        await response_store.delete(owner, response_id)
        return json_response(DeletedResponse(id=response_id))
    if stream:
        raise InvalidRequest(
            "A stored response is returned whole here; stream=true is not supported.",
            param="stream",
            code="unsupported_parameter",
        )
    return json_response(found.response)


routes = [create_response, stored_response]
