"""Exception handlers: every error leaves the server in the shape of the dialect of its path.

The route's `DialectProfile` (`profiles`) renders the body: the appliance's envelope
`{"error": {"message", "type", "param", "code"}}` (OpenAI's) unless the route's dialect declares
another. This covers the appliance's own errors, Litestar's 404/405/413 and validation errors and
unexpected ones; `Retry-After` is set on 503s from the error.
"""

from __future__ import annotations

import logging

from litestar import Request, Response
from litestar.exceptions import HTTPException

from appliance.api.profiles import Dialects, EdgeError
from appliance.errors import ApplianceError

__all__ = ["ClientDisconnected", "exception_handlers"]

log = logging.getLogger("appliance.api")

_FRAMEWORK = {
    400: ("invalid_request_error", "bad_request"),
    404: ("not_found_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    413: ("invalid_request_error", "payload_too_large"),
}

# Litestar's InternalServerException when the connection closes while a handler reads the body
# (the client left, or its body stopped arriving: see appliance/connections.py).
_LEFT_DURING_BODY = "client disconnected prematurely"


class ClientDisconnected(Exception):
    """The client left before the answer was ready; there is no one to answer."""


def _answer(request: Request, exc: ApplianceError) -> Response:
    """`exc` in the shape of the dialect of the request's path, with its status and Retry-After."""
    profile = Dialects.of(request.app).profile(request.scope["path"])
    payload = profile.render_error(exc, request.scope.get("state", {}))
    response = Response(payload, status_code=exc.status, media_type="application/json")
    if exc.retry_after is not None:
        response.headers["Retry-After"] = str(exc.retry_after)
    return response


def _http_exception(request: Request, exc: HTTPException) -> Response:
    status = exc.status_code
    if status == 500 and exc.detail == _LEFT_DURING_BODY:
        return _disconnected(request, ClientDisconnected())
    type_, code = _FRAMEWORK.get(status, ("invalid_request_error" if status < 500 else "server_error", None))
    param = None
    if status == 400 and (invalid := _invalid_parameter(exc)):  # a query or path parameter
        param, reason = invalid
        message = f"Invalid value for '{param}': {reason}."
        code = "invalid_value"
    elif status == 404:
        message = f"No route {request.method} {request.url.path}. See docs/api.md for the routes."
    elif status == 405:
        message = f"Method {request.method} is not allowed on {request.url.path}."
    elif status == 413:
        message = "The request body is larger than this server accepts (see --max-body-size)."
    else:
        message = exc.detail
    response = _answer(request, EdgeError(status, message, type_, code, param))
    # Litestar puts `Allow` on its 405s (RFC 9110 requires it): keep the framework's headers.
    for name, value in (exc.headers or {}).items():
        response.headers[name] = value
    return response


def _invalid_parameter(exc: HTTPException) -> tuple[str, str] | None:
    """The parameter Litestar's validation refused and why (its `extra` holds `key` and
    `message`), or None."""
    extra = exc.extra if isinstance(exc.extra, list) else []
    first = extra[0] if extra and isinstance(extra[0], dict) else {}
    key, reason = first.get("key"), first.get("message")
    return (key, reason) if isinstance(key, str) and isinstance(reason, str) else None


def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return _answer(
        request, EdgeError(500, "The server had an internal error; it is logged.", "server_error", "internal_error")
    )


def _disconnected(_: Request, __: ClientDisconnected) -> Response:
    # 499 (nginx's "client closed request") only shows in logs: the socket is already gone.
    return Response(b"", status_code=499)


exception_handlers = {
    ClientDisconnected: _disconnected,
    ApplianceError: _answer,
    HTTPException: _http_exception,
    Exception: _unexpected,
}
