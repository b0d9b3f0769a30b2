"""`BatchRunner`: the batches of every API key, created, read, cancelled, and run in tasks of the
server's event loop; those unfinished when the server stopped (or was killed) resume at start.

On a store servers share (PostgreSQL), each batch runs on one server at a time: a server holds a
lease on the batch it runs and renews it every second; the others look every fifteen seconds for
unfinished batches whose lease ran out (a server that died) and take them over, resuming where
the store says the batch stands. Every time here (a batch's `created_at`, `expires_at`, its lease)
is the store's clock (`Database.clock`), so the servers need not agree on theirs."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable

from appliance.batches.book import BatchBook
from appliance.batches.run import BatchRun
from appliance.entry import Entry
from appliance.errors import InvalidRequest, NotFound
from appliance.protocol.batches import Batch, BatchCreateRequest, BatchList
from appliance.store import Store

__all__ = ["COMPLETION_WINDOW_SECONDS", "BatchRunner"]

log = logging.getLogger("appliance.batches")

COMPLETION_WINDOW_SECONDS = 24 * 3600
"""`completion_window: "24h"`, the one OpenAI accepts."""
LEASE_SECONDS = 30.0
"""How long a batch stays a server's on a shared store without it renewing (each second while it runs)."""


class BatchRunner:
    """Batches over `entry`, kept in `store`; `start()` resumes, `stop()` leaves the rest for the next start."""

    def __init__(self, entry: Entry, store: Store, *, clock: Callable[[], float] | None = None) -> None:
        """`clock`: Unix seconds, by default the store's (`Database.clock`: on PostgreSQL the
        database's, so a batch's window is the same 24 hours to every server sharing it)."""
        self.entry = entry
        self.book = BatchBook(store.batches)
        self.files = store.files
        self.clock = clock or store.database.clock
        self._runs: dict[str, tuple[BatchRun, asyncio.Task[None]]] = {}
        self._resuming: asyncio.Task[None] | None = None
        self.runner_id = uuid.uuid4().hex
        self._shared = store.database.dialect == "postgresql"
        """Other servers may run this store's batches: each batch is run under a lease."""

    def start(self) -> None:
        """Resume, in the background, every batch the store holds unfinished (the server serves
        meanwhile; a store that cannot be read is logged, and the batches wait for the next start)."""
        self._resuming = asyncio.get_running_loop().create_task(self._resume(), name="batches resumed")

    async def _resume(self) -> None:
        # On a shared store, again and again: a batch whose server died is taken over once its
        # lease has run out.
        while True:
            try:
                for owner, batch in await self.book.unfinished():
                    if batch.id not in self._runs and await self._claim(batch.id):
                        log.info("batch %s: resuming (%s)", batch.id, batch.status)
                        self._spawn(owner, batch)
            except Exception:
                log.exception("batches: the store could not be read; unfinished batches wait")
            if not self._shared:
                return
            await asyncio.sleep(LEASE_SECONDS / 2)

    async def _claim(self, batch_id: str) -> bool:
        """Hold (or keep holding) the batch for this server; always, on a store no other shares."""
        return not self._shared or await self.book.rows.claim(batch_id, self.runner_id, LEASE_SECONDS)

    async def stop(self) -> None:
        """Stop every run where it stands (the store keeps what was answered)."""
        tasks = [task for _, task in self._runs.values()]
        if self._resuming is not None:
            tasks.append(self._resuming)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def create(self, owner: str, request: BatchCreateRequest) -> Batch:
        """A new batch of `owner` over its input file, `validating`; it runs in the background."""
        found = await self.files.get(owner, request.input_file_id)
        if found is None:
            raise NotFound(
                f"No file with id '{request.input_file_id}' (it was not uploaded with this API key, or was deleted).",
                param="input_file_id",
                code="file_not_found",
            )
        if found.purpose != "batch":
            raise InvalidRequest(
                f"The input file's purpose is '{found.purpose}'; a batch reads a file uploaded with purpose 'batch'.",
                param="input_file_id",
                code="invalid_file_purpose",
            )
        now = int(self.clock())
        batch = Batch(
            id=f"batch_{uuid.uuid4().hex}",
            endpoint=request.endpoint,
            input_file_id=request.input_file_id,
            completion_window=request.completion_window,
            status="validating",
            created_at=now,
            expires_at=now + COMPLETION_WINDOW_SECONDS,
            metadata=request.metadata,
        )
        await self.book.create(owner, batch)
        await self._claim(batch.id)  # a new batch is nobody else's
        self._spawn(owner, batch)
        return batch

    async def get(self, owner: str, batch_id: str) -> Batch:
        found = await self.book.get(owner, batch_id)
        if found is None:
            raise NotFound(
                f"No batch with id '{batch_id}' (it was not created with this API key).",
                param="batch_id",
                code="batch_not_found",
            )
        return found

    async def page(self, owner: str, *, limit: int, after: str | None) -> BatchList:
        return await self.book.page(owner, limit=limit, after=after)

    async def cancel(self, owner: str, batch_id: str) -> Batch:
        """Cancel a `validating` or `in_progress` batch (it goes through `cancelling`); cancelling
        one already cancelling changes nothing; any other is a 400."""
        batch = await self.get(owner, batch_id)
        if batch.status == "cancelling":
            return batch
        if batch.status not in ("validating", "in_progress"):
            raise InvalidRequest(
                f"The batch is {batch.status}; only a validating or in_progress batch can be cancelled.",
                param="batch_id",
                code="batch_not_cancellable",
            )
        running = self._runs.get(batch_id)
        if running is not None:
            await running[0].cancel()
        else:  # run by another server sharing the store: it sees the status within a second
            batch.status, batch.cancelling_at = "cancelling", int(self.clock())
            await self.book.save(batch)
        return await self.get(owner, batch_id)

    def _spawn(self, owner: str, batch: Batch) -> None:
        run = BatchRun(self.entry, self.book, self.files, owner, batch, self.clock, renew=lambda: self._claim(batch.id))
        task = asyncio.get_running_loop().create_task(self._guarded(run), name=f"batch {batch.id}")
        self._runs[batch.id] = (run, task)
        task.add_done_callback(lambda _: self._runs.pop(batch.id, None))

    async def _guarded(self, run: BatchRun) -> None:
        try:
            await run.run()
        except asyncio.CancelledError:
            raise
        except Exception:
            # A store that went away, or a fault of ours: the batch stays as it stands, resumed
            # at the next start.
            log.exception("batch %s: stopped by an error; it resumes at the next start", run.batch.id)
