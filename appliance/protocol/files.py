"""OpenAI's Files API (`/v1/files`): the upload form and the file objects, with OpenAI's field
names in its reference's order."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

__all__ = ["FileDeleted", "FileList", "FileObject", "FileUploadForm", "Purpose"]

Purpose = Literal["batch", "batch_output"]
"""`batch`: a batch's input, uploaded; `batch_output`: a batch's output or error file, written by
the appliance. OpenAI's other purposes (assistants, fine-tune, vision, user_data, evals) are
refused at upload: nothing here would read them."""


class FileUploadForm(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """`POST /v1/files` (multipart/form-data). A field not listed here is refused."""

    file: bytes
    """The file: UTF-8 JSON Lines, one batch request per line."""
    purpose: str
    """`batch` (the only purpose uploads take here)."""
    expires_after_anchor: Literal["created_at"] | None = msgspec.field(default=None, name="expires_after[anchor]")
    expires_after_seconds: Annotated[int, msgspec.Meta(ge=3600, le=2_592_000)] | None = msgspec.field(
        default=None, name="expires_after[seconds]"
    )
    """Delete the file this many seconds after its creation (an hour to 30 days); default: kept
    until deleted."""


class FileObject(msgspec.Struct, kw_only=True):
    """A stored file's facts."""

    id: str
    bytes: int
    created_at: int
    filename: str
    object: Literal["file"] = "file"
    purpose: Purpose
    status: Literal["uploaded", "processed", "error"] = "processed"
    expires_at: int | None = None
    status_details: str | None = None


class FileList(msgspec.Struct, kw_only=True):
    """`GET /v1/files`: a page of files; `after=last_id` asks for the next one."""

    object: Literal["list"] = "list"
    data: list[FileObject]
    first_id: str | None
    last_id: str | None
    has_more: bool


class FileDeleted(msgspec.Struct, kw_only=True):
    id: str
    object: Literal["file"] = "file"
    deleted: bool = True
