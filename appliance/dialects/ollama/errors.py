"""Errors in Ollama's shape: `{"error": "..."}`, with the appliance's status (400, 401, 404, 413,
503 with Retry-After, ...). The message is led by the field it is about (`options.temperature:
...`), since the body has no `param`; the `ollama` libraries raise `ResponseError` with the message
and the status."""

from __future__ import annotations

from appliance.dialects.shared import error_message
from appliance.errors import ApplianceError
from appliance.protocol.ollama import OllamaError

__all__ = ["error_body"]


def error_body(exc: ApplianceError) -> OllamaError:
    """`exc` as Ollama's error body (also the last line of a stream that failed)."""
    return OllamaError(error=error_message(exc.message, exc.param))
