"""What every dialect's handlers share: watching for the client leaving, naming the request in the
access log, opening a chat call, and JSON answers. The OpenAI, LMI and Elasticsearch routes all use
these.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from litestar import Request, Response

from appliance.api.errors import ClientDisconnected
from appliance.api.gate import RequestRecord, current_record
from appliance.engine import EngineClient
from appliance.media import ImageLoader
from appliance.protocol.openai import ChatCompletionRequest
from appliance.service.chat import ChatCall, FieldNames, open_chat

__all__ = ["json_response", "open_recorded_chat", "record_request", "unless_disconnected"]

T = TypeVar("T")


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """`work`'s result, or ClientDisconnected (and `work` cancelled) if the client leaves first."""
    # Litestar cancels a streaming body when the client leaves, but not a plain handler: watch the
    # ASGI channel for http.disconnect ourselves and cancel the generation (freeing its KV blocks).
    # The watcher cancels the work when it ends (asyncio.wait on both cost a tenth of the server's
    # CPU per embeddings request, measured with py-spy).
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnect(request))
    watcher.add_done_callback(lambda _: task.cancel())  # a no-op once the work is done
    try:
        return await task
    except asyncio.CancelledError:
        if task.cancelled() and watcher.done() and not watcher.cancelled():
            raise ClientDisconnected from None
        raise
    finally:
        watcher.cancel()


async def _disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def record_request(model: str, user: str | None) -> RequestRecord | None:
    """The access-log record of this request, naming its model and user (None when served without
    the gate, e.g. in tests); the handler adds the engine streams once submitted."""
    record = current_record.get()
    if record is not None:
        record.model, record.user = model, user
    return record


def json_response(payload: object, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """`payload` as JSON with `status` (and `headers`)."""
    return Response(payload, status_code=status, media_type="application/json", headers=headers)


async def open_recorded_chat(
    request: Request,
    engine: EngineClient,
    body: ChatCompletionRequest,
    media: ImageLoader,
    names: FieldNames | None = None,
) -> ChatCall:
    """`body` planned and submitted to `engine` (cancelled if the client leaves first), its stream
    added to the access-log record the route named with `record_request`; `names`: a dialect's
    field names (`service.chat.open_chat`)."""
    call = await unless_disconnected(request, open_chat(engine, body, media, names))
    record = current_record.get()
    if record is not None:
        record.streams = [call.stream]
    return call
