"""The access-log record of one request, whoever carried it in: the gate opens one per HTTP
request, the batch runner one per batch line, and the entry (`entry.Entry`) names the model, the
user and the engine streams on it. One line per record goes to the `appliance.access` log
(`log_line`), in the same shape for both.
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from appliance.logs import capped

__all__ = ["RECORDED_CHARS", "RequestRecord", "current_record", "log_line", "named", "streams_recorded"]

access_log = logging.getLogger("appliance.access")

RECORDED_CHARS = 256
"""Of each string a `RequestRecord` holds (OpenAI's and Anthropic's ids are far shorter)."""

_LOGGED_CHARS = 2048
"""Of a request's method and path in its access log line (both arrive from unauthenticated clients)."""


@dataclass
class RequestRecord:
    """What the access log says about one request; the entry fills in model, user and streams.

    Every string it is given is capped at `RECORDED_CHARS` as it is set: the model and user come
    from the body, on every route (an 8 MB `user` once went whole into each access line)."""

    request_id: str
    model: str | None = None
    user: str | None = None
    streams: Sequence[Any] = field(default_factory=tuple)

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, capped(value, RECORDED_CHARS) if isinstance(value, str) else value)


current_record: contextvars.ContextVar[RequestRecord | None] = contextvars.ContextVar("current_record", default=None)
"""The record of the request being served (None outside one, e.g. in tests without the gate)."""


def log_line(record: RequestRecord, method: str, path: str, status: int, seconds: float, **extra: Any) -> None:
    """One access-log line for `record`: `status` (0: the client left, logged as 499) after
    `seconds`; `extra` fields (a batch line's batch id) are added as given."""
    streams = record.streams
    line: dict[str, Any] = {
        "event": "request",
        "id": record.request_id,
        "method": capped(method, _LOGGED_CHARS),
        "path": capped(path, _LOGGED_CHARS),
        "status": status or 499,
        "latency_ms": round(seconds * 1000, 1),
        **extra,
    }
    if record.model:
        line["model"] = record.model
    if streams:
        line["prompt_tokens"] = sum(s.prompt_tokens for s in streams)
        line["completion_tokens"] = sum(s.completion_tokens or s.tokens_seen for s in streams)
        first = [s.first_token_at - s.submitted_at for s in streams if s.first_token_at is not None]
        if first:
            line["ttft_ms"] = round(min(first) * 1000, 1)
        reasons = sorted({s.finish_reason or "cancelled" for s in streams})
        line["finish_reason"] = ",".join(reasons)
    if record.user:
        line["user"] = record.user
    access_log.info(json.dumps(line, separators=(",", ":")), extra={"fields": line})


def named(model: str, user: str | None) -> RequestRecord | None:
    """The current request's record (None outside one), now naming `model` and `user`: the access
    log names the model even when it is unknown."""
    record = current_record.get()
    if record is not None:
        record.model, record.user = model, user
    return record


def streams_recorded(streams: list) -> None:
    """Add the request's engine `streams` to its access-log record."""
    record = current_record.get()
    if record is not None:
        record.streams = streams
