"""Batch objects kept in the store (`store.BatchRows`): encoded once here, their request counts
read from the lines answered so far."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from appliance.protocol.batches import Batch, BatchList, BatchRequestCounts
from appliance.store import BatchRows
from appliance.store.batches import BatchRow

__all__ = ["UNFINISHED", "BatchBook"]

UNFINISHED = ("validating", "in_progress", "finalizing", "cancelling")
"""Statuses a batch leaves only by running: resumed at start."""

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Batch)


class BatchBook:
    """`owner`'s batches by id; every batch read carries its current request counts."""

    def __init__(self, rows: BatchRows) -> None:
        self.rows = rows

    async def create(self, owner: str, batch: Batch) -> None:
        await self.rows.create(batch.id, owner, batch.status, _encoder.encode(batch))

    async def save(self, batch: Batch, *, unless: Iterable[str] = ()) -> bool:
        """Write `batch`; False when its status in the store is one of `unless` (see `BatchRows.save`)."""
        return await self.rows.save(batch.id, batch.status, _encoder.encode(batch), unless=unless)

    async def get(self, owner: str, batch_id: str) -> Batch | None:
        row = await self.rows.get(owner, batch_id)
        return (await self._counted([row]))[0] if row is not None else None

    async def status(self, batch_id: str) -> str | None:
        return await self.rows.status(batch_id)

    async def page(self, owner: str, *, limit: int, after: str | None) -> BatchList:
        rows, more = await self.rows.page(owner, limit=limit, after=after)
        found = await self._counted(rows)
        return BatchList(
            data=found,
            first_id=found[0].id if found else None,
            last_id=found[-1].id if found else None,
            has_more=more,
        )

    async def unfinished(self) -> list[tuple[str, Batch]]:
        """Every owner's batches that were running when the server stopped: (owner, batch)."""
        return [(row.owner, _decoder.decode(row.body)) for row in await self.rows.unfinished(UNFINISHED)]

    async def _counted(self, rows: list[BatchRow]) -> list[Batch]:
        batches = [_decoder.decode(row.body) for row in rows]
        counts = await self.rows.counts([batch.id for batch in batches if batch.status != "validating"])
        for batch in batches:
            if batch.id in counts:
                done = counts[batch.id]
                total = batch.request_counts.total
                batch.request_counts = BatchRequestCounts(total=total, completed=done.completed, failed=done.failed)
        return batches
