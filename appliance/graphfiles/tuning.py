"""What `appliance check` and the start-up log say about a graph and `appliance tune`."""

from __future__ import annotations

from pathlib import Path

from appliance.cpu_features import tuned_isa
from appliance.graphfiles.schema import Graph

__all__ = ["tune_hint"]

_INT8_DOT_PRODUCTS = ("avx512_vnni", "avx_vnni", "amx_int8")


def tune_hint(graph: Graph, features: list[str]) -> str | None:
    """Advice for a continuous-batching graph that serves a GGUF file on the CPU, never tuned, on
    a CPU without int8 dot products (no VNNI, no AMX; `features` as `cpu_features.isa` gives
    them): there OpenVINO's kernels decompress the GGUF's 4-bit weights to f32 for every token,
    and an int8 IR of the same weights was measured faster. None: nothing to say."""
    if not graph.gguf or graph.device != "CPU" or graph.pipeline_kind != "LM_CB":
        return None
    if any(feature in features for feature in _INT8_DOT_PRODUCTS):
        return None
    try:
        if tuned_isa(Path(graph.source).read_text(encoding="utf-8")) is not None:
            return None
    except OSError:
        pass
    return (
        "this CPU has no VNNI or AMX, where OpenVINO decompresses a GGUF's 4-bit weights for every "
        f"token: `appliance tune {graph.source}` tries the same weights as an int8 IR (1.44x faster at "
        "one stream for demo-smol on an AVX2 EPYC, the same greedy text; docs/bench.md)"
    )
