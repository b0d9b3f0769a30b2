"""Elasticsearch's error body, as its inference API's clients read it (the request is an OpenAI
chat request, `appliance.protocol.openai.ChatCompletionRequest`)."""

from __future__ import annotations

from msgspec import Struct

__all__ = ["ElasticError", "ErrorCause", "ErrorDetail"]


class ErrorCause(Struct, kw_only=True):
    type: str
    reason: str


class ErrorDetail(ErrorCause, kw_only=True):
    root_cause: list[ErrorCause]


class ElasticError(Struct, kw_only=True):
    """`{"error": {"root_cause": [{"type", "reason"}], "type", "reason"}, "status"}`."""

    error: ErrorDetail
    status: int
