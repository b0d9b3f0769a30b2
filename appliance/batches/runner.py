"""`BatchRunner`: the batches of every API key, created, read, cancelled, and run in tasks of the
server's event loop; those unfinished when the server stopped (or was killed) resume at start."""

from __future__ import annotations

import asyncio
import logging
import time
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


class BatchRunner:
    """Batches over `entry`, kept in `store`; `start()` resumes, `stop()` leaves the rest for the next start."""

    def __init__(self, entry: Entry, store: Store, *, clock: Callable[[], float] = time.time) -> None:
        self.entry = entry
        self.book = BatchBook(store.batches)
        self.files = store.files
        self.clock = clock
        self._runs: dict[str, tuple[BatchRun, asyncio.Task[None]]] = {}
        self._resuming: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Resume, in the background, every batch the store holds unfinished (the server serves
        meanwhile; a store that cannot be read is logged, and the batches wait for the next start)."""
        self._resuming = asyncio.get_running_loop().create_task(self._resume(), name="batches resumed")

    async def _resume(self) -> None:
        try:
            unfinished = await self.book.unfinished()
        except Exception:
            log.exception("batches: the store could not be read; unfinished batches resume at the next start")
            return
        for owner, batch in unfinished:
            if batch.id not in self._runs:
                log.info("batch %s: resuming (%s)", batch.id, batch.status)
                self._spawn(owner, batch)

    async def stop(self) -> None:
        """Stop every run where it stands (the store keeps what was answered)."""
        tasks = [task for _, task in self._runs.values()]
        if self._resuming is not None:
            tasks.append(self._resuming)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def idle(self) -> None:
        """Wait until no batch runs (tests, tools)."""
        while self._runs:
            await asyncio.gather(*(task for _, task in list(self._runs.values())), return_exceptions=True)

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
        run = BatchRun(self.entry, self.book, self.files, owner, batch, self.clock)
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
