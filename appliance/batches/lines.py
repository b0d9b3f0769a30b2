"""A batch's input file read and checked, every line before any runs.

A line is a JSON object `{"custom_id", "method": "POST", "url", "body"}`: its `url` one of the
batch endpoints and the batch's own, its `custom_id` unique in the file, its `body` decoded as
the endpoint's route decodes it (`endpoints`: the same struct, as strictly) and not streamed,
its `model` served and serving the endpoint's task. Every refusal names its line (1-based, as
OpenAI counts) and the field, so a client fixes the file in one pass. Blank lines are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from appliance.batches.endpoints import ENDPOINTS, Request
from appliance.entry import Entry
from appliance.entry.decoding import convert_body
from appliance.errors import ApplianceError, InvalidRequest
from appliance.protocol.batches import BatchError, InputLine

__all__ = ["Line", "read_lines"]

_decode_json = msgspec.json.Decoder().decode


@dataclass(frozen=True)
class Line:
    index: int
    """0-based, among the file's lines (blank ones counted)."""
    custom_id: str
    request: Request


def read_lines(
    content: bytes, endpoint: str, entry: Entry, *, check_models: bool = True
) -> tuple[list[Line], list[BatchError]]:
    """The file's requests in order, and a refusal for each line at fault (none: all may run).
    Without `check_models`, a model not served (or not serving the endpoint) is left for the
    line's answer to refuse (a batch resumed after the model went away)."""
    lines: list[Line] = []
    errors: list[BatchError] = []
    seen: set[str] = set()
    for index, text in enumerate(content.split(b"\n")):
        if not text.strip():
            continue
        try:
            line = _read_line(index, text, endpoint, entry, check_models)
        except ApplianceError as exc:
            errors.append(
                BatchError(code=exc.code or "invalid_request", message=exc.message, param=exc.param, line=index + 1)
            )
            continue
        if line.custom_id in seen:
            errors.append(
                BatchError(
                    code="duplicate_custom_id",
                    message=f"custom_id '{line.custom_id}' is used by an earlier line; each line needs its own.",
                    param="custom_id",
                    line=index + 1,
                )
            )
            continue
        seen.add(line.custom_id)
        lines.append(line)
    if not lines and not errors:
        errors.append(BatchError(code="empty_file", message="The input file holds no requests.", line=None))
    return lines, errors


def _refused(message: str, param: str | None, code: str) -> ApplianceError:
    return InvalidRequest(message, param=param, code=code)


def _read_line(index: int, text: bytes, endpoint: str, entry: Entry, check_models: bool) -> Line:
    try:
        value = _decode_json(text)
    except (msgspec.DecodeError, RecursionError):
        raise _refused("The line is not valid JSON.", None, "invalid_json_line") from None
    if not isinstance(value, dict):
        raise _refused("The line is not a JSON object.", None, "invalid_json_line")
    body = value.get("body")
    # The body is decoded below, as its route decodes it.
    line = convert_body({**value, "body": {}} if "body" in value else value, InputLine)
    if line.method != "POST":
        raise _refused(f"method is '{line.method}'; batch lines are POST requests.", "method", "invalid_method")
    if line.url not in ENDPOINTS:
        raise _refused(f"url '{line.url}' is not one of {', '.join(ENDPOINTS)}.", "url", "invalid_url")
    if line.url != endpoint:
        raise _refused(f"url '{line.url}' is not the batch's endpoint, {endpoint}.", "url", "mismatched_endpoint")
    if not isinstance(body, dict):
        raise _refused("body must be a JSON object (the endpoint's request).", "body", "invalid_type")
    served = ENDPOINTS[line.url]
    try:
        request = served.decode(body)
        if getattr(request.body, "stream", False):
            raise _refused("A batch line cannot be streamed: leave stream out.", "stream", "unsupported_parameter")
        if check_models:
            entry.engine(request.model).require(served.task)
    except ApplianceError as exc:
        exc.param = f"body.{exc.param}" if exc.param else "body"
        raise
    return Line(index=index, custom_id=line.custom_id, request=request)
