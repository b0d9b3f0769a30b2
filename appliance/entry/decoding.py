"""Request bodies: strict JSON decoding into protocol structs, errors naming the field.

Every route reads its body through here, so every route refuses the same way a body that is not
JSON: empty, malformed, nested too deeply, not UTF-8, or holding a number beyond a 64-bit float's
range (`1e400`, which Python would read as infinity): 400 `invalid_json`. That is decided before
the schema is, whatever else is wrong with the body.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import TypeVar

import msgspec

from appliance.errors import InvalidRequest, validation_path

__all__ = ["convert_body", "convert_form", "decode_body", "decode_json"]

T = TypeVar("T")
_UNKNOWN = re.compile(r"^Object contains unknown field `([^`]*)`")
_OUT_OF_RANGE = "Number out of range"
"""msgspec's reason for a number no float (or, in an `int` field, no integer type) can hold."""


@cache
def _decoder(kind: type[T]) -> msgspec.json.Decoder[T]:
    return msgspec.json.Decoder(kind)


def decode_body(body: bytes, kind: type[T]) -> T:
    """Decode strictly (no "5" for 5): types and ranges as the OpenAI reference documents them."""
    try:
        return _parsed(_decoder(kind).decode, body)
    except msgspec.ValidationError as exc:
        error = _validation_error(str(exc))
        if error.code != "invalid_json":
            # The typed decoder stops at the first field it refuses (an unknown one, say) before
            # it has read the rest: a body that is not JSON at all says so first, as on the routes
            # that read plain JSON. Only a refused body is read twice.
            decode_json(body)
        raise error from None


def decode_json(body: bytes) -> object:
    """The body as plain JSON values, for a route that looks into it before it knows the struct
    (then `convert_body`: the body is parsed once, never re-encoded)."""
    try:
        return _parsed(msgspec.json.decode, body)
    except msgspec.ValidationError as exc:  # untyped, msgspec refuses only numbers out of range
        raise _validation_error(str(exc)) from None


def _parsed(decode: Callable[[bytes], T], body: bytes) -> T:
    if not body.strip():
        raise InvalidRequest("The request body is empty; send a JSON object.", code="invalid_json")
    try:
        return decode(body)
    except msgspec.ValidationError:
        raise
    except msgspec.DecodeError as exc:
        raise InvalidRequest(f"The request body is not valid JSON: {exc}", code="invalid_json") from None
    except UnicodeDecodeError:  # msgspec checks UTF-8 inside strings, and raises this, not DecodeError
        raise InvalidRequest(
            "The request body is not valid JSON: a string holds bytes that are not UTF-8.", code="invalid_json"
        ) from None
    except RecursionError:
        raise InvalidRequest("The request body is nested too deeply.", code="invalid_json") from None


def convert_body(value: object, kind: type[T]) -> T:
    """`decode_json`'s values as `kind`, as strictly as `decode_body` and with the same errors."""
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        raise _validation_error(str(exc)) from None


def convert_form(fields: dict[str, object], kind: type[T]) -> T:
    """A form's fields (strings, a file's bytes, lists of strings) as `kind`: numbers and booleans
    read from their text (`temperature=0.2`, `stream=true`), errors naming the field."""
    try:
        return msgspec.convert(fields, kind, strict=False)
    except msgspec.ValidationError as exc:
        raise _validation_error(str(exc)) from None


def _validation_error(text: str) -> InvalidRequest:
    reason, path = validation_path(text)
    if reason.startswith(_OUT_OF_RANGE):
        # Untyped decoding knows no key names (`$[...]`): a path only where it names a field.
        field = path if path and "[...]" not in path else None
        where = f" in '{field}'" if field else ""
        return InvalidRequest(
            f"The request body is not valid JSON here: a number{where} is out of range (beyond a 64-bit float).",
            param=field,
            code="invalid_json",
        )
    unknown = _UNKNOWN.match(reason)
    if unknown:
        field = f"{path}.{unknown.group(1)}" if path else unknown.group(1)
        return InvalidRequest(
            f"Unrecognized request argument supplied: {field}. See docs/api.md for the parameters this server honours.",
            param=field,
            code="unknown_parameter",
        )
    if reason.startswith("Object missing required field"):
        missing = reason.split("`")[1]
        field = f"{path}.{missing}" if path else missing
        return InvalidRequest(f"Missing required parameter: '{field}'.", param=field, code="missing_required_parameter")
    if not path:
        return InvalidRequest(f"Invalid request body: {reason}.", code="invalid_type")
    return InvalidRequest(f"Invalid value for '{path}': {reason}.", param=path, code="invalid_value")
