"""Multipart forms (`multipart/form-data`), read once for every route that takes one: the audio
uploads and `/v1/files`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from litestar import Request
from litestar.datastructures import UploadFile
from litestar.exceptions import ClientException

from appliance.errors import InvalidRequest

__all__ = ["MULTIPART", "Form", "read_form"]

MULTIPART = "multipart/form-data"


@dataclass(frozen=True)
class Form:
    """A form's fields as plain values (the file's bytes under `file`), and the file's name."""

    fields: dict[str, Any] = field(default_factory=dict)
    filename: str | None = None


async def read_form(request: Request, lists: tuple[str, ...] = ()) -> Form:
    """The form's fields: `file` the one file part, as bytes; a field named in `lists` as a list
    (its parts sent repeated, named with brackets, `include[]`, or without); any other field once."""
    try:
        form = await request.form()
    except ClientException as exc:
        raise InvalidRequest(
            f"The request body is not a valid multipart form: {exc.detail}.", code="invalid_form"
        ) from None
    except UnicodeDecodeError:
        raise InvalidRequest(
            "A form field holds bytes that are not UTF-8 (a file must be sent as a file part, with a filename).",
            code="invalid_form",
        ) from None
    fields: dict[str, Any] = {}
    filename = None
    for name, value in form.multi_items():
        if isinstance(value, UploadFile):
            if name != "file":
                raise InvalidRequest(f"The form's part '{name}' is a file; only `file` takes one.", param=name)
            filename = value.filename
            value = await value.read()
        elif name == "file":
            raise InvalidRequest("`file` must be sent as a file part (with a filename), not as text.", param="file")
        listed = name.removesuffix("[]")
        if listed in lists:  # `include[]=a&include[]=b`, or the bare name repeated
            fields.setdefault(f"{listed}[]", []).append(value)
        elif name in fields:
            raise InvalidRequest(f"The form gives '{name}' more than once.", param=name)
        else:
            fields[name] = value
    return Form(fields, filename)
