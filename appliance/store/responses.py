"""Stored responses as rows: bounded in count and bytes, each for a time, per owner.

The bounds are the whole store's (all the servers sharing it): at most `max_responses` responses
and `max_bytes` of their bodies, each kept `ttl_seconds`. When a new response takes the store
over a bound, the oldest response of the owner holding the largest share goes first (its share of
the count or of the bytes, whichever is larger), so one API key storing a burst evicts its own,
never those of a key within its fair share. A response is found only by its owner.

A put takes the store's write lock (SQLite's `BEGIN IMMEDIATE`, an advisory lock on PostgreSQL),
so two servers storing at once cannot both leave it over a bound. Its cost grows with the rows
stored (a count and a sum over the table): milliseconds at the default thousand.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, delete, func, select

from appliance.store.database import Database
from appliance.store.schema import responses

__all__ = ["MAX_BYTES", "MAX_RESPONSES", "TTL_SECONDS", "ResponseRows"]

MAX_RESPONSES = 1024
MAX_BYTES = 64 * 1024 * 1024
TTL_SECONDS = 3600.0
_PUT_LOCK = 0x72657370  # "resp"


@dataclass(frozen=True)
class _Usage:
    count: int
    size: int


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
            self.database.advisory_lock(connection, _PUT_LOCK)
            connection.execute(delete(responses).where(responses.c.expires_at <= now))
            connection.execute(delete(responses).where(responses.c.id == response_id))
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
            self._evict(connection)
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
            result = connection.execute(
                delete(responses).where(
                    responses.c.id == response_id, responses.c.owner == owner, responses.c.expires_at > now
                )
            )
            return result.rowcount > 0

        return await self.database.run(forget)

    async def usage(self) -> tuple[int, int]:
        """(responses, bytes) stored and not expired."""
        now = self._clock()

        def usage(connection: Connection) -> tuple[int, int]:
            row = connection.execute(
                select(func.count(), func.coalesce(func.sum(responses.c.size), 0)).where(responses.c.expires_at > now)
            ).one()
            return int(row[0]), int(row[1])

        return await self.database.run(usage)

    def _evict(self, connection: Connection) -> None:
        owners = {
            row.owner: _Usage(int(row.count), int(row.size))
            for row in connection.execute(
                select(
                    responses.c.owner, func.count().label("count"), func.sum(responses.c.size).label("size")
                ).group_by(responses.c.owner)
            )
        }
        count = sum(usage.count for usage in owners.values())
        size = sum(usage.size for usage in owners.values())
        while count > self.max_responses or size > self.max_bytes:
            largest = max(
                owners,
                key=lambda owner: max(owners[owner].count / self.max_responses, owners[owner].size / self.max_bytes),
            )
            oldest = connection.execute(
                select(responses.c.id, responses.c.size)
                .where(responses.c.owner == largest)
                .order_by(responses.c.stored_at, responses.c.id)
                .limit(1)
            ).one()
            connection.execute(delete(responses).where(responses.c.id == oldest.id))
            count, size = count - 1, size - oldest.size
            left = _Usage(owners[largest].count - 1, owners[largest].size - oldest.size)
            if left.count:
                owners[largest] = left
            else:
                del owners[largest]
