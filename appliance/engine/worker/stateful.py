"""The stateful engine: one request at a time through OpenVINO GenAI's LLMPipeline / VLMPipeline.

NPU runs only this pipeline: static shapes (MAX_PROMPT_LEN, MIN_RESPONSE_LEN), one sequence, no
continuous batching. On CPU and GPU the same pipeline runs with `ATTENTION_BACKEND=SDPA`, which is
how the tests exercise it. Requests wait in a FIFO queue and run one after the other
(`fifo.FifoEngine`: the pipeline is built anew after any call that failed):

- a `Submit` is prepared and checked at once (`Accepted` or `Rejected` while another request
  generates), then queued; `Cancel` stops the running one at its next token; tokenize/detokenize
  are answered immediately;
- the generation thread calls `generate()` (which releases the GIL) for each queued request; its
  streamer turns every new token into `Delta` events and ends the request when the client
  cancelled or a stop string appeared. OpenVINO GenAI 2026.4 calls the streamer from a thread of
  its own, beside inference: a streamer sleeping 2 ms per token did not slow a 28 ms/token model.

Stop strings are matched here rather than by the pipeline: its streamer never sees the tokens of
a stop string it matched (measured on 2026.4), and VLMPipeline returns text only, not those ids.
Per-token log probabilities and several sequences per request are not available from this
pipeline (the OpenAI routes refuse them before a request gets here; LMI token objects show null).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import openvino_genai

from appliance.engine.messages import Batch, Detokenize, EngineEvent, Rejected, Submit, Tokenize
from appliance.engine.worker.base import Engine, accepted
from appliance.engine.worker.fifo import FifoEngine
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


class StatefulEngine(FifoEngine[_Job], Engine):
    """A stateful pipeline serving its FIFO queue of requests, one at a time."""

    thread_name = "generate"
    ready = Engine.ready  # the chat template's facts, not FifoEngine's bare `Ready`

    def __init__(self, graph: Graph) -> None:
        FifoEngine.__init__(self, graph, lambda: load_stateful_pipeline(graph))
        Engine.__init__(self, graph, self.pipe)
        self._outbox = Outbox(graph.stream_interval_ms / 1000)
        """The generation thread's deltas on their way out (the main thread's events go at once)."""

    # -- main thread: commands --------------------------------------------------------------

    def handle(self, command: object) -> EngineEvent | None:
        if isinstance(command, Submit):
            return self._submit(command)
        if isinstance(command, Tokenize | Detokenize):
            return self.requests.tokenize(command)
        return None

    def _submit(self, submit: Submit) -> EngineEvent:
        prepared = self.requests.prepare(submit, streamed_stop_strings=True)
        if isinstance(prepared, Rejected):
            return prepared
        outputs = self.request_outputs(submit.params, match_stop_strings=True)
        final_ids = {self.requests.eos_token_id, *submit.params.stop_token_ids}
        self.enqueue(_Job(request_id=submit.request_id, prepared=prepared, outputs=outputs, final_ids=final_ids))
        return accepted(submit.request_id, prepared)

    def kv_cache_usage(self) -> float:
        # The running request's share of the context it may fill (its whole KV cache).
        job = self.running
        used = job.prepared.prompt_tokens + job.generated if job is not None else 0
        return min(1.0, used / self.max_context)

    # -- generation thread ------------------------------------------------------------------

    def serve(self, job: _Job) -> list[EngineEvent]:
        self._outbox.add(self._generate(job))
        return self._outbox.take(time.monotonic(), flush=True)

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
            self.pipeline_failed()
            return job.outputs.finish(
                job.request_id, prepared.prompt_tokens, failure="error", error=f"the engine failed: {reason(exc)}"
            )
        if streamer.error is not None:
            self.pipeline_failed()  # generate() was cut short by the streamer's CANCEL
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
        self.progressed(len(ids))
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
            self.send(Batch(events=due))
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
