"""What the one-at-a-time engines share: a FIFO queue served by a thread of its own, and a pipeline
rebuilt after any call of it that failed.

The stateful (`stateful.py`), speech-to-text (`speech.py`) and text-to-speech (`tts.py`) engines
each drive a pipeline whose `generate()` takes one request at a time and releases the GIL. So:

- the main thread takes commands (`handle`): a request is checked at once and queued, or
  answered `Rejected`; `Cancel` drops a queued request, or marks the running one, which its
  engine stops at its next checkpoint (a streamer's next token) or drops when it ends;
- the serving thread takes the queue in order and runs each request (`serve`), then sends what
  it answered;
- the main thread sends `Stats` every 0.5 s even while `generate()` runs: `stalled_seconds` is how
  long the running request has gone without progress (`progressed`), which the server's hang
  watchdog judges.

**A failed call leaves a dirty pipeline.** After `WhisperPipeline.generate` raised on a prompt over
its text window, the next caller, another API key with other audio, got back the first caller's
prompt as its transcript (openvino-genai 2026.4.1: the decoder keeps its state). So an engine
calls `pipeline_failed` whenever a call raised or was cut short by an error, and the pipeline is
built anew before the next request runs: a load of the same files (about 1 s for whisper tiny,
seconds for a small LLM), while the queue waits. If the rebuild fails, the engine exits and the
server restarts it, ending the requests in flight with an error.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Generic, Protocol, TypeVar

from appliance.engine.messages import Batch, Cancel, EngineEvent, Ready, Shutdown, Stats, encoder
from appliance.engine.worker.base import STATS_INTERVAL_S
from appliance.engine.worker.inbox import Inbox
from appliance.graphfiles import Graph

__all__ = ["FifoEngine", "FifoJob"]

log = logging.getLogger("appliance.engine")


class FifoJob(Protocol):
    """A queued request: its id, and whether its client has cancelled it."""

    request_id: int
    cancelled: bool


J = TypeVar("J", bound=FifoJob)


class FifoEngine(ABC, Generic[J]):
    """A pipeline serving its FIFO queue of requests, one at a time (see the module's docstring)."""

    thread_name = "serve"
    """The serving thread's name (in logs and py-spy dumps)."""
    max_context: int
    """What `Ready` reports (each engine sets it)."""

    def __init__(self, graph: Graph, load: Callable[[], Any]) -> None:
        self.graph = graph
        self._load = load
        self.pipe = load()
        self._jobs: dict[int, J] = {}
        """Accepted and not finished: the running one and the queued ones."""
        self._queue: deque[J] = deque()
        self._wake = threading.Condition()
        self.running: J | None = None
        self._last_progress = time.monotonic()
        self._progress = 0
        self._dirty = False
        self.rebuilds = 0
        """Pipelines built anew after a failed call (for the tests and the log)."""
        self._send_lock = threading.Lock()
        self._conn: Connection | None = None

    # -- what each engine says ------------------------------------------------------------

    @abstractmethod
    def handle(self, command: object) -> EngineEvent | None:
        """A command other than `Cancel` and `Shutdown`: queue it (`enqueue`) or answer it."""

    @abstractmethod
    def serve(self, job: J) -> list[EngineEvent]:
        """Run `job` on the serving thread; the events that answer it (none once cancelled, if
        the server has forgotten it). Calls `pipeline_failed` when the pipeline raised."""

    def ready(self, load_seconds: float) -> Ready:
        """What the server hears once the pipeline is loaded."""
        return Ready(max_context=self.max_context, load_seconds=load_seconds)

    def kv_cache_usage(self) -> float:
        """The share of the engine's cache the running request holds (for `Stats`)."""
        return 0.0

    # -- main thread: commands --------------------------------------------------------------

    def run(self, conn: Connection, inbox: Inbox) -> None:
        """Serve the commands from `inbox`, sending events on `conn`, until `Shutdown`."""
        self._conn = conn
        threading.Thread(target=self._serve_forever, name=self.thread_name, daemon=True).start()
        last_stats = 0.0
        while True:
            try:
                command = inbox.get(timeout=STATS_INTERVAL_S)
            except queue.Empty:
                command = None
            if isinstance(command, Shutdown):
                return
            if isinstance(command, Cancel):
                self._cancel(command.request_id)
            elif command is not None:
                event = self.handle(command)
                if event is not None:
                    self.send(Batch(events=[event]))
            now = time.monotonic()
            if now - last_stats >= STATS_INTERVAL_S:
                last_stats = now
                self.send(self._stats())

    def enqueue(self, job: J) -> None:
        """Put `job` at the back of the queue."""
        with self._wake:
            self._jobs[job.request_id] = job
            self._queue.append(job)
            self._wake.notify()

    def _cancel(self, request_id: int) -> None:
        with self._wake:
            job = self._jobs.get(request_id)
            if job is None:
                return
            job.cancelled = True  # the running job stops at its next checkpoint, or is dropped at its end
            if job is not self.running:
                self._queue.remove(job)
                del self._jobs[request_id]

    def _stats(self) -> Stats:
        running = self.running is not None
        return Stats(
            running=len(self._jobs),
            waiting=len(self._jobs) - (1 if running else 0),
            kv_cache_usage=self.kv_cache_usage() if running else 0.0,
            steps=self._progress,
            # The server judges a hang from this (`EngineClient.silent_seconds`).
            stalled_seconds=time.monotonic() - self._last_progress if running else 0.0,
        )

    def send(self, message: object) -> None:
        """Send one message to the server (from either thread)."""
        frame = encoder.encode(message)
        with self._send_lock:
            self._conn.send_bytes(frame)

    # -- serving thread ---------------------------------------------------------------------

    def progressed(self, steps: int = 1) -> None:
        """The running request made progress (a token, a finished request)."""
        self._last_progress = time.monotonic()
        self._progress += steps

    def pipeline_failed(self) -> None:
        """A call of the pipeline raised: build it anew before the next request."""
        self._dirty = True

    def _serve_forever(self) -> None:
        try:
            while True:
                with self._wake:
                    while not self._queue:
                        self._wake.wait()
                    job = self._queue.popleft()
                    self.running = job
                    self._last_progress = time.monotonic()
                events = self.serve(job)
                with self._wake:
                    self.running = None
                    self._jobs.pop(job.request_id, None)
                if events:
                    self.send(Batch(events=events))
                if self._dirty:
                    self._rebuild()
        except BaseException:
            # Without this thread nothing would be served again: let the server restart the engine
            # (it ends the requests in flight with an error).
            log.exception("engine %s: the %s thread failed; exiting", self.graph.name, self.thread_name)
            os._exit(3)

    def _rebuild(self) -> None:
        started = time.monotonic()
        self.pipe = None  # the old pipeline's memory goes before the new one's comes
        self.pipe = self._load()
        self._dirty = False
        self.rebuilds += 1
        log.warning(
            "engine %s: pipeline rebuilt after a failed call, in %.1f s (a failed call may leave state "
            "behind; rebuild %d)",
            self.graph.name,
            time.monotonic() - started,
            self.rebuilds,
        )
