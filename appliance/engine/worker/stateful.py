"""The stateful engine: one request at a time through OpenVINO GenAI's LLMPipeline / VLMPipeline.

NPU runs only this pipeline: static shapes (MAX_PROMPT_LEN, MIN_RESPONSE_LEN), one sequence, no
continuous batching. On CPU and GPU the same pipeline runs with `ATTENTION_BACKEND=SDPA`, which is
how the tests exercise it. Requests wait in a FIFO queue and run one after the other:

- the main thread takes commands: a `Submit` is prepared and checked at once (`Accepted` or
  `Rejected` while another request generates), then queued; `Cancel` drops a queued request or
  stops the running one at its next token; tokenize/detokenize are answered immediately;
- the generation thread calls `generate()` (which releases the GIL) for each queued request; its
  streamer turns every new token into `Delta` events and ends the request when the client
  cancelled or a stop string appeared. OpenVINO GenAI 2026.4 calls the streamer from a thread of
  its own, beside inference: a streamer sleeping 2 ms per token did not slow a 28 ms/token model;
- the main thread sends `Stats` every 0.5 s even while `generate()` runs, so they carry how long
  the running request has waited for a token (`stalled_seconds`): the server's hang watchdog
  judges from that, not from silence.

Stop strings are matched here rather than by the pipeline: its streamer never sees the tokens of
a stop string it matched (measured on 2026.4), and VLMPipeline returns text only, not those ids.
Per-token log probabilities and several sequences per request are not available from this
pipeline (the OpenAI routes refuse them before a request gets here; LMI token objects show null).
"""

from __future__ import annotations

import logging
import math
import os
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import openvino_genai

from appliance.engine.messages import (
    Batch,
    Cancel,
    Detokenize,
    EngineEvent,
    Rejected,
    Shutdown,
    Stats,
    Submit,
    Tokenize,
    encoder,
)
from appliance.engine.worker.base import STATS_INTERVAL_S, Engine, accepted
from appliance.engine.worker.inbox import Inbox
from appliance.engine.worker.outbox import Outbox
from appliance.engine.worker.outputs import RequestOutputs
from appliance.engine.worker.pipelines import load_stateful_pipeline
from appliance.engine.worker.preparer import PreparedSubmit, reason
from appliance.engine.worker.vlm import image_tensors
from appliance.graphfiles import Graph

__all__ = ["StatefulEngine"]

log = logging.getLogger("appliance.engine")

_STATUS = openvino_genai.StreamingStatus
_FINISH = openvino_genai.GenerationFinishReason


@dataclass
class _Job:
    request_id: int
    prepared: PreparedSubmit
    outputs: RequestOutputs
    final_ids: set[int]
    """End-of-sequence and stop token ids: generation may end on them."""
    cancelled: bool = False
    generated: int = 0
    held: list[int] = field(default_factory=list)
    """An end-of-sequence or stop token, kept until it is known whether generation ends on it."""
    stopped_by_string: bool = False


@dataclass
class _Output:
    """What `RequestOutputs.read` takes, shaped like the pipeline's GenerationOutput. This
    pipeline computes no log probabilities: NaN stands for each (the OpenAI routes refuse
    `logprobs` on stateful graphs; LMI token objects show null)."""

    generated_ids: list[int]
    finish_reason: Any = _FINISH.NONE

    @property
    def generated_log_probs(self) -> list[float]:
        return [math.nan] * len(self.generated_ids)


class StatefulEngine(Engine):
    """A stateful pipeline serving its FIFO queue of requests, one at a time."""

    def __init__(self, graph: Graph) -> None:
        super().__init__(graph, load_stateful_pipeline(graph))
        self._jobs: dict[int, _Job] = {}
        """Accepted and not finished: the running one and the queued ones."""
        self._queue: deque[_Job] = deque()
        self._wake = threading.Condition()
        self._running: _Job | None = None
        self._last_progress = time.monotonic()
        self._tokens = 0
        self._send_lock = threading.Lock()
        self._conn: Connection | None = None
        self._outbox = Outbox(graph.stream_interval_ms / 1000)
        """The generation thread's deltas on their way out (the main thread's events go at once)."""

    # -- main thread: commands --------------------------------------------------------------

    def run(self, conn: Connection, inbox: Inbox) -> None:
        self._conn = conn
        threading.Thread(target=self._generate_forever, name="generate", daemon=True).start()
        last_stats = 0.0
        while True:
            try:
                command = inbox.get(timeout=STATS_INTERVAL_S)
            except queue.Empty:
                command = None
            if isinstance(command, Shutdown):
                return
            if command is not None:
                event = self._handle(command)
                if event is not None:
                    self._send(Batch(events=[event]))
            now = time.monotonic()
            if now - last_stats >= STATS_INTERVAL_S:
                last_stats = now
                self._send(self._stats())

    def _handle(self, command: object) -> EngineEvent | None:
        if isinstance(command, Submit):
            return self._submit(command)
        if isinstance(command, Cancel):
            with self._wake:
                job = self._jobs.get(command.request_id)
                if job is None:
                    return None
                job.cancelled = True  # the running job stops at its next token
                if job is not self._running:
                    self._queue.remove(job)
                    del self._jobs[job.request_id]
            return None
        if isinstance(command, Tokenize | Detokenize):
            return self.requests.tokenize(command)
        return None

    def _submit(self, submit: Submit) -> EngineEvent:
        prepared = self.requests.prepare(submit, streamed_stop_strings=True)
        if isinstance(prepared, Rejected):
            return prepared
        outputs = self.request_outputs(submit.params, match_stop_strings=True)
        final_ids = {self.requests.eos_token_id, *submit.params.stop_token_ids}
        job = _Job(request_id=submit.request_id, prepared=prepared, outputs=outputs, final_ids=final_ids)
        with self._wake:
            self._jobs[job.request_id] = job
            self._queue.append(job)
            self._wake.notify()
        return accepted(submit.request_id, prepared)

    def _stats(self) -> Stats:
        job = self._running
        used = job.prepared.prompt_tokens + job.generated if job is not None else 0
        return Stats(
            running=len(self._jobs),
            waiting=len(self._jobs) - (1 if job is not None else 0),
            # The running request's share of the context it may fill (its whole KV cache).
            kv_cache_usage=min(1.0, used / self.max_context),
            steps=self._tokens,
            # The server judges a hang from this (`EngineClient.silent_seconds`).
            stalled_seconds=time.monotonic() - self._last_progress if job is not None else 0.0,
        )

    def _send(self, message: object) -> None:
        frame = encoder.encode(message)
        with self._send_lock:
            self._conn.send_bytes(frame)

    # -- generation thread ------------------------------------------------------------------

    def _generate_forever(self) -> None:
        try:
            while True:
                with self._wake:
                    while not self._queue:
                        self._wake.wait()
                    job = self._queue.popleft()
                    self._running = job
                    self._last_progress = time.monotonic()
                self._outbox.add(self._generate(job))
                with self._wake:
                    self._running = None
                    self._jobs.pop(job.request_id, None)
                self._send(Batch(events=self._outbox.take(time.monotonic(), flush=True)))
        except BaseException:
            # Without this thread nothing would generate again: let the server restart the engine
            # (it ends the requests in flight with an error).
            log.exception("engine %s: the generation thread failed; exiting", self.graph.name)
            os._exit(3)

    def _generate(self, job: _Job) -> list[EngineEvent]:
        prepared = job.prepared
        streamer = _Streamer(self, job)
        try:
            if prepared.vision is not None:
                result = self.pipe.generate(
                    prepared.vision.prompt,
                    images=image_tensors(prepared.vision.images),
                    generation_config=prepared.config,
                    streamer=streamer,
                )
            else:
                result = self.pipe.generate(prepared.input_ids, prepared.config, streamer)
        except Exception as exc:
            log.error("engine %s: generate() failed: %s", self.graph.name, reason(exc))
            return job.outputs.finish(
                job.request_id, prepared.prompt_tokens, failure="error", error=f"the engine failed: {reason(exc)}"
            )
        if streamer.error is not None:
            return job.outputs.finish(
                job.request_id, prepared.prompt_tokens, failure="error", error=f"the engine failed: {streamer.error}"
            )
        finish_reason = _FINISH.STOP if job.stopped_by_string else result.finish_reasons[0]
        job.outputs.read({0: _Output(job.held, finish_reason=finish_reason)})
        prompt_tokens = prepared.prompt_tokens
        if prepared.vision is not None:
            prompt_tokens = self.requests.vision.final_prompt_tokens(lambda: result.perf_metrics, prompt_tokens)
        return job.outputs.finish(job.request_id, prompt_tokens, failure="cancelled" if job.cancelled else None)

    def on_tokens(self, job: _Job, ids: list[int]) -> openvino_genai.StreamingStatus:
        """The streamer's new tokens; whether generation goes on (not once cancelled, or past a
        stop string)."""
        self._last_progress = time.monotonic()
        self._tokens += len(ids)
        job.generated += len(ids)
        if job.cancelled:
            return _STATUS.CANCEL
        if job.stopped_by_string:  # tokens the pipeline made before it saw our STOP
            return _STATUS.STOP
        # A final token (end of sequence, a stop token id) leaves only once generation went on
        # past it (ignore_eos, min_tokens): when it ends on it, `finish` leaves it out of the text.
        ids, job.held = job.held + ids, []
        if ids and ids[-1] in job.final_ids:
            ids, job.held = ids[:-1], ids[-1:]
        job.outputs.read({0: _Output(ids)})
        if job.outputs.stop_string_matched():
            job.stopped_by_string = True
            return _STATUS.STOP
        self._outbox.add(job.outputs.deltas(job.request_id))
        if due := self._outbox.take(time.monotonic()):
            self._send(Batch(events=due))
        return _STATUS.RUNNING


class _Streamer(openvino_genai.StreamerBase):
    """Feeds the pipeline's tokens to the engine; its answer stops or continues generation."""

    def __init__(self, engine: StatefulEngine, job: _Job) -> None:
        super().__init__()
        self._engine = engine
        self._job = job
        self.error: str | None = None

    def write(self, token: int | list[int]) -> openvino_genai.StreamingStatus:
        ids = list(token) if isinstance(token, list) else [token]
        try:
            return self._engine.on_tokens(self._job, ids)
        except Exception as exc:  # an exception must not unwind through the C++ pipeline
            self.error = reason(exc)
            return _STATUS.CANCEL

    def end(self) -> None:
        pass
