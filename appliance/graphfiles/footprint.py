"""What a graph's engine process will hold in memory, estimated from the graph and its files
before anything loads (`Graph.footprint`), for `memory_budget` and `appliance check`.

Three parts:

- weights: the sizes of the files the pipeline loads: every `.bin` of the model's IR folder (the
  model, its tokenizer and detokenizer, a vision model's encoders) or the GGUF file, and a draft
  model's `.bin` files. Compressed weights stay compressed on CPU, so the file size is what loads.
- KV cache: a continuous-batching graph's `[scheduler] cache_size` GB (and its draft's), the most
  the engine allocates for it; with `cache_size = 0` (grows on demand), and for the stateful
  pipelines, one full context of the model's KV at the graph's `KV_CACHE_PRECISION`, read from
  config.json (layers x KV heads x head size). Embedding, rerank and speech graphs: none counted.
- the engine process's fixed overhead (`ENGINE_OVERHEAD_BYTES`, measured).

An upper bound in practice: the CPU plugin reserves the KV cache but the kernel only counts the
pages a request has written, so an idle engine's resident memory is far below it (the demo models:
145-165 MiB idle with 1 GiB of cache_size each; docs/operations.md has the table). The lifecycle
counts the larger of this estimate and the measured RSS, so a model cannot outgrow the budget by
filling its cache after another one was let in beside it.

Standard library only: read in the server (and `appliance check`), before any engine runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from appliance.graphfiles.model_json import json_object
from appliance.memory_budget import MemoryBudget, format_bytes

__all__ = ["ENGINE_OVERHEAD_BYTES", "Footprint", "estimate_footprint", "over_budget"]

ENGINE_OVERHEAD_BYTES = 160 * 1024 * 1024
"""An engine process's memory beyond its weights and KV cache (Python, OpenVINO and its plugin,
the tokenizer extension, compiled kernels). Measured 2026-11-28 with openvino-genai's CPU plugin:
the four demo graphs loaded at start by `appliance serve` (`appliance demo`'s random tiny models,
1.6-3.6 MB of .bin files each), VmRSS of each idle engine process read from /proc/PID/status
(`rss_mb` of `GET /admin/models`): 149.5 MiB demo-chat, 145.0 demo-lookup, 159.4 demo-spec (two
models), 164.6 demo-vision; 145-161 MiB without their weight files, rounded up to 160 MiB."""
GIB = 1024**3
"""OpenVINO GenAI's `cache_size` counts GB of 2^30 bytes."""
_KV_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "u8": 1, "i8": 1, "u4": 0.5}
_DEFAULT_KV_BYTES = 2
"""The CPU plugin's KV cache precision unless KV_CACHE_PRECISION says otherwise (bf16 or f16)."""


@dataclass(frozen=True)
class Footprint:
    """A graph's estimated memory, in bytes, by part."""

    weights_bytes: int
    kv_cache_bytes: int
    overhead_bytes: int
    weights_source: str
    kv_cache_source: str

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes + self.overhead_bytes

    def describe(self) -> str:
        """One line: the total, then each part with where it came from."""
        return (
            f"footprint {format_bytes(self.total_bytes)}: weights {format_bytes(self.weights_bytes)} "
            f"({self.weights_source}), KV cache {format_bytes(self.kv_cache_bytes)} ({self.kv_cache_source}), "
            f"engine {format_bytes(self.overhead_bytes)} (fixed overhead per engine process)"
        )

    def parts(self) -> dict[str, int]:
        """The parts by name, as `appliance check --json` prints them."""
        return {
            "weights_bytes": self.weights_bytes,
            "kv_cache_bytes": self.kv_cache_bytes,
            "overhead_bytes": self.overhead_bytes,
        }


def estimate_footprint(
    model_dir: Path,
    *,
    gguf: bool,
    continuous_batching: bool,
    generates: bool,
    cache_size_gb: int,
    context: int,
    kv_precision: str | None,
    draft_dir: Path | None = None,
    draft_cache_size_gb: int = 0,
) -> Footprint:
    """The footprint of the model at `model_dir` (an IR folder or a GGUF file) served as described;
    never raises (a file that cannot be read counts 0 and the source says so)."""
    weights = _file_size(model_dir) if gguf else _bin_sizes(model_dir)
    weights_source = "the GGUF file" if gguf else ".bin files of the model folder"
    if draft_dir is not None:
        weights += _bin_sizes(draft_dir)
        weights_source += " and the draft model's"
    if not generates:
        kv, kv_source = 0, "none counted for this pipeline"
    elif continuous_batching and cache_size_gb:
        kv = (cache_size_gb + (draft_cache_size_gb if draft_dir is not None else 0)) * GIB
        kv_source = "[scheduler] cache_size" + (" and the draft's" if draft_dir is not None else "")
    elif gguf:
        kv, kv_source = 0, "grows on demand, not counted: a GGUF header's KV shape is not read here"
    else:
        per_token = _kv_bytes_per_token(model_dir, kv_precision)
        kv = per_token * context
        how = "grows on demand" if continuous_batching else "the stateful pipeline's"
        kv_source = f"{how}: one context of {context} tokens, {per_token} bytes each (config.json)"
        if not per_token:
            kv_source = f"{how}: not counted, config.json gives no layer and head sizes"
    return Footprint(weights, int(kv), ENGINE_OVERHEAD_BYTES, weights_source, kv_source)


def _bin_sizes(folder: Path) -> int:
    try:
        return sum(path.stat().st_size for path in folder.glob("*.bin") if path.is_file())
    except OSError:
        return 0


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _kv_bytes_per_token(model_dir: Path, kv_precision: str | None) -> float:
    """Keys and values of one token over every layer (0 when config.json does not say)."""
    config = json_object(model_dir / "config.json")
    text_config = config.get("text_config")
    config = text_config if isinstance(text_config, dict) else config
    layers = config.get("num_hidden_layers")
    heads = config.get("num_attention_heads")
    kv_heads = config.get("num_key_value_heads", heads)
    hidden = config.get("hidden_size")
    head_dim = config.get("head_dim") or (
        hidden // heads if isinstance(hidden, int) and isinstance(heads, int) and heads > 0 else 0
    )
    if not all(isinstance(value, int) and value > 0 for value in (layers, kv_heads, head_dim)):
        return 0
    element = _KV_BYTES.get((kv_precision or "").lower(), _DEFAULT_KV_BYTES)
    return 2 * layers * kv_heads * head_dim * element


def over_budget(name: str, footprint: Footprint, budget: MemoryBudget | None) -> str | None:
    """Why the graph `name` could never load under `budget` (its estimate alone is larger), or None."""
    if budget is None or footprint.total_bytes <= budget.bytes:
        return None
    return (
        f"{name}: its estimated {footprint.describe()} exceeds memory_budget {budget.describe()}, so it could "
        "never load; raise memory_budget, or lower the graph's [scheduler] cache_size"
    )
