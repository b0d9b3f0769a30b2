"""Request bodies: strict JSON decoding into protocol structs, errors naming the field."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import TypeVar

import msgspec

from appliance.errors import InvalidRequest, validation_path

__all__ = ["convert_body", "decode_body", "decode_json"]

T = TypeVar("T")
_UNKNOWN = re.compile(r"^Object contains unknown field `([^`]*)`")


@cache
def _decoder(kind: type[T]) -> msgspec.json.Decoder[T]:
    return msgspec.json.Decoder(kind)


def decode_body(body: bytes, kind: type[T]) -> T:
    """Decode strictly (no "5" for 5): types and ranges as the OpenAI reference documents them."""
    if not body.strip():
        raise InvalidRequest("The request body is empty; send a JSON object.", code="invalid_json")
    try:
        return _parsed(_decoder(kind).decode, body)
    except msgspec.ValidationError as exc:
        raise _validation_error(str(exc)) from None


def decode_json(body: bytes) -> object:
    """The body as plain JSON values, for a route that looks into it before it knows the struct
    (then `convert_body`: the body is parsed once, never re-encoded)."""
    return _parsed(msgspec.json.decode, body)


def _parsed(decode: Callable[[bytes], T], body: bytes) -> T:
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


def _validation_error(text: str) -> InvalidRequest:
    reason, path = validation_path(text)
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
