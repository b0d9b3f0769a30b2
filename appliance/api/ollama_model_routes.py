"""Ollama's model routes: `/api/tags`, `/api/show` and `/api/ps` describe the graphs and the
lifecycle, `/api/version` gives the Ollama API level followed. Models come from graph files:
`/api/pull` of a served model answers success, anything else that would fetch, create, copy, push
or delete a model is refused."""

from __future__ import annotations

from collections.abc import AsyncIterator

from litestar import Request, Response, delete, get, post

from appliance.api.handling import json_response
from appliance.api.ollama_lines import NDJSON, ndjson_stream
from appliance.api.profiles import OPERATION, Operation
from appliance.dialects.ollama.models import find_model, listed, running, shown
from appliance.entry.decoding import decode_body
from appliance.errors import InvalidRequest, NotFound, unsupported
from appliance.protocol.ollama import (
    ListResponse,
    ModelRequest,
    ProcessResponse,
    ShowRequest,
    ShowResponse,
    StatusResponse,
    VersionResponse,
)
from appliance.runtime.registry import ModelRegistry

__all__ = ["HANDLERS", "OLLAMA_VERSION"]

OLLAMA_VERSION = "0.12.6"
"""The Ollama API level these routes follow (clients check it before using `think`, tools, ...)."""


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

    return ndjson_stream(one_line())


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


HANDLERS = [tags, show, ps, version, pull, manage, delete_model]
