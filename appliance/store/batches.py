"""Batches as rows: each batch's object (bytes the caller encodes) and each answered line.

A line's answer is written as the line finishes, keyed by (batch, line): a batch resumed after a
restart skips the lines already answered, and a line is never answered twice (`answer` refuses a
second write of a line: the primary key decides). Counts are read from the lines,
so the batch object never disagrees with them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import Connection, and_, func, or_, select, tuple_, update

from appliance.store.database import Database
from appliance.store.schema import batch_lines, batches

__all__ = ["BatchRow", "BatchRows", "LineCounts"]


@dataclass(frozen=True)
class BatchRow:
    id: str
    owner: str
    body: bytes


@dataclass(frozen=True)
class LineCounts:
    completed: int = 0
    failed: int = 0


class BatchRows:
    """The `batches` and `batch_lines` tables; reads by id name the owner, who alone sees a batch."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def create(self, batch_id: str, owner: str, status: str, body: bytes) -> None:
        def create(connection: Connection) -> None:
            connection.execute(
                batches.insert().values(id=batch_id, owner=owner, status=status, seq=time.time_ns(), body=body)
            )

        await self.database.run(create)

    async def get(self, owner: str, batch_id: str) -> BatchRow | None:
        def get(connection: Connection) -> BatchRow | None:
            row = connection.execute(
                select(batches.c.id, batches.c.owner, batches.c.body).where(
                    batches.c.owner == owner, batches.c.id == batch_id
                )
            ).first()
            return BatchRow(row.id, row.owner, bytes(row.body)) if row is not None else None

        return await self.database.run(get)

    async def save(self, batch_id: str, status: str, body: bytes, *, unless: Iterable[str] = ()) -> bool:
        """Write the batch's new `status` and `body`; False (nothing written) when its status in
        the store is one of `unless` (a cancel that came first, from this server or another)."""
        refused = tuple(unless)

        def save(connection: Connection) -> bool:
            where = [batches.c.id == batch_id]
            if refused:
                where.append(batches.c.status.not_in(refused))
            result = connection.execute(update(batches).where(and_(*where)).values(status=status, body=body))
            return result.rowcount > 0

        return await self.database.run(save)

    async def claim(self, batch_id: str, runner: str, seconds: float) -> bool:
        """Hold the batch for `runner` for `seconds` from now (the database's clock, so servers
        whose clocks differ agree on when a lease ends); False while another runner's lease on it
        lasts. Claiming again renews."""
        now = self.database.clock()

        def claim(connection: Connection) -> bool:
            free = or_(batches.c.lease_owner.is_(None), batches.c.lease_owner == runner, batches.c.lease_until < now)
            statement = (
                update(batches)
                .where(batches.c.id == batch_id, free)
                .values(lease_owner=runner, lease_until=now + seconds)
                .returning(batches.c.id)
            )
            return connection.execute(statement).first() is not None

        return await self.database.run(claim)

    async def status(self, batch_id: str) -> str | None:
        def status(connection: Connection) -> str | None:
            return connection.execute(select(batches.c.status).where(batches.c.id == batch_id)).scalar()

        return await self.database.run(status)

    async def unfinished(self, statuses: Iterable[str]) -> list[BatchRow]:
        """Every owner's batches in one of `statuses`, oldest first (to resume at start)."""
        wanted = tuple(statuses)

        def unfinished(connection: Connection) -> list[BatchRow]:
            rows = connection.execute(
                select(batches.c.id, batches.c.owner, batches.c.body)
                .where(batches.c.status.in_(wanted))
                .order_by(batches.c.seq)
            ).all()
            return [BatchRow(row.id, row.owner, bytes(row.body)) for row in rows]

        return await self.database.run(unfinished)

    async def page(self, owner: str, *, limit: int, after: str | None) -> tuple[list[BatchRow], bool]:
        """`owner`'s batches, newest first, those after the batch `after` (a cursor), at most
        `limit`; and whether more follow."""

        def page(connection: Connection) -> tuple[list[BatchRow], bool]:
            where = [batches.c.owner == owner]
            key = tuple_(batches.c.seq, batches.c.id)
            if after is not None:
                cursor = connection.execute(
                    select(batches.c.seq, batches.c.id).where(batches.c.owner == owner, batches.c.id == after)
                ).first()
                if cursor is None:
                    return [], False
                where.append(key < tuple_(cursor.seq, cursor.id))
            rows = connection.execute(
                select(batches.c.id, batches.c.owner, batches.c.body)
                .where(and_(*where))
                .order_by(batches.c.seq.desc(), batches.c.id.desc())
                .limit(limit + 1)
            ).all()
            return [BatchRow(row.id, row.owner, bytes(row.body)) for row in rows[:limit]], len(rows) > limit

        return await self.database.run(page)

    async def answer(self, batch_id: str, line: int, ok: bool, output: bytes) -> bool:
        """Record line `line`'s answer; False when it was answered already (nothing written: the
        primary key decides, so two servers answering one line at once keep the first)."""
        return await self.answer_many(batch_id, [(line, ok, output)]) == 1

    async def answer_many(self, batch_id: str, answers: list[tuple[int, bool, bytes]]) -> int:
        """Record each (line, ok, output) in one transaction (one disk sync for thousands of lines
        cancelled at once); returns how many were not answered before."""

        def answer(connection: Connection) -> int:
            written = 0
            for line, ok, output in answers:
                statement = (
                    self.database.insert(batch_lines)
                    .values(batch_id=batch_id, line=line, ok=ok, output=output)
                    .on_conflict_do_nothing(index_elements=["batch_id", "line"])
                    .returning(batch_lines.c.line)
                )
                written += connection.execute(statement).first() is not None
            return written

        return await self.database.run(answer) if answers else 0

    async def answered(self, batch_id: str) -> set[int]:
        """The lines of the batch already answered."""

        def answered(connection: Connection) -> set[int]:
            rows = connection.execute(select(batch_lines.c.line).where(batch_lines.c.batch_id == batch_id))
            return {int(row.line) for row in rows}

        return await self.database.run(answered)

    async def counts(self, batch_ids: list[str]) -> dict[str, LineCounts]:
        """Each batch's answered lines, completed (output file) and failed (error file)."""

        def counts(connection: Connection) -> dict[str, LineCounts]:
            rows = connection.execute(
                select(batch_lines.c.batch_id, batch_lines.c.ok, func.count())
                .where(batch_lines.c.batch_id.in_(batch_ids))
                .group_by(batch_lines.c.batch_id, batch_lines.c.ok)
            ).all()
            found: dict[str, dict[bool, int]] = {}
            for batch_id, ok, count in rows:
                found.setdefault(batch_id, {})[bool(ok)] = int(count)
            return {key: LineCounts(value.get(True, 0), value.get(False, 0)) for key, value in found.items()}

        return await self.database.run(counts) if batch_ids else {}

    async def outputs(self, batch_id: str) -> list[tuple[int, bool, bytes]]:
        """Every answered line of the batch, in the input's order: (line, ok, output)."""

        def outputs(connection: Connection) -> list[tuple[int, bool, bytes]]:
            rows = connection.execute(
                select(batch_lines.c.line, batch_lines.c.ok, batch_lines.c.output)
                .where(batch_lines.c.batch_id == batch_id)
                .order_by(batch_lines.c.line)
            ).all()
            return [(int(row.line), bool(row.ok), bytes(row.output)) for row in rows]

        return await self.database.run(outputs)
