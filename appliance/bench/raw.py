"""The raw baseline: the same workload on an in-process ContinuousBatchingPipeline, no HTTP.

The pipeline is built by the engine's own function from the same graph file, and each request gets
what a served greedy `ignore_eos` request gets, so the only difference from the served run is
everything the appliance adds around the pipeline:
HTTP, JSON, SSE, the engine process and its pipe, detokenization. Like the server's engine loop,
this keeps `concurrency` requests in flight (a new one is added as soon as one finishes) and reads
tokens after every `step()`; a token's timestamp is the end of the step that produced it.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import openvino
import openvino_genai

from appliance.bench.metrics import RequestResult
from appliance.bench.workload import Prompt
from appliance.config import Graph
from appliance.engine.pipelines import load_pipeline

__all__ = ["RawPipeline", "Tokenizer"]

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
        self, prompts: Sequence[Prompt], *, concurrency: int, output_tokens: int
    ) -> tuple[list[RequestResult], float]:
        """Run every prompt with `concurrency` in flight; returns results and wall time."""
        config = self.generation_config(output_tokens)
        pending = iter(prompts)
        in_flight: list[_InFlight] = []
        results: list[RequestResult] = []

        def add_next() -> None:
            prompt = next(pending, None)
            if prompt is None:
                return
            input_ids = openvino.Tensor(np.array([prompt.ids], dtype=np.int64))
            sent = time.perf_counter()
            handle = self.pipe.add_request(next(_request_ids), input_ids, config)
            in_flight.append(_InFlight(handle, sent, RequestResult(ok=True, prompt_tokens=len(prompt.ids))))

        started = time.perf_counter()
        for _ in range(concurrency):
            add_next()
        while in_flight:
            self.pipe.step()
            now = time.perf_counter()
            for request in list(in_flight):
                if self._collect(request, now, output_tokens):
                    in_flight.remove(request)
                    results.append(request.result)
                    add_next()
        return results, time.perf_counter() - started

    def generation_config(self, output_tokens: int) -> openvino_genai.GenerationConfig:
        """What the server runs for `temperature: 0, ignore_eos: true, max_tokens: output_tokens`."""
        config = openvino_genai.GenerationConfig()
        config.max_new_tokens = output_tokens
        config.set_eos_token_id(self._eos_token_id)  # also a stop token id, as validate() requires
        config.ignore_eos = True
        config.do_sample = False
        config.validate()
        return config

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
