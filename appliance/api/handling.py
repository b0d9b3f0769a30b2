"""What every dialect's handlers share over HTTP: watching for the client leaving, and JSON answers.
Naming the request in the access log and opening its call are the entry's (`entry.Entry`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from typing import TypeVar

from litestar import Request, Response

from appliance.api.errors import ClientDisconnected
from appliance.errors import InvalidRequest

__all__ = ["json_response", "unless_disconnected"]

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


def json_response(payload: object, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """`payload` as JSON with `status` (and `headers`)."""
    return Response(payload, status_code=status, media_type="application/json", headers=headers)


def listing_limit(query: Mapping[str, str], known: tuple[str, ...], default: int, maximum: int) -> int:
    """The `limit` of a listing's query string (`default` when absent); a 400 naming a parameter not
    in `known`, or a limit that is not an integer from 1 to `maximum`."""
    for name in query:
        if name not in known:
            raise InvalidRequest(f"Unrecognized query parameter: {name}.", param=name, code="unknown_parameter")
    limit = query.get("limit", str(default))
    if not limit.isdigit() or not 1 <= int(limit) <= maximum:
        raise InvalidRequest(f"limit must be an integer from 1 to {maximum}.", param="limit")
    return int(limit)
