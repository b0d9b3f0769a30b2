"""Where a decoded token's time goes: OpenVINO's per-layer counters for one form of a graph's model.

    appliance tune GRAPH --profile [--weights int4_sym_g32,...]

Each form (the model's weights as the graph serves them, or written again in a `--weights` format,
with one set of CPU plugin properties) is compiled in a fresh process with `PERF_COUNT` on, as
the stateful model OpenVINO GenAI reads (`weights.source_ir`: a GGUF file's own IR). A prompt of
`prompt_tokens` fills the KV cache, then `steps` single-token decode steps run; the step's wall
time (median of the steps) and the counters of its last step are reported: the share of the
fully connected layers (`FullyConnectedCompressed`: weights decompressed on the fly), of the
output layer (the fully connected layer whose output is the vocabulary: tied to the embedding in
most small models, often stored in 8 bits), of attention (`ScaledDotProductAttentionWithKVCache`)
and of everything else, with the kernel OpenVINO picked for the fully connected layers.

The counters are OpenVINO's own (`InferRequest.profiling_info`, per node, summed by type); the
step time is measured around `infer()` so that it compares with llama.cpp's time per token. The
continuous-batching pipeline the server runs uses the same fully connected kernels on the same
weights (its attention is paged): `appliance bench` measures it against raw and against peers.
"""

from __future__ import annotations

import multiprocessing
import queue
import statistics
import time
import traceback
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FORMS", "Profile", "pipeline_tpot", "profile", "render"]

FORMS: tuple[tuple[str, dict[str, str | int | bool]], ...] = (
    ("as served", {}),
    ("f32 compute", {"INFERENCE_PRECISION_HINT": "f32"}),
    ("no dynamic quantization", {"DYNAMIC_QUANTIZATION_GROUP_SIZE": 0}),
    ("dynamic quantization g128", {"DYNAMIC_QUANTIZATION_GROUP_SIZE": 128}),
    ("KV cache u4", {"KV_CACHE_PRECISION": "u4"}),
    ("KV cache f16", {"KV_CACHE_PRECISION": "f16"}),
    ("1 thread", {"INFERENCE_NUM_THREADS": 1}),
    ("LATENCY hint, pinned", {"PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": True}),
)
"""The property sets profiled on each weight format: the plugin's defaults for this CPU first."""

_TEXT = "The appliance serves chat models on the edge box beside the machines it watches. "
_FC = "FullyConnectedCompressed"
_FC_PLAIN = "FullyConnected"
_ATTENTION = "ScaledDotProductAttentionWithKVCache"


@dataclass(frozen=True)
class Profile:
    """One form's decode step: `step_ms` (median wall time of a step), the counters' split of the
    last step in milliseconds, and the fully connected layers' kernel."""

    weights: str
    properties: str
    step_ms: float = 0.0
    counted_ms: float = 0.0
    fc_ms: float = 0.0
    output_layer_ms: float = 0.0
    attention_ms: float = 0.0
    fc_kernel: str = ""
    error: str = ""


def profile(
    model: Path,
    weights: str | None,
    properties: Mapping[str, str | int | bool],
    *,
    work_dir: Path,
    prompt_tokens: int = 128,
    steps: int = 32,
    timeout: float = 600.0,
) -> Profile:
    """One form of `model` (a GGUF file or an IR folder) profiled in a new process: its weights
    (None: as they are; else a `weights.WEIGHT_FORMATS` name, built into `work_dir` when missing)
    and plugin `properties`. A failure is a Profile with `error`, never an exception."""
    answer = _in_child(_profile, (model, weights, dict(properties), work_dir, prompt_tokens, steps), timeout)
    return Profile(weights=weights or "as served", properties=_described(properties), **answer)


def pipeline_tpot(
    model: Path,
    properties: Mapping[str, str | int | bool],
    *,
    stateful: bool,
    prompt_tokens: int = 128,
    output_tokens: int = 64,
    timeout: float = 600.0,
) -> Profile:
    """OpenVINO GenAI's own time per output token at one stream (median of three greedy requests
    after a warm-up) for `model` as served: the continuous-batching pipeline the server runs, or
    the stateful one (`ATTENTION_BACKEND=SDPA`, what the NPU runs); in the Profile's `step_ms`."""
    args = (model, dict(properties), stateful, prompt_tokens, output_tokens)
    answer = _in_child(_tpot, args, timeout)
    kind = "GenAI stateful (SDPA)" if stateful else "GenAI continuous batching"
    return Profile(weights=kind, properties=_described(properties), **answer)


def _described(properties: Mapping[str, object]) -> str:
    return ", ".join(f"{key}={value}" for key, value in properties.items()) or "defaults"


def _in_child(work, args: tuple, timeout: float) -> dict:
    """`work(*args)` in a spawned process (OpenVINO keeps compiled kernels and thread pools for its
    process's life, so forms measured in one process would not be independent); its dict, or
    {"error": ...} when it raised, crashed or took longer than `timeout` seconds."""
    context = multiprocessing.get_context("spawn")
    answers: multiprocessing.Queue = context.Queue()
    process = context.Process(target=_child, args=(work, args, answers), daemon=True)
    process.start()
    try:
        return answers.get(timeout=timeout)
    except queue.Empty:
        return {"error": f"no answer within {timeout:.0f} s"}
    finally:
        process.join(5)
        if process.is_alive():
            process.kill()


def render(profiles: list[Profile], reference_ms: float | None = None) -> list[str]:
    """A table, a line each; `reference_ms`: a peer's time per token (llama.cpp's), for the ratio."""
    head = "| weights | properties | step ms | FC % | output layer ms | attention ms | FC kernel |"
    if reference_ms:
        head += f" vs {reference_ms:.1f} ms |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for p in profiles:
        if p.error:
            lines.append(f"| {p.weights} | {p.properties} | failed: {p.error} |")
            continue
        if p.counted_ms:
            share = 100 * p.fc_ms / p.counted_ms
            split = f"{share:.0f} | {p.output_layer_ms:.1f} | {p.attention_ms:.1f} | {p.fc_kernel}"
        else:  # a pipeline's time per token: no counters
            split = "- | - | - | -"
        line = f"| {p.weights} | {p.properties} | {p.step_ms:.1f} | {split} |"
        if reference_ms:
            line += f" {reference_ms / p.step_ms:.2f}x |"
        lines.append(line)
    return lines


def _child(work, args: tuple, answers: multiprocessing.Queue) -> None:
    try:
        answers.put(work(*args))
    except Exception as exc:  # reported to the parent, which goes on with the next form
        lines = traceback.format_exception_only(type(exc), exc)
        answers.put({"error": " ".join(" ".join(lines).split())[:300]})


def _profile(model: Path, weights, properties: dict, work_dir: Path, prompt_tokens: int, steps: int) -> dict:
    import numpy as np
    import openvino

    from appliance.tools.tune.weights import build_weights, candidate_dir, source_ir

    folder = source_ir(model, work_dir)
    if weights is not None:
        folder = build_weights(model, weights, candidate_dir(model, weights, work_dir))
    core = openvino.Core()
    compiled = core.compile_model(folder / "openvino_model.xml", "CPU", {"PERF_COUNT": True, **properties})
    request = compiled.create_infer_request()
    vocabulary = compiled.output("logits").get_partial_shape()[-1].get_length()

    def step(ids: list[int], position: int) -> int:
        end = position + len(ids)
        request.infer(
            {
                "input_ids": np.array([ids], dtype=np.int64),
                "attention_mask": np.ones((1, end), dtype=np.int64),
                "position_ids": np.arange(position, end, dtype=np.int64)[None],
                "beam_idx": np.zeros(1, dtype=np.int32),
            }
        )
        return int(request.get_tensor("logits").data[0, -1].argmax())

    request.reset_state()
    token = step([100 + i % 1000 for i in range(prompt_tokens)], 0)
    position, times = prompt_tokens, []
    for _ in range(steps):
        started = time.perf_counter()
        token = step([token], position)
        times.append(time.perf_counter() - started)
        position += 1
    by_type: Counter[str] = Counter()
    kernels: Counter[str] = Counter()
    output_layer = 0.0
    widths = _output_widths(compiled)
    for node in request.profiling_info:
        ms = node.real_time.total_seconds() * 1000
        by_type[node.node_type] += ms
        if node.node_type in (_FC, _FC_PLAIN):
            kernels[node.exec_type] += ms
            if widths.get(node.node_name) == vocabulary:
                output_layer += ms
    return {
        "step_ms": 1000 * statistics.median(times),
        "counted_ms": sum(by_type.values()),
        "fc_ms": by_type[_FC] + by_type[_FC_PLAIN],
        "output_layer_ms": output_layer,
        "attention_ms": by_type[_ATTENTION],
        "fc_kernel": kernels.most_common(1)[0][0] if kernels else "",
    }


def _tpot(model: Path, properties: dict, stateful: bool, prompt_tokens: int, output_tokens: int) -> dict:
    import openvino_genai

    if stateful:
        pipe = openvino_genai.LLMPipeline(str(model), "CPU", ATTENTION_BACKEND="SDPA", **properties)
    else:
        pipe = openvino_genai.LLMPipeline(
            str(model), "CPU", scheduler_config=openvino_genai.SchedulerConfig(), **properties
        )
    ids = pipe.get_tokenizer().encode(_TEXT * (1 + prompt_tokens // 8)).input_ids.data[0][:prompt_tokens]
    prompt = pipe.get_tokenizer().decode(list(ids))
    config = openvino_genai.GenerationConfig(
        max_new_tokens=output_tokens, min_new_tokens=output_tokens, ignore_eos=True, apply_chat_template=False
    )
    pipe.generate([prompt], config)  # warm-up
    tpots = [pipe.generate([prompt], config).perf_metrics.get_tpot().mean for _ in range(3)]
    return {"step_ms": statistics.median(tpots)}


def _output_widths(compiled) -> dict[str, int]:
    """Each runtime node's output width (its output's last dimension, where static), by name: the
    output layer is the fully connected layer as wide as the vocabulary."""
    widths = {}
    for op in compiled.get_runtime_model().get_ops():
        shape = op.get_output_partial_shape(0) if op.get_output_size() else None
        if shape is not None and shape.rank.is_static and shape.rank.get_length() > 0 and shape[-1].is_static:
            widths[op.get_friendly_name()] = shape[-1].get_length()
    return widths
