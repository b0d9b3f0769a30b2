"""Exception handlers: every error leaves the server as the OpenAI envelope.

`{"error": {"message", "type", "param", "code"}}`, including Litestar's own 404/405/413 and
validation errors, with `Retry-After` on 503s; on the Messages API's paths, Anthropic's envelope. The LMI and Elasticsearch routers answer in their own
shapes through `error_response`, which sets `Retry-After` the same way.
"""

from __future__ import annotations

import logging

from litestar import Request, Response
from litestar.exceptions import HTTPException

from appliance.dialects.anthropic.errors import answers_in_anthropic_shape, error_type
from appliance.errors import ApplianceError

__all__ = ["ClientDisconnected", "error_response", "exception_handlers"]

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


def _envelope(
    status: int, message: str, type_: str, code: str | None, param: str | None = None, *, request: Request
) -> Response:
    """OpenAI's envelope, or Anthropic's on the Messages API's paths (Litestar's own errors there,
    a 404, 405 or 413, and unexpected ones never reach that router's handlers)."""
    if answers_in_anthropic_shape(request.url.path):
        error = {"type": error_type(status), "message": message}
        return Response({"type": "error", "error": error}, status_code=status, media_type="application/json")
    return Response(
        {"error": {"message": message, "type": type_, "param": param, "code": code}},
        status_code=status,
        media_type="application/json",
    )


def error_response(exc: ApplianceError, payload: object) -> Response:
    """`payload` (the error in some dialect's shape) with `exc`'s status and its Retry-After."""
    response = Response(payload, status_code=exc.status, media_type="application/json")
    if exc.retry_after is not None:
        response.headers["Retry-After"] = str(exc.retry_after)
    return response


def _appliance_error(_: Request, exc: ApplianceError) -> Response:
    return error_response(exc, exc.to_dict())


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
    response = _envelope(status, message, type_, code, param, request=request)
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
    return _envelope(
        500, "The server had an internal error; it is logged.", "server_error", "internal_error", request=request
    )


def _disconnected(_: Request, __: ClientDisconnected) -> Response:
    # 499 (nginx's "client closed request") only shows in logs: the socket is already gone.
    return Response(b"", status_code=499)


exception_handlers = {
    ClientDisconnected: _disconnected,
    ApplianceError: _appliance_error,
    HTTPException: _http_exception,
    Exception: _unexpected,
}
