"""The outermost ASGI layer: request framing, one credential header of each name, Host, CORS,
API-key, Origin and Content-Type checks (`csrf`), per-request metrics and one log line per request
(what it holds from the client capped, `RequestRecord`). Websocket connections pass the same
checks and get one log line each, plus their caps (`socket_edge`).

It wraps the whole Litestar app (so unknown routes are covered too). Handlers add what only they
know (model, user, the engine streams) to the current `RequestRecord`. What differs between the
app's dialects (the shape of a refusal, the headers that carry a key or the request id, the body
types a route takes) the gate reads from their profiles (`profiles.Dialects`), naming none.
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec
from litestar.exceptions import LitestarException
from litestar.utils.path import normalize_path

from appliance.api.csrf import SAFE_METHODS, accepted_media_type, same_origin
from appliance.api.profiles import JSON, DialectProfile, Dialects, EdgeError
from appliance.api.route_labels import RouteLabels
from appliance.api.socket_edge import (
    SocketCounts,
    SocketLimits,
    capped_receive,
    refuse_socket,
    send_json_answer,
    subprotocol_key,
)
from appliance.entry.record import RECORDED_CHARS, RequestRecord, current_record, log_line
from appliance.errors import AnswerCutShort, ApplianceError
from appliance.metrics import Metrics

__all__ = ["RECORDED_CHARS", "Gate", "RequestRecord", "api_key", "current_record"]

log = logging.getLogger("appliance.server")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


ADMIN_PREFIX = "/admin/"
METHOD_LABELS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "WEBSOCKET"})
"""Methods that label metrics as themselves; any other is `other` (h11 accepts any token as a
method: 2,000 invented 8 KB methods grew /metrics from 5 KB to 32 MB)."""

# status, message, type, code, extra headers: the arguments of `_error` after `send`.
_Refusal = tuple[int, str, str, str, list[tuple[bytes, bytes]]]
_BEARER = [(b"www-authenticate", b'Bearer realm="appliance"')]
_ADMIN_KEY_NEEDED: _Refusal = (
    401,
    "Admin routes need an admin key (admin_key_file), sent as 'Authorization: Bearer <key>'; an API key is not one.",
    "authentication_error",
    "invalid_admin_key",
    _BEARER,
)
_LOOPBACK_ONLY: _Refusal = (
    403,
    "Admin routes answer clients on this machine only; set admin_key_file to call them from elsewhere.",
    "permission_error",
    "admin_loopback_only",
    [],
)

_FOREIGN_ORIGIN = (
    "Requests from web pages of other origins are refused; list the origin in cors_allowed_origins to allow it."
)

API_KEY_STATE = "api_key"
"""The request state entry holding the API key the client presented (see `api_key`)."""


class Gate:
    """ASGI middleware: authentication, metrics and access logging around `app`."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: Metrics | None = None,
        api_keys: Sequence[str] = (),
        admin_keys: Sequence[str] = (),
        open_paths: Sequence[str] = ("/health", "/health/live"),
        allowed_hosts: Sequence[str] = (),
        cors_origins: Sequence[str] = (),
        route_labels: Callable[[Scope], str] | None = None,
        socket_limits: SocketLimits | None = None,
    ) -> None:
        """`route_labels`: the metric label of a request's route (default: `RouteLabels()`). The
        dialects are those of `app`'s routes (`Dialects.of`). `socket_limits`: the caps on
        websocket connections (default: `SocketLimits()`)."""
        self.app = app
        self._dialects = Dialects.of(app)
        self._api_key_needed = _api_key_needed(self._dialects.credential_headers)
        # What a browser client may send: the keys' headers and those the dialects' clients add.
        self._cors_headers = ", ".join(
            ["authorization", "content-type", *self._dialects.credential_headers, *self._dialects.client_headers]
        ).encode("latin-1")
        self.metrics = metrics
        self._route_label = route_labels or RouteLabels()
        self._keys = [key.encode() for key in api_keys]
        self._admin_keys = [key.encode() for key in admin_keys]
        self._open_paths = frozenset(open_paths)
        self._hosts = [host.lower() for host in allowed_hosts]
        self._origins = frozenset(origin.rstrip("/") for origin in cors_origins)
        self.sockets = SocketCounts(socket_limits or SocketLimits())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        record = RequestRecord(request_id=uuid.uuid4().hex[:16])
        token = current_record.set(record)
        status = 0

        async def send_wrapper(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", record.request_id.encode())]
                for name in profile.request_id_headers:
                    message["headers"].append((name.encode("latin-1"), record.request_id.encode()))
            await send(message)

        profile = self._dialects.profile(scope["path"])
        headers = dict(scope["headers"])
        key = _presented_key(scope, self._dialects.credential_headers)
        state = scope.setdefault("state", {})
        state[API_KEY_STATE] = key.decode("latin-1") if key else None
        origin = headers.get(b"origin", b"").decode("latin-1")
        cors = origin if origin in self._origins else None
        if cors:
            send_wrapper = _with_cors(send_wrapper, cors)
        refuse = functools.partial(_error, send_wrapper, profile=profile, state=state)
        try:
            if b"content-length" in headers and b"transfer-encoding" in headers:
                # h11 reads such a body as chunked and keeps the connection open, while a proxy in
                # front may have used Content-Length: the leftover bytes would be a request the
                # proxy never saw (smuggling). RFC 9112 6.3 allows refusing; the connection closes.
                await refuse(
                    400,
                    "A request may not carry both Content-Length and Transfer-Encoding.",
                    "invalid_request_error",
                    "ambiguous_length",
                    [(b"connection", b"close")],
                )
            elif repeated := _repeated_credential(scope, self._dialects.credential_headers):
                # Which of two keys would count is up to each reader (this gate read the last, a
                # proxy in front may check the first): refused, not guessed.
                await refuse(
                    400,
                    f"The request carries more than one '{repeated}' header; send the key once.",
                    "invalid_request_error",
                    "duplicate_header",
                    param=repeated,
                )
            elif self._hosts and not self._host_allowed(headers.get(b"host", b"").decode("latin-1")):
                await refuse(
                    400,
                    "The Host header is not one this server answers to.",
                    "invalid_request_error",
                    "invalid_host",
                )
            elif scope["method"] == "OPTIONS" and b"access-control-request-method" in headers:
                await _preflight(send_wrapper, allow_headers=self._cors_headers if cors else None)
            elif refusal := self._access_refusal(scope, key):
                await refuse(*refusal)
            elif scope["method"] not in SAFE_METHODS and (refusal := self._forgery_refusal(scope, headers)):
                await refuse(*refusal)
            else:
                await self.app(scope, receive, send_wrapper)
        except Exception as exc:
            if not status or (failure := _appliance_failure(exc)) is None:
                raise
            log.error(
                "%s %s (request %s): the answer was cut short: %s",
                scope["method"],
                scope["path"],
                record.request_id,
                failure,
            )
            raise AnswerCutShort(str(failure)) from None
        finally:
            current_record.reset(token)
            self._finish(scope, record, status, time.monotonic() - started)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A websocket connection: refused before its handshake is accepted, or handed to the app
        with its message size capped and its connection counted; one log line when it ends."""
        started = time.monotonic()
        record = RequestRecord(request_id=uuid.uuid4().hex[:16])
        token = current_record.set(record)
        outcome: dict[str, int] = {"status": 0, "received": 0, "sent": 0}
        profile = self._dialects.profile(scope["path"])
        headers = dict(scope["headers"])
        key = _presented_key(scope, self._dialects.credential_headers) or subprotocol_key(
            scope, self._dialects.credential_subprotocols
        )
        state = scope.setdefault("state", {})
        state[API_KEY_STATE] = key.decode("latin-1") if key else None
        refusal = self._socket_refusal(scope, headers, key)
        owner = key or str((scope.get("client") or ("", 0))[0]).encode()
        if refusal is None and (full := self.sockets.claim(owner)):
            refusal = (503, full, "server_error", "too_many_connections", [(b"retry-after", b"1")])
        try:
            if refusal is not None:
                status, message, type_, code, extra = refusal
                error = EdgeError(status, message, type_, code, refusal_param(code))
                body = msgspec.json.encode(profile.render_error(error, state))
                outcome["status"] = await refuse_socket(send, scope, status, body, extra)
                return

            async def counted_send(message: dict[str, Any]) -> None:
                if message["type"] == "websocket.accept":
                    outcome["status"] = 101
                elif message["type"] == "websocket.send":
                    outcome["sent"] += 1
                elif message["type"] == "websocket.close" and not outcome["status"]:
                    outcome["status"] = int(message.get("code", 1000))
                await send(message)

            def counted() -> None:
                outcome["received"] += 1

            capped = capped_receive(receive, counted_send, self.sockets.limits.max_message_bytes, counted)
            try:
                await self.app(scope, capped, counted_send)
            finally:
                self.sockets.release(owner)
        finally:
            current_record.reset(token)
            self._finish_socket(scope, record, outcome, time.monotonic() - started)

    def _socket_refusal(self, scope: Scope, headers: dict[bytes, bytes], key: bytes | None) -> _Refusal | None:
        """Why a websocket may not connect: what an HTTP request would be refused for (a repeated
        credential header, Host, the keys, a foreign Origin), or None."""
        if repeated := _repeated_credential(scope, self._dialects.credential_headers):
            return (
                400,
                f"The request carries more than one '{repeated}' header.",
                "invalid_request_error",
                "duplicate_header",
                [],
            )
        if self._hosts and not self._host_allowed(headers.get(b"host", b"").decode("latin-1")):
            return (
                400,
                "The Host header is not one this server answers to.",
                "invalid_request_error",
                "invalid_host",
                [],
            )
        if refusal := self._access_refusal(scope, key):
            return refusal
        # A page of any site may open a websocket to this server (no CORS applies to websockets):
        # like a POST, its Origin must be ours or listed.
        if self._foreign_origin(headers):
            return (403, _FOREIGN_ORIGIN, "invalid_request_error", "origin_not_allowed", [])
        return None

    def _foreign_origin(self, headers: dict[bytes, bytes]) -> bool:
        """Whether the request comes from a page of an origin neither ours nor listed."""
        origin = headers.get(b"origin", b"").decode("latin-1")
        if not origin or origin.rstrip("/") in self._origins:
            return False
        return not same_origin(origin, headers.get(b"host", b"").decode("latin-1"))

    def _finish_socket(self, scope: Scope, record: RequestRecord, outcome: dict[str, int], seconds: float) -> None:
        status = outcome["status"] or 499
        if self.metrics:
            self.metrics.http_requests.labels(self._route_label(scope), "WEBSOCKET", str(status)).inc()
        log_line(
            record,
            "WEBSOCKET",
            scope["path"],
            status,
            seconds,
            event="websocket",
            messages_in=outcome["received"],
            messages_out=outcome["sent"],
        )

    def _access_refusal(self, scope: Scope, key: bytes | None) -> _Refusal | None:
        """Why the client may not call this route (API key, admin key, loopback), or None.

        /admin/* changes what is served: with admin keys it needs one (an API key is not enough,
        whatever the client's address); without, only a loopback client may call it (with an API
        key too when keys are set), so a LAN client holding an API key cannot reload the models."""
        # Decided on the path the router matches: Litestar drops repeated and trailing slashes
        # before it routes (`//admin/reload` reaches the reload handler), and uvicorn has already
        # decoded %2F. Other spellings (`/./admin`, `/ADMIN`) match no route: 404 after the gate.
        path = normalize_path(scope["path"])
        if path.startswith(ADMIN_PREFIX):
            if self._admin_keys:
                return None if _authorized(key, self._admin_keys) else _ADMIN_KEY_NEEDED
            if not _loopback_client(scope):
                return _LOOPBACK_ONLY
        if self._keys and path not in self._open_paths and not _authorized(key, self._keys):
            return self._api_key_needed
        return None

    def _forgery_refusal(self, scope: Scope, headers: dict[bytes, bytes]) -> tuple[int, str, str, str] | None:
        """Why a state-changing request may come from a page in a browser (see `csrf`), or None."""
        if self._foreign_origin(headers):
            return (403, _FOREIGN_ORIGIN, "invalid_request_error", "origin_not_allowed")
        content_type = headers.get(b"content-type")
        accepted = self._dialects.media_types(scope["path"], scope["method"])
        if content_type is not None and not accepted_media_type(content_type.decode("latin-1"), accepted):
            return (415, _unsupported_media_type(accepted), "invalid_request_error", "unsupported_media_type")
        return None

    def _host_allowed(self, host: str) -> bool:
        host = host.lower()
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        for allowed in self._hosts:
            if allowed in (host, name):
                return True
            if allowed.startswith("*.") and name.endswith(allowed[1:]):
                return True
        return False

    def _finish(self, scope: Scope, record: RequestRecord, status: int, seconds: float) -> None:
        path = scope["path"]
        method = scope["method"] if scope["method"] in METHOD_LABELS else "other"
        if self.metrics:
            self.metrics.http_requests.labels(self._route_label(scope), method, str(status or 499)).inc()
        if path in ("/health", "/health/live", "/metrics"):
            return  # probes every few seconds would drown the log
        log_line(record, scope["method"], path, status, seconds)


def refusal_param(code: str) -> str | None:
    """The header a websocket refusal is about (its `param`), by its code."""
    return {"duplicate_header": "authorization", "invalid_host": "host", "origin_not_allowed": "origin"}.get(code)


def _authorized(credential: bytes | None, keys: list[bytes]) -> bool:
    if not credential:
        return False
    # Compared exactly, in constant time against every configured key.
    matched = False
    for key in keys:
        matched |= hmac.compare_digest(credential, key)
    return matched


def _presented_key(scope: Scope, credential_headers: Sequence[str]) -> bytes | None:
    """The key the client sent: `Authorization: Bearer <key>` (the scheme is case-insensitive, RFC
    7235), else the first of `credential_headers` (e.g. Anthropic's `x-api-key`) it sent; None
    without one."""
    headers = dict(scope["headers"])
    scheme, _, credential = headers.get(b"authorization", b"").partition(b" ")
    if scheme.lower() == b"bearer" and credential.strip():
        return credential.strip()
    for name in credential_headers:
        if value := headers.get(name.encode("latin-1"), b"").strip():
            return value
    return None


def _api_key_needed(credential_headers: Sequence[str]) -> _Refusal:
    others = "".join(f" (or '{name}: <key>')" for name in credential_headers)
    return (
        401,
        f"Missing or invalid API key. Send it as 'Authorization: Bearer <key>'{others}.",
        "authentication_error",
        "invalid_api_key",
        _BEARER,
    )


def _unsupported_media_type(accepted: Sequence[str]) -> str:
    if tuple(accepted) == (JSON,):
        return "The request body must be JSON: send it with 'Content-Type: application/json'."
    return f"This route takes a body of type {' or '.join(accepted)}: send it with its Content-Type."


def _repeated_credential(scope: Scope, credential_headers: Sequence[str]) -> str | None:
    """The name of a credential header (`Authorization` or one of `credential_headers`) the request
    carries more than once, or None. (h11 refuses a repeated Host itself.)"""
    names = {b"authorization", *(name.lower().encode("latin-1") for name in credential_headers)}
    seen: set[bytes] = set()
    for name, _ in scope["headers"]:
        if name in names:
            if name in seen:
                return name.decode()
            seen.add(name)
    return None


def api_key(request: Any) -> str | None:
    """The API key the client presented, as the gate read it (None without one, or without the
    gate): a handler that keeps things per key (stored responses) asks this, never the headers."""
    return request.scope.get("state", {}).get(API_KEY_STATE)


def _loopback_client(scope: Scope) -> bool:
    client = scope.get("client")
    try:
        address = ipaddress.ip_address(client[0]) if client else None
    except ValueError:
        return False  # not an IP address (a test client, a Unix socket)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address is not None and address.is_loopback


async def _error(
    send: Send,
    status: int,
    message: str,
    type_: str,
    code: str,
    headers: list[tuple[bytes, bytes]] | None = None,
    *,
    profile: DialectProfile,
    state: dict[str, Any],
    param: str | None = None,
) -> None:
    """The refusal in the shape of `profile`, the dialect of the request's path."""
    body = msgspec.json.encode(profile.render_error(EdgeError(status, message, type_, code, param), state))
    await send_json_answer(send, status, body, headers or [])


async def _preflight(send: Send, *, allow_headers: bytes | None) -> None:
    # An unknown origin (`allow_headers` None) gets a plain 204 without Access-Control-Allow-*
    # headers: the browser refuses.
    headers = [(b"content-length", b"0")]
    if allow_headers is not None:
        headers += [
            (b"access-control-allow-methods", b"GET, POST, OPTIONS"),
            (b"access-control-allow-headers", allow_headers),
            (b"access-control-max-age", b"600"),
        ]
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


def _with_cors(send: Send, origin: str) -> Send:
    async def wrapped(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [
                *message.get("headers", []),
                (b"access-control-allow-origin", origin.encode("latin-1")),
                (b"vary", b"Origin"),
            ]
        await send(message)

    return wrapped


def _appliance_failure(exc: BaseException) -> ApplianceError | None:
    """The appliance's own error (an engine killed mid-answer: `EngineFailure`) behind a failure
    after the response started, or None for anything else (a defect keeps its traceback).
    Litestar reports such a failure as `LitestarException(...)` raised from it, and its streaming
    response wraps the iterator's error in an exception group (anyio's task group)."""
    if isinstance(exc, LitestarException) and exc.__cause__ is not None:
        exc = exc.__cause__
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, ApplianceError) else None
