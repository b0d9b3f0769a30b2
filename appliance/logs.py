"""Logging for every command: text for terminals (the default), or one JSON object per line.

`--log-format json` (settings key `log_format`) makes every line the server writes one JSON object,
uvicorn's and the access log's included, ready for journald and `jq`:

    {"time": "2026-11-23T11:34:47.019Z", "level": "info", "logger": "appliance.server", "message": "..."}

An access line carries its fields at the top level instead of a message (`"event": "request"`,
`"status"`, `"latency_ms"`, ...): a logger passes them as `extra={"fields": {...}}`, and the text
format prints them as compact JSON, as before. A traceback is the `exception` string.

Nothing a client sends can make a line long: every message, field and traceback is cut to a
fixed size (`capped`) before it is written, whichever logger wrote it (a client's 8 MB `user`
once added 80 MB of log in ten requests). What a request's access line holds is capped where it
is recorded too (`api.gate.RequestRecord`), shorter.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Literal

__all__ = [
    "MAX_LOGGED_CHARS",
    "MAX_TRACEBACK_CHARS",
    "JsonFormatter",
    "LogFormat",
    "capped",
    "configure_logging",
    "current_logging",
    "fields_of",
]

LogFormat = Literal["text", "json"]

_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

MAX_LOGGED_CHARS = 16384
"""Of one log message, or of one string field of a structured line."""
MAX_TRACEBACK_CHARS = 65536
"""Of one logged traceback (its end, which names the error, is kept)."""


def capped(text: str, limit: int) -> str:
    """`text` if it is at most `limit` characters, else its start and end around a note of how
    many characters were cut (about `limit` characters in all)."""
    if len(text) <= limit:
        return text
    keep = max(limit - 32, 2)
    head, tail = keep - keep // 2, keep // 2
    return f"{text[:head]}...[{len(text) - head - tail} chars cut]...{text[len(text) - tail :]}"


class _Capped(logging.Filter):
    """Cuts a record's message, string fields and traceback to their caps before any formatter
    sees them (a filter on the one handler: it covers every logger, uvicorn's included)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: the handler reports it when it formats the record
            return True
        if len(message) > MAX_LOGGED_CHARS:
            record.msg, record.args = capped(message, MAX_LOGGED_CHARS), None
        fields = fields_of(record)
        if fields is not None:
            record.fields = {
                name: capped(value, MAX_LOGGED_CHARS) if isinstance(value, str) else value
                for name, value in fields.items()
            }
        if record.exc_info and not record.exc_text:
            # Formatters print `exc_text` when it is set (and only then format `exc_info`).
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = capped(record.exc_text, MAX_TRACEBACK_CHARS)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ms), level, logger, then the message or the fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        fields = fields_of(record)
        if fields is None:
            line["message"] = record.getMessage()
        else:
            line.update(fields)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exception"] = record.exc_text
        return json.dumps(line, separators=(",", ":"), default=str)


def fields_of(record: logging.LogRecord) -> dict[str, Any] | None:
    """The structured fields a record was logged with (`extra={"fields": ...}`), or None."""
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, dict) else None


def configure_logging(level: str = "info", log_format: LogFormat = "text") -> None:
    """Route every logger (uvicorn's and Python warnings included) to stdout in `log_format`."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(_TEXT))
    handler.addFilter(_Capped())
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper()))
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi"):
        # uvicorn's own handlers print "INFO:     ..." whatever the format: let records reach the root.
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.propagate = True
    logging.captureWarnings(True)
    # httpx logs every request at INFO (bench and soak send thousands).
    logging.getLogger("httpx").setLevel(logging.WARNING)


def current_logging() -> tuple[str, LogFormat]:
    """The level and format this process logs with, for a child process to log alike (engines)."""
    root = logging.getLogger()
    json_lines = any(isinstance(handler.formatter, JsonFormatter) for handler in root.handlers)
    return logging.getLevelName(root.getEffectiveLevel()).lower(), "json" if json_lines else "text"
