"""One batch line answered through the entry, as its HTTP route would answer it, and the line of
the output or error file that says so (OpenAI's shape: `{"id", "custom_id", "response":
{"status_code", "request_id", "body"}, "error"}`).

Each line is a request of its own to the access log (`entry.record`: method POST, the line's
endpoint as its path, the batch's id), with its own request id, the one its output line gives.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass

import msgspec

from appliance.batches.endpoints import ENDPOINTS
from appliance.batches.lines import Line
from appliance.entry import Entry, RequestRecord, current_record, log_line
from appliance.errors import ApplianceError
from appliance.protocol.batches import LineError, LineResponse, OutputLine

__all__ = ["RETRYABLE", "Answer", "answer_line", "unrun_line"]

log = logging.getLogger("appliance.batches")
_encoder = msgspec.json.Encoder()

RETRYABLE = frozenset({429, 503})
"""Statuses that say "not now" (a queue full, a model loading): the line is tried again later,
not answered with them."""


@dataclass(frozen=True)
class Answer:
    status: int
    output: bytes
    """The line of the output file (status 200) or of the error file."""

    @property
    def ok(self) -> bool:
        return self.status == 200


def _request_id() -> str:
    return uuid.uuid4().hex[:16]


def _line_id() -> str:
    return f"batch_req_{uuid.uuid4().hex}"


async def answer_line(entry: Entry, endpoint: str, line: Line, owner: str, batch_id: str) -> Answer:
    """`line` served by `entry` for `owner`; a refusal or failure is an answer too (its status and
    OpenAI's error body), raised only when the task is cancelled."""
    record = RequestRecord(request_id=_request_id())
    token = current_record.set(record)
    started = time.monotonic()
    status = 0
    try:
        try:
            body = await ENDPOINTS[endpoint].answer(entry, line.request, owner)
            status = 200
        except ApplianceError as exc:
            status, body = exc.status, exc.to_dict()
        except Exception:
            log.exception("batch %s: line %d failed", batch_id, line.index + 1)
            status, body = 500, {"error": {"message": "The server failed on this request.", "type": "server_error"}}
    finally:
        current_record.reset(token)
        log_line(record, "POST", endpoint, status, time.monotonic() - started, batch=batch_id)
    response = LineResponse(status_code=status, request_id=record.request_id, body=body)
    output = OutputLine(id=_line_id(), custom_id=line.custom_id, response=response, error=None)
    return Answer(status, _encoder.encode(output))


def unrun_line(custom_id: str, code: str, message: str) -> bytes:
    """The error file's line of a request never run (the batch cancelled or expired first)."""
    return _encoder.encode(
        OutputLine(id=_line_id(), custom_id=custom_id, response=None, error=LineError(code=code, message=message))
    )
