"""Ollama's JSON Lines answers: the media type, and a stream whose failure ends in `{"error": ...}`."""

from __future__ import annotations

from collections.abc import AsyncIterator

from litestar.response import Stream

from appliance.api.sse import HEADERS, json_lines
from appliance.dialects.ollama.errors import error_body

__all__ = ["NDJSON", "ndjson_stream"]

NDJSON = "application/x-ndjson"


def ndjson_stream(lines: AsyncIterator[object]) -> Stream:
    """`lines` one JSON document per line; an error mid-stream becomes the last line, in Ollama's shape."""
    return Stream(json_lines(lines, error_body), media_type=NDJSON, headers=HEADERS)
