"""`wss://<host>/v1/realtime?model=<model>` (also under /v3): OpenAI's Realtime API (GA) on a
websocket, as `client.realtime.connect(model=...)` of the openai SDK 3.x opens it.

The gate has checked the connection as it checks an HTTP request (`socket_edge`: key, Host,
Origin, caps) before this handler runs. Here: the model is resolved, and a connection for no
model, an unknown one or one that cannot hear is refused before the handshake is accepted (HTTP
400/404 in OpenAI's error shape); then the session (`dialects/realtime/session.py`) is fed the
client's events, decoded strictly (`api/decoding`: a bad one is an `error` event naming its type,
`event_id` and field, the session kept), and its server events are written in order by a task of
their own. The session ends when the client leaves, after `idle_seconds` without a client event,
or when the client stops reading its events; its engine work is then cancelled.

Which session a model opens: a speech-to-text graph a `transcription` session it hears itself; a
chat graph a `realtime` (conversation) session, heard by its graph's `speech_model`
(`?intent=transcription` makes it a transcription session). The conversation side plugs in
through `conversation_factory` (`dialects/realtime/session.Conversation`); without one a realtime
session transcribes its turns and answers `response.*` with an `error`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import msgspec
from litestar import WebSocket, websocket
from litestar.exceptions import WebSocketDisconnect

from appliance.api.profiles import DialectProfile
from appliance.api.socket_edge import POLICY_VIOLATION, refuse_socket
from appliance.dialects.realtime.session import Conversation, RealtimeLimits, RealtimeSession
from appliance.dialects.realtime.talk import TalkSession
from appliance.engine.host.client import EngineClient
from appliance.entry.calls import named
from appliance.entry.decoding import decode_body
from appliance.errors import ApplianceError, InvalidRequest
from appliance.media import ImageLoader
from appliance.protocol import realtime as rt
from appliance.runtime.registry import ModelRegistry

__all__ = ["PROFILE", "conversation_factory", "routers"]

PROFILE = DialectProfile(name="openai-realtime", credential_subprotocols=("openai-insecure-api-key.",))
"""OpenAI's error shape; the browser SDKs' key subprotocol."""
SUBPROTOCOL = "realtime"
"""Chosen when offered: a browser fails a handshake whose offered protocols the server ignores."""

ConversationFactory = Callable[[RealtimeSession], Conversation]


def conversation_factory(engine: EngineClient, media: ImageLoader) -> ConversationFactory:
    """What answers in a `realtime` session on the chat model `engine`: its conversation
    (`dialects/realtime/talk.py`), spoken by the graph's `voice_model`."""
    return lambda session: TalkSession(session, engine, media)


class _Header(msgspec.Struct):
    """What names a client event in an `error`, read from an event that failed to decode."""

    type: str | None = None
    event_id: str | None = None


_header = msgspec.json.Decoder(_Header)


def _session(socket: WebSocket, models: ModelRegistry, limits: RealtimeLimits, media: ImageLoader) -> RealtimeSession:
    """The session the connection asks for; ApplianceError before the handshake is accepted."""
    name = socket.query_params.get("model")
    if not name:
        raise InvalidRequest("Name the model in the URL: /v1/realtime?model=<model>.", param="model")
    engine = models.get(name)
    task = engine.graph.task
    if task == "transcribe":
        return RealtimeSession(kind="transcription", model=name, hearing=engine, limits=limits)
    if task != "generate":
        raise InvalidRequest(
            f"Model '{name}' is neither a speech-to-text nor a chat model: the Realtime API cannot use it.",
            param="model",
            code="model_not_supported",
        )
    hearing = models.get(engine.graph.speech_model) if engine.graph.speech_model else None
    if socket.query_params.get("intent") == "transcription":
        if hearing is None:
            raise InvalidRequest(f"Model '{name}' names no speech_model to transcribe with.", param="model")
        return RealtimeSession(kind="transcription", model=name, hearing=hearing, limits=limits)
    return RealtimeSession(
        kind="realtime", model=name, hearing=hearing, limits=limits, conversation=conversation_factory(engine, media)
    )


@websocket(["/v1/realtime", "/v3/realtime"])
async def realtime(
    socket: WebSocket, models: ModelRegistry, realtime_limits: RealtimeLimits, media: ImageLoader
) -> None:
    limits = realtime_limits
    try:
        session = _session(socket, models, limits, media)
    except ApplianceError as error:
        body = msgspec.json.encode(error.to_dict())
        await refuse_socket(socket.send, socket.scope, error.status, body, [])
        return
    named(session.model, None)
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
