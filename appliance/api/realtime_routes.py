"""`wss://<host>/v1/realtime?model=<model>` (also under /v3): OpenAI's Realtime API (GA) on a
websocket, as `client.realtime.connect(model=...)` of the openai SDK 3.x opens it.

The gate has checked the connection as it checks an HTTP request (`socket_edge`: key, Host,
Origin, caps) before this handler runs. Here: the session is opened by the entry
(`Entry.realtime_session`: the model looked up by `Entry.engine`, as every route's, and admitted on
each engine the session calls), and a connection it refuses (no model, an unknown one, one that
cannot hear, one not ready or with its queue full) is answered before the handshake is accepted
(HTTP 400/404/503 in OpenAI's error shape, Retry-After on a 503); then the session
(`dialects/realtime/session.py`) is fed the client's events, decoded strictly (`api/decoding`: a
bad one is an `error` event naming its type, `event_id` and field, the session kept), and its
server events are written in order by a task of their own. The session ends when the client
leaves, after `idle_seconds` without a client event, or when the client stops reading its events;
its engine work is then cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib

import msgspec
from litestar import WebSocket, websocket
from litestar.exceptions import WebSocketDisconnect

from appliance.api.profiles import DialectProfile
from appliance.api.socket_edge import POLICY_VIOLATION, refuse_socket
from appliance.dialects.realtime.session import RealtimeLimits, RealtimeSession
from appliance.entry import Entry
from appliance.entry.decoding import decode_body
from appliance.errors import ApplianceError, InvalidRequest
from appliance.protocol import realtime as rt

__all__ = ["PROFILE", "routers"]

PROFILE = DialectProfile(name="openai-realtime", credential_subprotocols=("openai-insecure-api-key.",))
"""OpenAI's error shape; the browser SDKs' key subprotocol."""
SUBPROTOCOL = "realtime"
"""Chosen when offered: a browser fails a handshake whose offered protocols the server ignores."""


class _Header(msgspec.Struct):
    """What names a client event in an `error`, read from an event that failed to decode."""

    type: str | None = None
    event_id: str | None = None


_header = msgspec.json.Decoder(_Header)


@websocket(["/v1/realtime", "/v3/realtime"])
async def realtime(socket: WebSocket, entry: Entry, realtime_limits: RealtimeLimits) -> None:
    limits = realtime_limits
    query = socket.query_params
    try:
        session = entry.realtime_session(query.get("model"), query.get("intent"), limits)
    except ApplianceError as error:
        body = msgspec.json.encode(error.to_dict())
        retry = [] if error.retry_after is None else [(b"retry-after", str(error.retry_after).encode())]
        await refuse_socket(socket.send, socket.scope, error.status, body, retry)
        return
    offered = socket.scope.get("subprotocols") or []
    await socket.accept(subprotocols=SUBPROTOCOL if SUBPROTOCOL in offered else None)
    session.start()
    writer = asyncio.create_task(_write(socket, session))
    try:
        await _read(socket, session, limits.idle_seconds, writer)
    finally:
        await session.close()
        if not writer.done():
            session.events.put_nowait(None)
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(writer, 1.0)
        writer.cancel()


async def _read(socket: WebSocket, session: RealtimeSession, idle_seconds: float, writer: asyncio.Task) -> None:
    """Serve the client's events until it leaves, goes quiet or the writer stops."""
    while not writer.done():
        receiving = asyncio.ensure_future(socket.receive())
        done, _ = await asyncio.wait({receiving, writer}, timeout=idle_seconds, return_when=asyncio.FIRST_COMPLETED)
        if receiving not in done:
            receiving.cancel()
            if not done:
                session.closing = f"no client event for {idle_seconds:g} s (idle timeout)"
            return
        message = receiving.result()
        if message["type"] != "websocket.receive":
            return
        raw = message.get("text") or message.get("bytes") or b""
        await _serve(session, raw.encode() if isinstance(raw, str) else raw)


async def _serve(session: RealtimeSession, raw: bytes) -> None:
    try:
        event = decode_body(raw, rt.ClientEvent)
    except InvalidRequest as error:
        try:
            header = _header.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            header = _Header()
        # decode_body speaks of HTTP bodies; here each message is one event.
        message = error.message.replace("The request body", "The event").replace("request body", "event")
        session.refuse(InvalidRequest(message, param=error.param, code=error.code), header.type, header.event_id)
        return
    try:
        await session.handle(event)
    except ApplianceError as error:
        session.refuse(error, type(event).__struct_config__.tag, event.event_id)


async def _write(socket: WebSocket, session: RealtimeSession) -> None:
    """Write the session's events in order; close the socket when it says so."""
    try:
        while (event := await session.events.get()) is not None:
            await socket.send_text(rt.encode_event(event))
    except (WebSocketDisconnect, OSError, RuntimeError):
        return  # the client is gone: the reader sees it too
    reason = (session.closing or "")[:120]
    code = 1000 if "idle" in reason else POLICY_VIOLATION
    with contextlib.suppress(Exception):
        await socket.close(code=code, reason=reason)


routers = [PROFILE.router("/", [realtime])]
