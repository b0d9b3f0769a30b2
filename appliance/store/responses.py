"""Stored responses as rows: bounded in count and bytes, each for a time, per owner.

The bounds are the whole store's (all the servers sharing it): at most `max_responses` responses
and `max_bytes` of their bodies, each kept `ttl_seconds`. When a new response takes the store
over a bound, the oldest response of the owner holding the largest share goes first (its share of
the count or of the bytes, whichever is larger), so one API key storing a burst evicts its own,
never those of a key within its fair share. The response just written is not its own victim: when
its owner holds only it, the next largest share gives way. A response is found only by its owner.

Every write (a put, a delete) takes the store's write lock for responses (SQLite's
`BEGIN IMMEDIATE`, an advisory lock on PostgreSQL) and keeps the counters (`response_owners`,
`response_totals`) in step with the rows it adds and deletes, so two servers writing at once
cannot both leave the store over a bound nor the counters wrong. A put's cost does not grow with
the rows stored: the totals are one row, the largest share one indexed row (the owner with the
most responses or the one with the most bytes: the larger share is one of the two), the oldest
response of an owner one indexed row; deleting the expired responses costs what they are, each
once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, Row, delete, func, or_, select, update

from appliance.store.database import Database
from appliance.store.schema import response_owners, response_totals, responses

__all__ = ["MAX_BYTES", "MAX_RESPONSES", "TTL_SECONDS", "ResponseRows"]

MAX_RESPONSES = 1024
MAX_BYTES = 64 * 1024 * 1024
TTL_SECONDS = 3600.0
_WRITE_LOCK = 0x72657370  # "resp"


@dataclass
class _Usage:
    count: int = 0
    size: int = 0


class ResponseRows:
    """The `responses` table behind its bounds: bodies are bytes, what they hold is the caller's."""

    def __init__(
        self,
        database: Database,
        *,
        max_responses: int = MAX_RESPONSES,
        max_bytes: int = MAX_BYTES,
        ttl_seconds: float = TTL_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.database = database
        self.max_responses = max_responses
        self.max_bytes = max_bytes
        self.ttl_seconds = ttl_seconds
        self._clock = clock

    async def put(self, owner: str, response_id: str, body: bytes) -> bool:
        """Keep `body` as `response_id` of `owner` (replacing one of that id); False when it alone
        is larger than the whole store."""
        if len(body) > self.max_bytes or self.max_responses < 1:
            return False
        now = self._clock()

        def put(connection: Connection) -> bool:
            self.database.advisory_lock(connection, _WRITE_LOCK)
            gone = connection.execute(
                delete(responses)
                .where(or_(responses.c.expires_at <= now, responses.c.id == response_id))
                .returning(responses.c.owner, responses.c.size)
            ).all()
            connection.execute(
                responses.insert().values(
                    id=response_id,
                    owner=owner,
                    stored_at=now,
                    expires_at=now + self.ttl_seconds,
                    size=len(body),
                    body=body,
                )
            )
            changes = _changes(gone, sign=-1)
            changes.setdefault(owner, _Usage()).count += 1
            changes[owner].size += len(body)
            self._count(connection, changes)
            self._evict(connection, owner, response_id)
            return True

        return await self.database.run(put)

    async def get(self, owner: str, response_id: str) -> bytes | None:
        """The body, if `owner` stored it and it has not expired or been evicted."""
        now = self._clock()

        def get(connection: Connection) -> bytes | None:
            row = connection.execute(
                select(responses.c.body).where(
                    responses.c.id == response_id, responses.c.owner == owner, responses.c.expires_at > now
                )
            ).first()
            return bytes(row.body) if row is not None else None

        return await self.database.run(get)

    async def delete(self, owner: str, response_id: str) -> bool:
        """Forget the response; False when `owner` has none of that id (or it expired)."""
        now = self._clock()

        def forget(connection: Connection) -> bool:
            self.database.advisory_lock(connection, _WRITE_LOCK)
            gone = connection.execute(
                delete(responses)
                .where(responses.c.id == response_id, responses.c.owner == owner, responses.c.expires_at > now)
                .returning(responses.c.owner, responses.c.size)
            ).all()
            self._count(connection, _changes(gone, sign=-1))
            return bool(gone)

        return await self.database.run(forget)

    async def usage(self) -> tuple[int, int]:
        """(responses, bytes) stored and not expired: counted over the table (not for a hot path)."""
        now = self._clock()

        def usage(connection: Connection) -> tuple[int, int]:
            row = connection.execute(
                select(func.count(), func.coalesce(func.sum(responses.c.size), 0)).where(responses.c.expires_at > now)
            ).one()
            return int(row[0]), int(row[1])

        return await self.database.run(usage)

    def _count(self, connection: Connection, changes: dict[str, _Usage]) -> None:
        """Add `changes` (per owner) to the counters; an owner left with none loses its row."""
        changes = {owner: change for owner, change in changes.items() if change.count or change.size}
        if not changes:
            return
        for owner in sorted(changes):  # one order in every writer: no two wait on each other's rows
            change = changes[owner]
            statement = (
                self.database.insert(response_owners)
                .values(owner=owner, responses=change.count, bytes=change.size)
                .on_conflict_do_update(
                    index_elements=["owner"],
                    set_={
                        "responses": response_owners.c.responses + change.count,
                        "bytes": response_owners.c.bytes + change.size,
                    },
                )
            )
            connection.execute(statement)
            if change.count < 0:
                connection.execute(
                    delete(response_owners).where(response_owners.c.owner == owner, response_owners.c.responses <= 0)
                )
        connection.execute(
            update(response_totals).values(
                responses=response_totals.c.responses + sum(change.count for change in changes.values()),
                bytes=response_totals.c.bytes + sum(change.size for change in changes.values()),
            )
        )

    def _evict(self, connection: Connection, writer: str, written: str) -> None:
        """Delete oldest-first from the largest share until the totals fit the bounds, never the
        response `written` by `writer` (which fits alone: `put` checked)."""
        while True:
            totals = connection.execute(select(response_totals.c.responses, response_totals.c.bytes)).one()
            if totals.responses <= self.max_responses and totals.bytes <= self.max_bytes:
                return
            victim = self._largest_share(connection, excluding=None)
            oldest = self._oldest(connection, victim, written)
            if oldest is None:  # the writer holds only what it just wrote
                oldest = self._oldest(connection, self._largest_share(connection, excluding=writer), written)
            if oldest is None:  # unreachable while `written` fits alone; never loop on it
                return
            connection.execute(delete(responses).where(responses.c.id == oldest.id))
            self._count(connection, {oldest.owner: _Usage(-1, -oldest.size)})

    def _largest_share(self, connection: Connection, *, excluding: str | None) -> str | None:
        """The owner holding the largest share of either bound (on a tie, the first in order)."""
        where = [] if excluding is None else [response_owners.c.owner != excluding]
        leaders = [
            connection.execute(
                select(response_owners.c.owner, response_owners.c.responses, response_owners.c.bytes)
                .where(*where)
                .order_by(column.desc(), response_owners.c.owner)
                .limit(1)
            ).first()
            for column in (response_owners.c.responses, response_owners.c.bytes)
        ]
        found = [row for row in leaders if row is not None]
        if not found:
            return None
        return max(found, key=lambda row: max(row.responses / self.max_responses, row.bytes / self.max_bytes)).owner

    def _oldest(self, connection: Connection, owner: str | None, written: str) -> Row | None:
        if owner is None:
            return None
        return connection.execute(
            select(responses.c.id, responses.c.owner, responses.c.size)
            .where(responses.c.owner == owner, responses.c.id != written)
            .order_by(responses.c.stored_at, responses.c.id)
            .limit(1)
        ).first()


def _changes(rows: list[Row], *, sign: int) -> dict[str, _Usage]:
    """Per owner, the count and bytes of `rows` (each an owner and a size), times `sign`."""
    changes: dict[str, _Usage] = {}
    for row in rows:
        change = changes.setdefault(row.owner, _Usage())
        change.count += sign
        change.size += sign * int(row.size)
    return changes
