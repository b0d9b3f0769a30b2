"""The continuous-batching engine (LM_CB, VLM_CB graphs): every request in flight advances one
token per `step()` of a ContinuousBatchingPipeline, and each step's events leave in one `Batch`.

Stop strings are matched here, in the decoded text (`RequestOutputs`, as the stateful engine does),
and a request is stopped after the step that completed one. Measured on openvino_genai 2026.4 with
the demo models:
- on VLM_CB and with speculative decoding or prompt lookup, a stop string the pipeline matched made
  a later `step()` fail ("Cannot remove more embeds than has been generated in embeddings",
  "Cannot remove more tokens than has been generated"; with `stop: [" "]` 33-60% of sampled
  requests sent one at a time), failing every request in flight;
- on LM_CB the pipeline drops the token holding a lone-space stop string (" derived" for `" "`)
  even with include_stop_str_in_output (the only one of ~1,000 stop strings tried).
Only requests with several sequences on an LM_CB graph (n > 1, beam search) leave stop strings to
the pipeline: their sequences arrive when all have ended, so only the pipeline can end each one
at its stop string.
"""

from __future__ import annotations

import queue
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

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
from appliance.engine.worker.pipelines import load_pipeline
from appliance.engine.worker.preparer import reason
from appliance.graphfiles import Graph

__all__ = ["BatchingEngine", "open_engine"]

_STATUS = openvino_genai.GenerationStatus

COMMANDS_PER_STEP_S = 0.05
"""Time spent on waiting commands (each prompt rendered and tokenized) before the next step while
requests run: a burst of large prompts or /tokenize bodies then delays each step by about one
prompt's preparation, not by all of them."""


@dataclass
class _Active:
    handle: object
    prompt_tokens: int
    outputs: RequestOutputs
    cancelled: bool = False
    assistant_tokens: int = 0
    """Candidates proposed per step (a fixed num_assistant_tokens), 0 if not counted."""
    max_new_tokens: int = 0


class BatchingEngine(Engine):
    """A continuous-batching pipeline: every request in flight advances one token per `step()`."""

    def __init__(self, graph: Graph) -> None:
        super().__init__(graph, load_pipeline(graph))
        self.vision = self.requests.vision
        self.stop_strings_break_pipeline = graph.pipeline_kind == "VLM_CB" or graph.assisted is not None
        """Stop strings never reach this pipeline (see the module docstring)."""
        self.active: dict[int, _Active] = {}
        self.outbox = Outbox(graph.stream_interval_ms / 1000)
        self.steps = 0
        self.draft_tokens = 0
        self.accepted_tokens = 0

    # -- the loop ---------------------------------------------------------------------------

    def run(self, conn: Connection, inbox: Inbox) -> None:
        last_stats = 0.0
        while True:
            events: list[EngineEvent] = []
            idle = not self.active
            try:
                command = inbox.get(timeout=STATS_INTERVAL_S) if idle else inbox.get_nowait()
                started = time.monotonic()
                while True:
                    if isinstance(command, Shutdown):
                        return
                    self._handle(command, events)
                    if self.active and time.monotonic() - started > COMMANDS_PER_STEP_S:
                        break  # the rest wait for the next step
                    command = inbox.get_nowait()
            except queue.Empty:
                pass
            if self.active and self._step(events):
                dropped_running = self._collect(events)
                if not self.active:
                    # The scheduler frees finished and cancelled requests' KV blocks (and updates
                    # its metrics) at the start of a step: run one now, it costs nothing idle. A
                    # request dropped while running is removed by that step and counted until the
                    # next (measured): run a second.
                    self.pipe.step()
                    if dropped_running:
                        self.pipe.step()
            self.outbox.add(events)
            if due := self.outbox.take(time.monotonic(), flush=not self.active):
                conn.send_bytes(encoder.encode(Batch(events=due)))
            self._rebuild_if_failed()  # after the failed step's errors went out
            now = time.monotonic()
            if now - last_stats >= STATS_INTERVAL_S or (events and not self.active):
                last_stats = now
                conn.send_bytes(encoder.encode(self._stats()))

    def _handle(self, command: object, events: list[EngineEvent]) -> None:
        if isinstance(command, Submit):
            events.append(self._submit(command))
        elif isinstance(command, Cancel):
            active = self.active.get(command.request_id)
            if active is not None:
                active.cancelled = True
                active.handle.cancel()
        elif isinstance(command, Tokenize | Detokenize):
            events.append(self.requests.tokenize(command))

    def _rebuild_if_failed(self) -> None:
        if self.pipe is None:
            self.pipe = load_pipeline(self.graph)

    def _submit(self, submit: Submit) -> EngineEvent:
        self._rebuild_if_failed()
        params = submit.params
        match_stop_strings = self.stop_strings_break_pipeline or (params.n == 1 and params.best_of == 1)
        prepared = self.requests.prepare(submit, streamed_stop_strings=match_stop_strings)
        if isinstance(prepared, Rejected):
            return prepared
        if prepared.vision is not None:
            try:
                handle = self.vision.add_request(self.pipe, submit.request_id, prepared.vision, prepared.config)
            except Exception as exc:  # raised before the request joins the pipeline, which stays usable
                return Rejected(
                    request_id=submit.request_id,
                    message=f"The pipeline could not prepare the request's images: {reason(exc)}",
                    code="invalid_image",
                    param="messages",
                )
        else:
            handle = self.pipe.add_request(submit.request_id, prepared.input_ids, prepared.config)
        outputs = self.request_outputs(params, match_stop_strings=match_stop_strings)
        self.active[submit.request_id] = _Active(
            handle=handle,
            prompt_tokens=prepared.prompt_tokens,
            outputs=outputs,
            assistant_tokens=params.num_assistant_tokens if self.graph.assisted else 0,
            max_new_tokens=prepared.max_new_tokens,
        )
        return accepted(submit.request_id, prepared)

    def _collect(self, events: list[EngineEvent]) -> bool:
        """Read every request's new tokens into events; whether one was dropped while running
        (ended at a stop string)."""
        finished_ids = []
        dropped_running = False
        # Read every handle first, then decode all new tokens of this step in one batch.
        states = []
        for request_id, active in self.active.items():
            handle = active.handle
            done = False
            if handle.can_read():
                before = active.outputs.generated
                done = active.outputs.read(handle.read())
                if active.assistant_tokens and before:
                    self._count_candidates(active, before, active.outputs.generated - before)
            states.append((request_id, active, handle, done, handle.get_status()))
        self.detokenizer.flush()
        for request_id, active, handle, done, status in states:
            running = status == _STATUS.RUNNING and not done
            stopped_by_string = running and not active.cancelled and active.outputs.stop_string_matched()
            if stopped_by_string:
                # Ends now (`status` was read before it): dropping the handle below frees its KV blocks.
                handle.stop()
                dropped_running = True
            elif running:
                events.extend(active.outputs.deltas(request_id))
                continue
            # A cancelled request reads back as IGNORED in this release: trust our own flag first.
            failure = None
            if active.cancelled or status in (_STATUS.CANCEL, _STATUS.STOP):
                failure = "cancelled"
            elif status == _STATUS.IGNORED:
                failure = "error"
            events.extend(
                active.outputs.finish(
                    request_id,
                    active.prompt_tokens
                    if self.vision is None
                    else self.vision.final_prompt_tokens(handle.get_perf_metrics, active.prompt_tokens),
                    failure=failure,
                    error="the scheduler could not fit the request in the KV cache" if failure == "error" else "",
                )
            )
            finished_ids.append(request_id)
        for request_id in finished_ids:
            # Dropping the handle releases the request's KV blocks.
            del self.active[request_id]
        return dropped_running

    def _step(self, events: list[EngineEvent]) -> bool:
        self.steps += 1
        try:
            self.pipe.step()
        except Exception as exc:  # a check inside the engine failed
            self._recover(exc, events)
            return False
        return True

    def _recover(self, exc: Exception, events: list[EngineEvent]) -> None:
        # A failed check inside step() leaves the offending request in the pipeline, and every
        # later step fails on it again (measured with speculative decoding, ENGINE-NOTES): end the
        # requests in flight with an error and build a fresh pipeline.
        cause = reason(exc)
        for request_id, active in self.active.items():
            events.extend(
                active.outputs.finish(
                    request_id, active.prompt_tokens, failure="error", error=f"the engine failed: {cause}"
                )
            )
        self.active.clear()
        # Rebuilt by the loop once these errors are sent (their clients need not wait for it).
        # Dropping it first frees the old pipeline's KV cache before the new one allocates its own.
        self.pipe = None

    def _count_candidates(self, active: _Active, before: int, new_tokens: int) -> None:
        # A step of speculative decoding or prompt lookup validates up to `assistant_tokens`
        # candidates (fewer near max_new_tokens) and emits the accepted ones plus one token of the
        # main model's own. The handle's perf metrics carry no acceptance counts in step mode.
        slots = min(active.assistant_tokens, active.max_new_tokens - before - 1)
        if slots > 0 and new_tokens > 0:
            self.draft_tokens += slots
            self.accepted_tokens += min(new_tokens - 1, slots)

    def _stats(self) -> Stats:
        metrics = self.pipe.get_metrics()
        return Stats(
            running=len(self.active),
            kv_cache_usage=float(metrics.cache_usage) / 100.0,
            steps=self.steps,
            waiting=max(0, int(metrics.requests) - int(metrics.scheduled_requests)),
            draft_tokens=self.draft_tokens,
            accepted_tokens=self.accepted_tokens,
        )


def open_engine(graph: Graph) -> Engine:
    """The engine of a generative graph (`messages.TASKS`): continuous batching, or the stateful
    pipeline's FIFO queue for LM and VLM graphs."""
    if graph.stateful:
        from appliance.engine.worker.stateful import StatefulEngine  # imports this module

        return StatefulEngine(graph)
    return BatchingEngine(graph)
