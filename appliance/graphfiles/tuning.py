"""What `appliance check` and the start-up log say about a graph and `appliance tune`."""

from __future__ import annotations

from pathlib import Path

from appliance.cpu_features import tuned_isa
from appliance.graphfiles.schema import Graph

__all__ = ["tune_hint"]

_INT8_DOT_PRODUCTS = ("avx512_vnni", "avx_vnni", "amx_int8")
_KERNEL_BOUND_BYTES = 400_000_000
"""A GGUF file this large (a model of about a billion parameters at 4 bits) spends its decoded
token in the fully connected kernels (94% on demo-1b), where the weights' grouping decides."""


def tune_hint(graph: Graph, features: list[str]) -> str | None:
    """Advice for a continuous-batching graph that serves a GGUF file on the CPU, never tuned
    (`features` as `cpu_features.isa` gives them); None: nothing to say.

    On a CPU without int8 dot products (no VNNI, no AMX) OpenVINO's kernels decompress the GGUF's
    4-bit weights to f32 for every token, and an int8 IR of the same weights was measured faster.
    With them, a GGUF of a billion parameters or more decodes faster with its weights in 4 bits
    per channel (one scale per output row instead of one per 32 weights), at an accuracy cost
    that only the operator can accept: tune measures both and keeps it only under
    `--max-perplexity-loss`."""
    if not graph.gguf or graph.device != "CPU" or graph.pipeline_kind != "LM_CB":
        return None
    try:
        if tuned_isa(Path(graph.source).read_text(encoding="utf-8")) is not None:
            return None
    except OSError:
        pass
    if not any(feature in features for feature in _INT8_DOT_PRODUCTS):
        return (
            "this CPU has no VNNI or AMX, where OpenVINO decompresses a GGUF's 4-bit weights for every "
            f"token: `appliance tune {graph.source}` tries the same weights as an int8 IR (1.44x faster at "
            "one stream for demo-smol on an AVX2 EPYC, the same greedy text; docs/bench.md)"
        )
    try:
        large = graph.model_dir.stat().st_size >= _KERNEL_BOUND_BYTES
    except OSError:
        return None
    if not large:
        return None
    return (
        f"`appliance tune {graph.source} --weights int4_sym_channel_all --max-perplexity-loss PERCENT` "
        "measures this model's weights in 4 bits per channel: 1.30x the GGUF's speed at one stream for "
        "demo-1b on an AVX-512 VNNI EPYC (1.17x llama-server's), but +456% perplexity on SmolLM2-135M: "
        "kept only if its loss on this model is within PERCENT (docs/bench.md)"
    )
