"""One form of a graph measured on its raw pipeline, in a process of its own.

A fresh process per form: OpenVINO keeps compiled kernels and thread pools for its process's life,
so forms measured one after the other in one process would not be independent, and a form the
plugin refuses (or that crashes it) costs that form only. Each measurement: load the graph's
continuous-batching pipeline with the form's `plugin_config`, write the check prompt's greedy
tokens, warm up, then output tokens/s of requests one at a time (`one_stream`) and of `busy` in
flight at once, each request `prompt_tokens` in and `output_tokens` out (ignore_eos), as
`appliance bench`'s raw baseline runs them (`tools.bench.raw`).
"""

from __future__ import annotations

import multiprocessing
import queue
import traceback
from dataclasses import dataclass
from pathlib import Path

from appliance.tools.tune.levers import Form, Measured

__all__ = ["Workload", "measure"]

_CHECK_TOKENS = 24
"""Greedy tokens compared between forms (a different KV precision or compute type shows here)."""
_TEXT = (
    "The appliance serves chat models on the edge box beside the machines it watches, and every "
    "answer it writes must arrive as fast as the hardware allows without losing a single request. "
)


@dataclass(frozen=True)
class Workload:
    prompt_tokens: int = 128
    output_tokens: int = 64
    busy: int = 4
    rounds: int = 2
    """Requests per stream of a level, at least."""
    min_seconds: float = 3.0
    """Each level runs again until it has taken this long."""
    quality: bool = False
    """Measure the perplexity of the form's weights too (`quality.py`); `appliance tune` asks once
    per weight format."""


def measure(
    graph_path: Path, form: Form, workload: Workload, timeout: float, weights_dir: Path | None = None
) -> Measured:
    """`form` of the graph at `graph_path` measured in a new process (at most `timeout` seconds,
    building the form's weights included; a failure is a Measured with `error`). A form with a
    weight format is served from its candidate folder (`weights.candidate_dir`, in `weights_dir`
    or beside the model), built in that process when it is not yet there."""
    context = multiprocessing.get_context("spawn")
    answers: multiprocessing.Queue = context.Queue()
    process = context.Process(
        target=_child, args=(graph_path, dict(form.changes), workload, weights_dir, answers), daemon=True
    )
    process.start()
    try:
        answer = answers.get(timeout=timeout)
    except queue.Empty:
        answer = {"error": f"no answer within {timeout:.0f} s"}
    finally:
        process.join(5)
        if process.is_alive():
            process.kill()
    if "error" in answer:
        return Measured(form, 0.0, 0.0, (), error=answer["error"])
    return Measured(
        form, answer["one_stream"], answer["busy"], tuple(answer["tokens"]), perplexity=answer.get("perplexity")
    )


def _child(
    graph_path: Path, changes: dict, workload: Workload, weights_dir: Path | None, answers: multiprocessing.Queue
) -> None:
    try:
        answers.put(_measure(graph_path, Form(changes), workload, weights_dir))
    except Exception as exc:  # reported to the parent, which goes on with the next form
        lines = traceback.format_exception_only(type(exc), exc)
        answers.put({"error": " ".join(" ".join(lines).split())[:300]})


def _measure(graph_path: Path, form: Form, workload: Workload, weights_dir: Path | None) -> dict:
    import msgspec
    import numpy as np
    import openvino

    from appliance.graphfiles import load_graph
    from appliance.tools.bench.raw import RawPipeline, Tokenizer
    from appliance.tools.bench.workload import Prompt
    from appliance.tools.tune.quality import TEXT, perplexity
    from appliance.tools.tune.weights import build_weights, candidate_dir, source_ir

    graph = load_graph(graph_path)
    graph = msgspec.structs.replace(graph, plugin_config=form.apply(graph.plugin_config))
    model = graph.model_dir
    if form.weights is not None:
        built = build_weights(model, form.weights, candidate_dir(model, form.weights, weights_dir))
        graph = msgspec.structs.replace(graph, model_path=str(built), gguf_reader=None)
    raw = RawPipeline(graph)
    ids = Tokenizer(graph.model_dir).encode(_TEXT * (1 + workload.prompt_tokens // 20))[: workload.prompt_tokens]
    prompt = Prompt(_TEXT, tuple(ids))
    check = raw.generation_config(_CHECK_TOKENS)
    written = raw.pipe.generate([openvino.Tensor(np.array([ids], dtype=np.int64))], [check])[0]
    tokens = [int(token) for token in written.m_generation_ids[0]]
    raw.run_level([prompt], concurrency=1, output_tokens=workload.output_tokens)  # warm-up
    figures = {}
    for name, concurrency in (("one_stream", 1), ("busy", workload.busy)):
        # Levels of at least `min_seconds`: a tiny model's request takes milliseconds.
        produced, spent = 0, 0.0
        while spent < workload.min_seconds:
            count = concurrency * workload.rounds
            results, wall = raw.run_level(
                [prompt] * count, concurrency=concurrency, output_tokens=workload.output_tokens
            )
            failed = [result.error for result in results if not result.ok]
            if failed:
                raise RuntimeError(f"a request failed: {failed[0]}")
            produced += sum(result.output_tokens for result in results)
            spent += wall
        figures[name] = produced / spent
    if workload.quality:
        # After the timing: its compiled copy of the model must not share the box with it.
        ir = graph.model_dir if form.weights is not None else source_ir(model, weights_dir or model.parent)
        figures["perplexity"] = perplexity(ir, Tokenizer(graph.model_dir).encode(TEXT))
    return {**figures, "tokens": tokens}
