"""OpenAI's Batch API, under /v1 and /v3: create, list, retrieve and cancel batches.

A batch belongs to the API key that created it, as its input file does (`/v1/files`), and its
output and error files are read through `/v1/files/{id}/content`. The work is the runner's
(`appliance.batches`): these handlers decode, call it, encode.
"""

from __future__ import annotations

from litestar import HttpMethod, Request, Response, post, route

from appliance.api.gate import api_key
from appliance.api.handling import json_response, listing_limit
from appliance.api.profiles import OPERATION, Operation
from appliance.batches import BatchRunner
from appliance.entry.decoding import decode_body, decode_json
from appliance.protocol.batches import Batch, BatchCreateRequest, BatchList
from appliance.store import owner_of

__all__ = ["routes"]

MAX_LIST = 100
"""`limit` of a listing, at most (OpenAI's); 20 by default."""


def _owner(request: Request) -> str:
    return owner_of(api_key(request))


def _list_parameters(_: dict, document: dict) -> None:
    """The listing's query parameters (read by hand, so a bad one is a 400 in OpenAI's shape)."""
    document["parameters"] = [
        {"name": "after", "in": "query", "required": False, "schema": {"type": "string"}},
        {
            "name": "limit",
            "in": "query",
            "required": False,
            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIST},
        },
    ]


# One handler for both methods: Litestar's automatic OPTIONS answer lists only the methods of the
# first handler registered on a path.
@route(
    ["/v1/batches", "/v3/batches"],
    http_method=[HttpMethod.GET, HttpMethod.POST],
    status_code=200,
    cache=False,
    opt={
        OPERATION: {
            "POST": Operation(
                summary="Create a batch from an uploaded file of requests",
                body=BatchCreateRequest,
                answer=Batch,
                errors=(400, 401, 404, 503),
            ),
            "GET": Operation(
                summary="List your batches", answer=BatchList, errors=(400, 401, 503), edit=_list_parameters
            ),
        }
    },
)
async def batches(request: Request, batch_runner: BatchRunner) -> Response:
    """POST: create a batch. GET: list the API key's batches, newest first."""
    owner = _owner(request)
    if request.method == HttpMethod.POST:
        body = decode_body(await request.body(), BatchCreateRequest)
        return json_response(await batch_runner.create(owner, body))
    query = request.query_params
    limit = listing_limit(query, ("after", "limit"), 20, MAX_LIST)
    return json_response(await batch_runner.page(owner, limit=limit, after=query.get("after")))


@route(
    ["/v1/batches/{batch_id:str}", "/v3/batches/{batch_id:str}"],
    http_method=[HttpMethod.GET],
    status_code=200,
    cache=False,
    opt={OPERATION: Operation(summary="A batch, with its progress", answer=Batch, errors=(401, 404, 503))},
)
async def batch(request: Request, batch_id: str, batch_runner: BatchRunner) -> Response:
    return json_response(await batch_runner.get(_owner(request), batch_id))


@post(
    ["/v1/batches/{batch_id:str}/cancel", "/v3/batches/{batch_id:str}/cancel"],
    status_code=200,
    opt={
        OPERATION: Operation(
            summary="Cancel a batch (lines running finish; the rest are not run)",
            answer=Batch,
            errors=(400, 401, 404, 503),
        )
    },
)
async def cancel_batch(request: Request, batch_id: str, batch_runner: BatchRunner) -> Response:
    """Cancel the batch; a body is not needed, and one sent must be JSON (as on every route)."""
    if (await request.body()).strip():
        decode_json(await request.body())
    return json_response(await batch_runner.cancel(_owner(request), batch_id))


routes = [batches, batch, cancel_batch]
