"""The appliance's error hierarchy.

Every error that can reach a client is an `ApplianceError` carrying the HTTP status and the OpenAI
error fields (`type`, `code`, `param`). Errors are raised, never returned; the API layer turns them
into the OpenAI envelope `{"error": {"message", "type", "param", "code"}}`.

    ApplianceError (500, server_error)
    ├── InvalidRequest (400, invalid_request_error)
    │   └── ContextLengthExceeded (400, code context_length_exceeded)
    ├── AuthenticationFailed (401, authentication_error)
    ├── NotFound (404, not_found_error)
    ├── MethodNotAllowed (405)
    ├── PayloadTooLarge (413)
    ├── Overloaded (503, with Retry-After)
    ├── ModelNotReady (503, the model is loading or restarting)
    ├── RequestTimedOut (504, the model's per-request time limit ran out)
    └── EngineFailure (500, the engine failed while serving the request)

`ConfigError` is separate: it stops start-up and never reaches a client.
"""

from __future__ import annotations

import re

__all__ = [
    "ApplianceError",
    "AuthenticationFailed",
    "ConfigError",
    "ContextLengthExceeded",
    "EngineFailure",
    "InvalidRequest",
    "MethodNotAllowed",
    "ModelNotReady",
    "NotFound",
    "Overloaded",
    "PayloadTooLarge",
    "RequestTimedOut",
    "client_text",
    "unsupported",
    "validation_path",
]


class ApplianceError(Exception):
    """An error with an HTTP status and OpenAI error fields."""

    status = 500
    type = "server_error"
    code: str | None = None

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        self.retry_after = retry_after

    def to_dict(self) -> dict[str, object]:
        """The OpenAI error envelope."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


class InvalidRequest(ApplianceError):
    status = 400
    type = "invalid_request_error"
    code = "invalid_value"


def unsupported(message: str, param: str) -> InvalidRequest:
    """A 400 for a field this server cannot honour (code `unsupported_parameter`), naming it."""
    return InvalidRequest(message, param=param, code="unsupported_parameter")


class ContextLengthExceeded(InvalidRequest):
    code = "context_length_exceeded"


class AuthenticationFailed(ApplianceError):
    status = 401
    type = "authentication_error"
    code = "invalid_api_key"


class NotFound(ApplianceError):
    status = 404
    type = "not_found_error"
    code = "not_found"


class MethodNotAllowed(ApplianceError):
    status = 405
    type = "invalid_request_error"
    code = "method_not_allowed"


class PayloadTooLarge(ApplianceError):
    status = 413
    type = "invalid_request_error"
    code = "payload_too_large"


class Overloaded(ApplianceError):
    status = 503
    type = "server_error"
    code = "overloaded"


class ModelNotReady(ApplianceError):
    status = 503
    type = "server_error"
    code = "model_not_ready"


class RequestTimedOut(ApplianceError):
    status = 504
    type = "timeout_error"
    code = "request_timeout"


class EngineFailure(ApplianceError):
    status = 500
    type = "server_error"
    code = "engine_failure"


class AnswerCutShort(Exception):
    """An answer already begun (status and some of its body sent) failed; its reason is logged.

    Raised by the gate in place of the failure so the server closes the connection without the
    body's end (the client sees an incomplete answer, never a short file that looks whole) and
    logs no traceback for it (`connections`)."""


class ConfigError(Exception):
    """A graph file or setting is invalid; the message names the file and the field."""


_AT_PATH = re.compile(r" - at `\$\.?(.*)`$")


_OBJECT_REPR = re.compile(r"<[^<>]*? at 0x[0-9a-fA-F]+>")


def client_text(text: str) -> str:
    """A library's error text fit for a client: Python object reprs, which show heap addresses
    (`<_io.BytesIO object at 0x7f...>`), become `<object>`."""
    return _OBJECT_REPR.sub("<object>", text)


def validation_path(message: str) -> tuple[str, str]:
    """msgspec's validation message split into (reason, field path): "Expected `int`, got `str` -
    at `$.limits.max_tokens`" gives ("Expected `int`, got `str`", "limits.max_tokens"); the path is
    "" at the top level. Request bodies, graph files and settings all name fields this way."""
    match = _AT_PATH.search(message)
    if match is None:
        return message, ""
    return message[: match.start()], match.group(1)
