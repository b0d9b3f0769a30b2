"""OpenAI's Files API, under /v1 and /v3: upload (multipart), list, retrieve, content, delete.

Files live in the appliance's store (`appliance.store.files`) and belong to the API key that
uploaded them: another key neither lists nor finds them. An upload takes `purpose: batch` only
(the input of `/v1/batches`), UTF-8 text within `max_file_bytes` and `max_file_lines`, and the
key's files together within `max_stored_file_bytes`; its lines are read by the batch that uses
it, not here. A batch's output and error files are listed here too (`purpose: batch_output`).
"""

from __future__ import annotations

from typing import Any

from litestar import HttpMethod, Request, Response, get, route

from appliance.api.forms import MULTIPART, read_form
from appliance.api.gate import api_key
from appliance.api.handling import json_response, listing_limit
from appliance.api.profiles import OPERATION, Operation
from appliance.entry.decoding import convert_form
from appliance.errors import InvalidRequest, NotFound
from appliance.protocol.files import FileDeleted, FileList, FileObject, FileUploadForm
from appliance.store import FileRecord, Store, owner_of

__all__ = ["routes"]

MAX_LIST = 10_000
"""`limit` of a listing, at most (and its default, as OpenAI's)."""
_ORDERS = ("asc", "desc")


def _file_object(record: FileRecord) -> FileObject:
    return FileObject(
        id=record.id,
        bytes=record.bytes,
        created_at=record.created_at,
        filename=record.filename,
        purpose=record.purpose,  # type: ignore[arg-type]  # the store keeps what the API wrote
        expires_at=record.expires_at,
    )


def _not_found(file_id: str) -> NotFound:
    return NotFound(f"No such File object: {file_id}", param="file_id", code="file_not_found")


def _list_parameters(_: dict[str, Any], document: dict[str, Any]) -> None:
    """The listing's query parameters (read by hand: the handler also takes the upload)."""
    document["parameters"] = [
        {"name": "purpose", "in": "query", "required": False, "schema": {"type": "string"}},
        {
            "name": "limit",
            "in": "query",
            "required": False,
            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIST},
        },
        {"name": "after", "in": "query", "required": False, "schema": {"type": "string"}},
        {"name": "order", "in": "query", "required": False, "schema": {"type": "string", "enum": list(_ORDERS)}},
    ]


# One handler for both methods: Litestar's automatic OPTIONS answer lists only the methods of the
# first handler registered on a path.
@route(
    ["/v1/files", "/v3/files"],
    http_method=[HttpMethod.GET, HttpMethod.POST],
    status_code=200,
    cache=False,
    opt={
        OPERATION: {
            "POST": Operation(
                summary="Upload a file (purpose: batch)",
                body=FileUploadForm,
                media_types=(MULTIPART,),
                answer=FileObject,
                errors=(400, 401, 413, 503),
            ),
            "GET": Operation(summary="List your files", answer=FileList, errors=(400, 401, 503), edit=_list_parameters),
        }
    },
)
async def files(request: Request, store: Store) -> Response:
    """POST: upload a file. GET: list the API key's files."""
    owner = owner_of(api_key(request))
    if request.method == HttpMethod.GET:
        return json_response(await _listing(request, store, owner))
    form = await read_form(request)
    upload = convert_form(form.fields, FileUploadForm)
    if upload.purpose != "batch":
        raise InvalidRequest(
            f"purpose '{upload.purpose}' is not served here: this appliance keeps files for its Batch API only "
            "(purpose: batch).",
            param="purpose",
        )
    if upload.expires_after_seconds is not None and upload.expires_after_anchor is None:
        raise InvalidRequest("expires_after needs its anchor: created_at.", param="expires_after[anchor]")
    record = await store.files.create(
        owner,
        purpose=upload.purpose,
        filename=form.filename or "file",
        content=upload.file,
        expires_after=upload.expires_after_seconds,
    )
    return json_response(_file_object(record))


async def _listing(request: Request, store: Store, owner: str) -> FileList:
    query = request.query_params
    limit = listing_limit(query, ("purpose", "limit", "after", "order"), MAX_LIST, MAX_LIST)
    order = query.get("order", "desc")
    if order not in _ORDERS:
        raise InvalidRequest("order must be asc or desc.", param="order")
    records, has_more = await store.files.page(
        owner, purpose=query.get("purpose"), limit=limit, after=query.get("after"), order=order
    )
    data = [_file_object(record) for record in records]
    return FileList(
        data=data,
        first_id=data[0].id if data else None,
        last_id=data[-1].id if data else None,
        has_more=has_more,
    )


@route(
    ["/v1/files/{file_id:str}", "/v3/files/{file_id:str}"],
    http_method=[HttpMethod.GET, HttpMethod.DELETE],
    status_code=200,
    cache=False,
    opt={
        OPERATION: {
            "GET": Operation(summary="A file's facts", answer=FileObject, errors=(401, 404, 503)),
            "DELETE": Operation(summary="Delete a file", answer=FileDeleted, errors=(401, 404, 503)),
        }
    },
)
async def file(request: Request, file_id: str, store: Store) -> Response:
    """GET: the file's facts. DELETE: delete it."""
    owner = owner_of(api_key(request))
    if request.method == HttpMethod.DELETE:
        if not await store.files.delete(owner, file_id):
            raise _not_found(file_id)
        return json_response(FileDeleted(id=file_id))
    record = await store.files.get(owner, file_id)
    if record is None:
        raise _not_found(file_id)
    return json_response(_file_object(record))


def _binary_answer(_: dict[str, Any], document: dict[str, Any]) -> None:
    document["responses"]["200"]["content"] = {
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
    }


@get(
    ["/v1/files/{file_id:str}/content", "/v3/files/{file_id:str}/content"],
    cache=False,
    opt={
        OPERATION: Operation(
            summary="A file's content",
            errors=(401, 404, 503),
            answer_media_type="application/octet-stream",
            edit=_binary_answer,
        )
    },
)
async def file_content(request: Request, file_id: str, store: Store) -> Response:
    """The file's bytes, as uploaded (or as the batch wrote them)."""
    content = await store.files.content(owner_of(api_key(request)), file_id)
    if content is None:
        raise _not_found(file_id)
    return Response(content, status_code=200, media_type="application/octet-stream")


routes = [files, file, file_content]
