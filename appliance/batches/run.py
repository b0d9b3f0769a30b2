"""One batch run from where it stands to its end: validated, its lines answered, finalized.

`BatchRun.run()` takes a batch in any unfinished status (`book.UNFINISHED`), so the same code
starts a new batch and resumes one a restart (or a `kill -9`) interrupted:

- `validating`: every line read and checked (`lines.read_lines`); any refused line fails the
  batch (`failed`, its `errors` and an error file naming each line), else `in_progress`.
- `in_progress`: the lines not answered yet (the store knows which: each answer is written as its
  line finishes) run, per model as many at once as its engine's batch lane gives turns
  (`engine.host.batch_lane`: only in the capacity live requests leave). A "not now" answer (503,
  429) is tried again after a pause. A cancel, or the completion window passing, stops new lines;
  those running finish.
- `finalizing`: lines never run are answered `batch_cancelled` or `batch_expired`; the output
  file (200 answers) and the error file (the others) are written from the store, in input order,
  and the batch ends `completed`, `cancelled` or `expired`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable

import msgspec

from appliance.batches.answers import RETRYABLE, Answer, answer_line, unrun_line
from appliance.batches.book import BatchBook
from appliance.batches.lines import Line, read_lines
from appliance.engine.host.batch_lane import BatchLane, Preempted
from appliance.entry import Entry
from appliance.errors import ApplianceError
from appliance.protocol.batches import Batch, BatchError, BatchErrors
from appliance.store import FileRows

__all__ = ["BatchRun"]

log = logging.getLogger("appliance.batches")

LISTED_ERRORS = 100
"""Of a failed validation's refusals in the batch's `errors` (the error file holds them all)."""
_WATCH_SECONDS = 1.0
_RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0)
_RETRIES = 120
"""Of one line answered "not now" (about ten minutes), before that answer is its answer."""
_STOPPED_BY_OTHERS = ("cancelling", "cancelled")


class BatchRun:
    """The run of one batch of `owner`; `cancel()` from the routes, `run()` as its task."""

    def __init__(
        self,
        entry: Entry,
        book: BatchBook,
        files: FileRows,
        owner: str,
        batch: Batch,
        clock: Callable[[], float],
        renew: Callable[[], Awaitable[bool]],
    ) -> None:
        """`renew()`: keep this server's lease on the batch (a shared store)."""
        self.entry = entry
        self.book = book
        self.files = files
        self.owner = owner
        self.batch = batch
        self.clock = clock
        self.renew = renew
        self.stopping: str | None = None
        """"cancelled" or "expired" once no new line may start."""

    def now(self) -> int:
        return int(self.clock())

    async def cancel(self) -> None:
        """Stop taking lines, and end the batch `cancelled` once the running ones finish."""
        if self.batch.status in ("validating", "in_progress"):
            self.batch.status, self.batch.cancelling_at = "cancelling", self.now()
            await self.book.save(self.batch)
        self.stopping = "cancelled"

    async def run(self) -> None:
        batch = self.batch
        if batch.status == "cancelling":
            self.stopping = "cancelled"
        content = await self.files.content(self.owner, batch.input_file_id)
        if content is None:
            await self._fail([BatchError(code="input_file_missing", message="The input file was deleted.")])
            return
        check = batch.status == "validating"  # on a resume, a model gone since fails its lines instead
        lines, errors = await asyncio.to_thread(read_lines, content, batch.endpoint, self.entry, check_models=check)
        if batch.status == "validating":
            if self.stopping is None and errors:
                await self._fail(errors)
                return
            batch.request_counts.total = len(lines)
            if self.stopping is None:
                batch.status, batch.in_progress_at = "in_progress", self.now()
                if not await self.book.save(batch, unless=_STOPPED_BY_OTHERS):
                    self.stopping = "cancelled"
        if batch.status == "in_progress":
            await self._answer_lines(lines)
        await self._finalize(lines)

    async def _fail(self, errors: list[BatchError]) -> None:
        batch = self.batch
        error_file = b"".join(_error_line(error) for error in errors)
        record = await self.files.create(
            self.owner, purpose="batch_output", filename=f"{batch.id}_errors.jsonl", content=error_file, bounded=False
        )
        batch.status, batch.failed_at, batch.error_file_id = "failed", self.now(), record.id
        batch.errors = BatchErrors(data=errors[:LISTED_ERRORS])
        await self.book.save(batch)

    async def _answer_lines(self, lines: list[Line]) -> None:
        answered = await self.book.rows.answered(self.batch.id)
        by_model: dict[str, deque[Line]] = defaultdict(deque)
        for line in lines:
            if line.index not in answered:
                by_model[line.request.model].append(line)
        watcher = asyncio.create_task(self._watch())
        try:
            workers = []
            for model, queue in by_model.items():
                lane = self._lane(model)
                workers += [self._work(queue, lane) for _ in range(lane.slots if lane else 1)]
            await asyncio.gather(*workers)
        finally:
            watcher.cancel()

    def _lane(self, model: str) -> BatchLane | None:
        """The model's batch lane; None for a model not served (its lines are refused at once)."""
        try:
            return self.entry.engine(model).batch_lane
        except ApplianceError:
            return None  # its lines are answered 404 at once, as the route would

    def _expired(self) -> bool:
        if self.batch.expires_at is not None and self.clock() >= self.batch.expires_at:
            self.stopping = self.stopping or "expired"
        return self.stopping == "expired"

    async def _work(self, queue: deque[Line], lane: BatchLane | None) -> None:
        while queue and self.stopping is None and not self._expired():
            line = queue.popleft()
            answer = await self._answer(line, lane)
            if answer is None:
                queue.appendleft(line)  # stopped while it waited: answered at finalizing
                return
            await self.book.rows.answer(self.batch.id, line.index, answer.ok, answer.output)

    async def _answer(self, line: Line, lane: BatchLane | None) -> Answer | None:
        """The line's answer; None when the batch stopped before it could run. A line preempted by
        a person's request runs again from the start; one answered "not now" after a pause."""
        attempt = 0
        while True:
            if lane is None:
                return await answer_line(self.entry, self.batch.endpoint, line, self.owner, self.batch.id)
            async with lane.turn() as turn:
                if self.stopping is not None:
                    return None
                try:
                    answer = await turn.run(
                        lambda: answer_line(self.entry, self.batch.endpoint, line, self.owner, self.batch.id)
                    )
                except Preempted:
                    continue
            if answer.status not in RETRYABLE or attempt == _RETRIES:
                return answer
            await asyncio.sleep(_RETRY_SECONDS[min(attempt, len(_RETRY_SECONDS) - 1)])
            attempt += 1

    async def _watch(self) -> None:
        """The completion window, a cancel made on another server sharing the store, the lease."""
        while self.stopping is None:
            await asyncio.sleep(_WATCH_SECONDS)
            try:
                await self.renew()
            except ApplianceError:  # the store did not answer: the lines' own writes will say so
                log.warning("batch %s: its lease could not be renewed", self.batch.id)
            if not self._expired() and await self.book.status(self.batch.id) in _STOPPED_BY_OTHERS:
                self.stopping = "cancelled"

    async def _finalize(self, lines: list[Line]) -> None:
        batch = self.batch
        final = self.stopping or "completed"
        ran = batch.in_progress_at is not None  # a batch cancelled while validating has no lines to report
        if ran and batch.status != "finalizing":
            batch.status, batch.finalizing_at = "finalizing", self.now()
            await self.book.save(batch)
        if ran and final != "completed":
            await self._answer_unrun(lines, final)
        outputs = await self.book.rows.outputs(batch.id) if ran else []
        good = [output for _, ok, output in outputs if ok]
        bad = [output for _, ok, output in outputs if not ok]
        if good:
            batch.output_file_id = await self._file(good, "output")
        if bad:
            batch.error_file_id = await self._file(bad, "errors")
        batch.status = final
        setattr(batch, f"{final}_at", self.now())
        await self.book.save(batch)
        log.info("batch %s %s: %d answered, %d failed", batch.id, final, len(good), len(bad))

    async def _answer_unrun(self, lines: list[Line], final: str) -> None:
        """Every line not answered gets its error line: the batch was cancelled or expired first."""
        if final == "cancelled":
            code, message = "batch_cancelled", "This request was not run: the batch was cancelled."
        else:
            code, message = "batch_expired", "This request could not be executed before the completion window expired."
        answered = await self.book.rows.answered(self.batch.id)
        unrun = [
            (line.index, False, unrun_line(line.custom_id, code, message))
            for line in lines
            if line.index not in answered
        ]
        await self.book.rows.answer_many(self.batch.id, unrun)

    async def _file(self, outputs: list[bytes], kind: str) -> str:
        content = b"".join(output + b"\n" for output in outputs)
        record = await self.files.create(
            self.owner, purpose="batch_output", filename=f"{self.batch.id}_{kind}.jsonl", content=content, bounded=False
        )
        return record.id


def _error_line(error: BatchError) -> bytes:
    return msgspec.json.encode(error) + b"\n"
