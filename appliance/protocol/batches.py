"""OpenAI's Batch API (`/v1/batches`): the create request, the batch object, its list, and the
lines of a batch's input, output and error files. Field names and order as OpenAI's reference.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

__all__ = [
    "ENDPOINTS",
    "Batch",
    "BatchCreateRequest",
    "BatchError",
    "BatchErrors",
    "BatchList",
    "BatchRequestCounts",
    "BatchStatus",
    "InputLine",
    "LineError",
    "LineResponse",
    "OutputLine",
]

Endpoint = Literal["/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses"]
ENDPOINTS: tuple[str, ...] = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses")
BatchStatus = Literal[
    "validating", "failed", "in_progress", "finalizing", "completed", "expired", "cancelling", "cancelled"
]

_MetadataKey = Annotated[str, Meta(max_length=64)]
_MetadataValue = Annotated[str, Meta(max_length=512)]


class BatchCreateRequest(Struct, kw_only=True, forbid_unknown_fields=True):
    input_file_id: str
    endpoint: Endpoint
    completion_window: Literal["24h"]
    metadata: Annotated[dict[_MetadataKey, _MetadataValue], Meta(max_length=16)] | None = None
    output_expires_after: dict[str, Any] | None = None
    """Accepted without effect: output files live until deleted."""


class BatchError(Struct, kw_only=True):
    code: str
    message: str
    param: str | None = None
    line: int | None = None
    """1-based, as OpenAI counts the input file's lines."""


class BatchErrors(Struct, kw_only=True):
    object: Literal["list"] = "list"
    data: list[BatchError]


class BatchRequestCounts(Struct, kw_only=True):
    total: int = 0
    completed: int = 0
    failed: int = 0


class Batch(Struct, kw_only=True):
    id: str
    object: Literal["batch"] = "batch"
    endpoint: str
    errors: BatchErrors | None = None
    input_file_id: str
    completion_window: str
    status: BatchStatus
    output_file_id: str | None = None
    error_file_id: str | None = None
    created_at: int
    in_progress_at: int | None = None
    expires_at: int | None = None
    finalizing_at: int | None = None
    completed_at: int | None = None
    failed_at: int | None = None
    expired_at: int | None = None
    cancelling_at: int | None = None
    cancelled_at: int | None = None
    request_counts: BatchRequestCounts = msgspec.field(default_factory=BatchRequestCounts)
    metadata: dict[str, str] | None = None


class BatchList(Struct, kw_only=True):
    object: Literal["list"] = "list"
    data: list[Batch]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class InputLine(Struct, kw_only=True, forbid_unknown_fields=True):
    """One line of a batch's input file; `body` is decoded as the endpoint's route decodes it."""

    custom_id: Annotated[str, Meta(min_length=1, max_length=512)]
    method: str
    url: str
    body: dict[str, Any]


class LineResponse(Struct, kw_only=True):
    status_code: int
    request_id: str
    body: Any


class LineError(Struct, kw_only=True):
    code: str
    message: str


class OutputLine(Struct, kw_only=True):
    """One line of a batch's output file (answered) or error file (refused, or never run: `error`)."""

    id: str
    custom_id: str
    response: LineResponse | None
    error: LineError | None
