"""Files as rows: what `/v1/files` uploads and a batch writes, per owner, bounded.

A file is UTF-8 text kept whole in the database (so every server sharing a PostgreSQL store
serves it). What `create` checks, before anything is written, in this order: its bytes
(`max_file_bytes`, 413), UTF-8 (400), its lines (`max_file_lines`, 400), the owner's files
together (`max_owner_bytes`, 400). A file written with `bounded=False` (a batch's output or
error file, bounded by its batch) skips the size, line and owner bounds, not the UTF-8 check.
What the lines hold (a batch's requests) is not read here: the batch that uses the file does.

A file has no expiry unless created with `expires_after` seconds; an expired file is gone to
every call, and its row is deleted by the next `create`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import Connection, Row, and_, delete, func, or_, select, tuple_

from appliance.errors import InvalidRequest, PayloadTooLarge
from appliance.store.database import Database
from appliance.store.schema import files

__all__ = ["MAX_FILENAME", "FileRecord", "FileRows", "line_count"]

MAX_FILENAME = 255
"""Characters of a file's name, at most."""
_CREATE_LOCK = 0x66696C65  # "file": an owner's bytes are summed and added to in one step

_LISTED = (
    files.c.id,
    files.c.purpose,
    files.c.filename,
    files.c.bytes,
    files.c.lines,
    files.c.created_at,
    files.c.expires_at,
    files.c.seq,
)


@dataclass(frozen=True)
class FileRecord:
    """A stored file's facts (its content is read with `FileRows.content`). Times in Unix seconds."""

    id: str
    purpose: str
    filename: str
    bytes: int
    lines: int
    created_at: int
    expires_at: int | None


def line_count(content: bytes) -> int:
    """Lines in `content`: its newlines, and one more when the last line has none."""
    return content.count(b"\n") + (1 if content and not content.endswith(b"\n") else 0)


def _record(row: Row) -> FileRecord:
    return FileRecord(
        id=row.id,
        purpose=row.purpose,
        filename=row.filename,
        bytes=int(row.bytes),
        lines=int(row.lines),
        created_at=int(row.created_at),
        expires_at=None if row.expires_at is None else int(row.expires_at),
    )


class FileRows:
    """The `files` table behind its bounds; every call names the owner, who alone sees a file."""

    def __init__(
        self,
        database: Database,
        *,
        max_file_bytes: int,
        max_file_lines: int,
        max_owner_bytes: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.database = database
        self.max_file_bytes = max_file_bytes
        self.max_file_lines = max_file_lines
        self.max_owner_bytes = max_owner_bytes
        self._clock = clock

    async def create(
        self,
        owner: str,
        *,
        purpose: str,
        filename: str,
        content: bytes,
        bounded: bool = True,
        expires_after: int | None = None,
    ) -> FileRecord:
        """Store `content` as a new file of `owner`; the checks of the module's docstring first
        (raised as `InvalidRequest` or `PayloadTooLarge`, param `file`)."""
        if len(filename) > MAX_FILENAME:
            raise InvalidRequest(f"The file's name is longer than {MAX_FILENAME} characters.", param="file")
        if bounded and len(content) > self.max_file_bytes:
            raise PayloadTooLarge(
                f"The file is {len(content)} bytes; files are at most {self.max_file_bytes} bytes here "
                "(max_file_bytes).",
                param="file",
            )
        now = self._clock()

        def create(connection: Connection) -> FileRecord:
            lines = self._checked_lines(content, bounded)
            self.database.advisory_lock(connection, _CREATE_LOCK)
            connection.execute(delete(files).where(files.c.expires_at <= int(now)))
            if bounded:
                self._check_owner_bytes(connection, owner, len(content))
            record = FileRecord(
                id=f"file-{uuid.uuid4().hex}",
                purpose=purpose,
                filename=filename,
                bytes=len(content),
                lines=lines,
                created_at=int(now),
                expires_at=None if expires_after is None else int(now) + expires_after,
            )
            connection.execute(
                files.insert().values(owner=owner, seq=time.time_ns(), content=content, **record.__dict__)
            )
            return record

        return await self.database.run(create)

    async def get(self, owner: str, file_id: str) -> FileRecord | None:
        """The file's facts, if `owner` has it (and it has not expired)."""

        def get(connection: Connection) -> FileRecord | None:
            row = connection.execute(select(*_LISTED).where(self._visible(owner), files.c.id == file_id)).first()
            return _record(row) if row is not None else None

        return await self.database.run(get)

    async def content(self, owner: str, file_id: str) -> bytes | None:
        """The file's bytes, if `owner` has it."""

        def content(connection: Connection) -> bytes | None:
            row = connection.execute(select(files.c.content).where(self._visible(owner), files.c.id == file_id)).first()
            return bytes(row.content) if row is not None else None

        return await self.database.run(content)

    async def page(
        self,
        owner: str,
        *,
        purpose: str | None = None,
        limit: int = 10_000,
        after: str | None = None,
        order: Literal["asc", "desc"] = "desc",
    ) -> tuple[list[FileRecord], bool]:
        """`owner`'s files, newest first (`order="desc"`) or oldest first, of `purpose` if given,
        those after the file `after` (a cursor: an id from the previous page; one `owner` does
        not have gives an empty page), at most `limit`; and whether more follow."""

        def page(connection: Connection) -> tuple[list[FileRecord], bool]:
            where = [self._visible(owner)]
            if purpose is not None:
                where.append(files.c.purpose == purpose)
            key = tuple_(files.c.seq, files.c.id)
            if after is not None:
                cursor = connection.execute(
                    select(files.c.seq, files.c.id).where(self._visible(owner), files.c.id == after)
                ).first()
                if cursor is None:
                    return [], False
                where.append(
                    key < tuple_(cursor.seq, cursor.id) if order == "desc" else key > tuple_(cursor.seq, cursor.id)
                )
            ordering = (files.c.seq.desc(), files.c.id.desc()) if order == "desc" else (files.c.seq, files.c.id)
            rows = connection.execute(select(*_LISTED).where(and_(*where)).order_by(*ordering).limit(limit + 1)).all()
            return [_record(row) for row in rows[:limit]], len(rows) > limit

        return await self.database.run(page)

    async def delete(self, owner: str, file_id: str) -> bool:
        """Delete the file; False when `owner` has none of that id."""

        def forget(connection: Connection) -> bool:
            return connection.execute(delete(files).where(self._visible(owner), files.c.id == file_id)).rowcount > 0

        return await self.database.run(forget)

    def _visible(self, owner: str):  # noqa: ANN202  (a SQL expression)
        now = int(self._clock())
        return and_(files.c.owner == owner, or_(files.c.expires_at.is_(None), files.c.expires_at > now))

    def _checked_lines(self, content: bytes, bounded: bool) -> int:
        try:
            content.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequest(
                f"The file is not UTF-8 text (byte {exc.start} is not): a batch file is JSON Lines, one "
                "request per line.",
                param="file",
                code="invalid_file_format",
            ) from None
        lines = line_count(content)
        if bounded and lines > self.max_file_lines:
            raise InvalidRequest(
                f"The file has {lines} lines; files have at most {self.max_file_lines} here (max_file_lines).",
                param="file",
                code="too_many_lines",
            )
        return lines

    def _check_owner_bytes(self, connection: Connection, owner: str, adding: int) -> None:
        held = connection.execute(
            select(func.coalesce(func.sum(files.c.bytes), 0)).where(files.c.owner == owner)
        ).scalar()
        if int(held or 0) + adding > self.max_owner_bytes:
            raise InvalidRequest(
                f"Your files hold {held} bytes; with this one they would pass the {self.max_owner_bytes} bytes "
                "an API key may store (max_stored_file_bytes): delete files you no longer need.",
                param="file",
                code="storage_limit_exceeded",
            )
