"""The raw baseline: the same workload on the graph's pipeline in process, no HTTP.

The pipeline is built by the engine's own function from the same graph file, and each request gets
what a served greedy `ignore_eos` request gets, so the only difference from the served run is
everything the appliance adds around the pipeline:
HTTP, JSON, SSE, the engine process and its pipe, detokenization. Like the server's engine loop,
this keeps `concurrency` requests in flight (a new one is added as soon as one finishes) and reads
tokens after every `step()`; a token's timestamp is the end of the step that produced it.
Stateful graphs (LM, VLM: NPU) serve one request at a time: there the baseline calls `generate()`
for one request after the other, with the same closed loop of `concurrency` clients, so a
request's time includes its wait in the queue, as it does when served.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import openvino
import openvino_genai

from appliance.engine.worker.pipelines import load_pipeline, load_stateful_pipeline
from appliance.graphfiles import Graph
from appliance.tools.bench.metrics import RequestResult
from appliance.tools.bench.workload import Prompt

__all__ = ["RawPipeline", "RawStatefulPipeline", "Tokenizer", "raw_pipeline"]

# Request ids must be unique for the pipeline's whole life (a duplicate leaks KV blocks).
_request_ids = itertools.count(1)


class Tokenizer:
    """The graph's tokenizer, encoding the way the server's engine does (no special tokens added)."""

    def __init__(self, model_dir: Path) -> None:
        self._tokenizer = openvino_genai.Tokenizer(str(model_dir))

    def encode(self, text: str) -> list[int]:
        return [int(i) for i in self._tokenizer.encode(text, add_special_tokens=False).input_ids.data[0]]

    def vocab(self) -> dict[str | bytes, int]:
        return dict(self._tokenizer.get_vocab())


@dataclass
class _InFlight:
    handle: object
    sent: float
    result: RequestResult


class RawPipeline:
    """A graph's ContinuousBatchingPipeline driven directly by an add_request/step loop."""

    def __init__(self, graph: Graph) -> None:
        self.pipe = load_pipeline(graph)
        self._eos_token_id = self.pipe.get_tokenizer().get_eos_token_id()

    def run_level(
        self,
        prompts: Sequence[Prompt],
        *,
        concurrency: int | None,
        output_tokens: int,
        arrivals: Sequence[float] | None = None,
    ) -> tuple[list[RequestResult], float]:
        """Run every prompt with `concurrency` in flight, or (with `arrivals`) each added at the
        first step boundary after its arrival, timed from the arrival; returns results and wall time."""
        config = self.generation_config(output_tokens)
        in_flight: list[_InFlight] = []
        results: list[RequestResult] = []

        def add(prompt: Prompt, sent: float) -> None:
            input_ids = openvino.Tensor(np.array([prompt.ids], dtype=np.int64))
            handle = self.pipe.add_request(next(_request_ids), input_ids, config)
            in_flight.append(_InFlight(handle, sent, RequestResult(ok=True, prompt_tokens=len(prompt.ids))))

        started = time.perf_counter()
        pending = deque(prompts)
        due = deque(started + offset for offset in arrivals) if arrivals is not None else None
        if due is None:
            for _ in range(min(concurrency or 1, len(pending))):
                add(pending.popleft(), time.perf_counter())
        while in_flight or pending:
            if due is not None:
                now = time.perf_counter()
                while due and due[0] <= now:
                    add(pending.popleft(), due.popleft())
                if not in_flight:
                    time.sleep(max(0.0, due[0] - now))
                    continue
            self.pipe.step()
            now = time.perf_counter()
            for request in list(in_flight):
                if self._collect(request, now, output_tokens):
                    in_flight.remove(request)
                    results.append(request.result)
                    if due is None and pending:
                        add(pending.popleft(), time.perf_counter())
        return results, time.perf_counter() - started

    def generation_config(self, output_tokens: int) -> openvino_genai.GenerationConfig:
        return _greedy_config(output_tokens, self._eos_token_id)

    @staticmethod
    def _collect(request: _InFlight, now: float, output_tokens: int) -> bool:
        """Record the tokens of the last step; True once the request is over."""
        handle, result = request.handle, request.result
        # read() blocks (holding the GIL) when nothing is ready: only after can_read().
        if handle.can_read():
            new = sum(len(output.generated_ids) for output in handle.read().values())
            if new:
                result.output_tokens += new
                result.chunk_times.append(now - request.sent)
        status = handle.get_status()
        if status == openvino_genai.GenerationStatus.RUNNING:
            return False
        result.latency = now - request.sent
        if status != openvino_genai.GenerationStatus.FINISHED:
            result.ok, result.error = False, f"pipeline status {status.name}"
        elif result.output_tokens != output_tokens:
            result.ok, result.error = False, f"{result.output_tokens} tokens instead of {output_tokens}"
        return True


class RawStatefulPipeline:
    """A stateful graph's LLMPipeline, one `generate()` after the other."""

    def __init__(self, graph: Graph) -> None:
        if graph.accepts_images:
            # VLMPipeline.generate takes a prompt string, not the workload's exact token ids.
            raise ValueError(
                f"{graph.source}: no raw baseline for a stateful vision graph; run the bench with --no-raw"
            )
        self.pipe = load_stateful_pipeline(graph)
        self._eos_token_id = self.pipe.get_tokenizer().get_eos_token_id()

    def run_level(
        self,
        prompts: Sequence[Prompt],
        *,
        concurrency: int | None,
        output_tokens: int,
        arrivals: Sequence[float] | None = None,
    ) -> tuple[list[RequestResult], float]:
        """Run every prompt as `concurrency` closed-loop clients would, or (with `arrivals`) each
        once it has arrived and the one before it is done; returns results and wall time."""
        config = _greedy_config(output_tokens, self._eos_token_id)
        started = time.perf_counter()
        if arrivals is not None:
            send_times = deque(started + offset for offset in arrivals)
        else:
            # Request i is sent at the start (i < concurrency) or when request i - concurrency ends.
            send_times = deque([started] * (concurrency or 1))
        results = []
        for prompt in prompts:
            sent = send_times.popleft()
            if sent > time.perf_counter():
                time.sleep(sent - time.perf_counter())
            result = RequestResult(ok=True, prompt_tokens=len(prompt.ids))
            streamer = _TokenClock(result, sent)
            self.pipe.generate(openvino.Tensor(np.array([prompt.ids], dtype=np.int64)), config, streamer)
            now = time.perf_counter()
            result.latency = now - sent
            if result.output_tokens != output_tokens:
                result.ok, result.error = False, f"{result.output_tokens} tokens instead of {output_tokens}"
            results.append(result)
            if arrivals is None:
                send_times.append(now)
        return results, time.perf_counter() - started


class _TokenClock(openvino_genai.StreamerBase):
    """Counts tokens and stamps each as it arrives."""

    def __init__(self, result: RequestResult, sent: float) -> None:
        super().__init__()
        self._result, self._sent = result, sent

    def write(self, token: int | list[int]) -> openvino_genai.StreamingStatus:
        self._result.output_tokens += len(token) if isinstance(token, list) else 1
        self._result.chunk_times.append(time.perf_counter() - self._sent)
        return openvino_genai.StreamingStatus.RUNNING

    def end(self) -> None:
        pass


def raw_pipeline(graph: Graph) -> RawPipeline | RawStatefulPipeline:
    """The baseline for the graph's kind of pipeline."""
    return RawStatefulPipeline(graph) if graph.stateful else RawPipeline(graph)


def _greedy_config(output_tokens: int, eos_token_id: int) -> openvino_genai.GenerationConfig:
    """What the server runs for `temperature: 0, ignore_eos: true, max_tokens: output_tokens`."""
    config = openvino_genai.GenerationConfig()
    config.max_new_tokens = output_tokens
    config.set_eos_token_id(eos_token_id)  # also a stop token id, as validate() requires
    config.ignore_eos = True
    config.do_sample = False
    config.validate()
    return config
