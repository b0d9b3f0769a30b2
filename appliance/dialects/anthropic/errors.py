"""Errors in Anthropic's shape: `{"type": "error", "error": {"type", "message"}}`.

The status stays the appliance's (a full queue is 503 here, where Anthropic answers 529); the
error's `type` is the one Anthropic gives that status, so the `anthropic` SDK raises its matching
exception (`BadRequestError`, `AuthenticationError`, `NotFoundError`, `RateLimitError`, ...). The
message names the field a 400 is about, as Anthropic's messages do (`max_tokens: Field required`).
"""

from __future__ import annotations

from appliance.dialects.shared import error_message
from appliance.errors import ApplianceError
from appliance.protocol.anthropic import AnthropicError, AnthropicErrorBody

__all__ = ["error_body", "error_object", "error_type"]

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
}


def error_type(status: int) -> str:
    """Anthropic's error type for an HTTP status."""
    return _TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")


def error_object(exc: ApplianceError) -> AnthropicError:
    return AnthropicError(type=error_type(exc.status), message=error_message(exc.message, exc.param))


def error_body(exc: ApplianceError, request_id: str | None = None) -> AnthropicErrorBody:
    """`exc` as the body of an error response."""
    return AnthropicErrorBody(error=error_object(exc), request_id=request_id)
