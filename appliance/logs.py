"""Logging for every command: text for terminals (the default), or one JSON object per line.

`--log-format json` (settings key `log_format`) makes every line the server writes one JSON object,
uvicorn's and the access log's included, ready for journald and `jq`:

    {"time": "2026-11-23T11:34:47.019Z", "level": "info", "logger": "appliance.server", "message": "..."}

An access line carries its fields at the top level instead of a message (`"event": "request"`,
`"status"`, `"latency_ms"`, ...): a logger passes them as `extra={"fields": {...}}`, and the text
format prints them as compact JSON, as before. A traceback is the `exception` string.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Literal

__all__ = ["JsonFormatter", "LogFormat", "configure_logging", "current_logging", "fields_of"]

LogFormat = Literal["text", "json"]

_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


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
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
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
