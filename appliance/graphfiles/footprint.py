"""What a graph's engine process will hold in memory, estimated from the graph and its files
before anything loads (`Graph.footprint`), for `memory_budget` and `appliance check`.

Four parts:

- weights: the sizes of the files the pipeline loads (every `.bin` of the model's IR folder: the
  model, its tokenizer and detokenizer, a vision model's encoders; or the GGUF file; and a draft
  model's `.bin` files), counted twice for an IR folder and 2.5 times for a GGUF file. Measured:
  an engine keeps the `.bin` files mapped (their pages in its RSS) beside the CPU plugin's own
  copy of the weights it repacks (all-MiniLM-L6-v2, 87 MiB of f32 weights: 307 MiB RSS idle), and
  the GGUF reader reads the file and converts it (SmolLM2-135M Q4_1, a 94 MiB file: 216 MiB of
  anonymous memory beside the shared libraries).
- batch buffers: embedding and rerank graphs, the widest activation of one batch in f32
  (`[embedding] max_batch_tokens` x config.json `intermediate_size`; all-MiniLM-L6-v2 grew by
  88 MiB over its idle RSS embedding batches of 200-token texts, within this bound with the rest).
- KV cache: a continuous-batching graph's `[scheduler] cache_size` GB (and its draft's), the most
  the engine allocates for it; with `cache_size = 0` (grows on demand), and for the stateful
  pipelines, one full context of the model's KV at the graph's `KV_CACHE_PRECISION`, read from
  config.json (layers x KV heads x head size). Embedding, rerank and speech graphs: none counted.
- the engine process's fixed overhead (`ENGINE_OVERHEAD_BYTES`, measured).

The demo models' estimates against their measured RSS are in docs/operations.md ("Sizing").

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

ENGINE_OVERHEAD_BYTES = 192 * 1024 * 1024
"""An engine process's memory beyond its weights and KV cache (Python, OpenVINO and its plugin,
the tokenizer extension, compiled kernels, the buffers of a step). Measured 2026-11-28 with
openvino-genai's CPU plugin: the four demo graphs loaded at start by `appliance serve` (`appliance
demo`'s random tiny models, 1.6-3.6 MB of .bin files each), VmRSS of each idle engine process read
from /proc/PID/status (`rss_mb` of `GET /admin/models`): 149.5 MiB demo-chat, 145.0 demo-lookup,
159.4 demo-spec (two models), 164.6 demo-vision, so 145-161 MiB without their weight files; 160
rounded up, and 32 MiB for what a step allocates beside the KV cache (demo-rerank, 8.7 MB of
weights: 171 MiB idle, 178 MiB after requests)."""
WEIGHT_COPIES = {"ir": 2.0, "gguf": 2.5}
"""How many times the weight files count (see the module docstring)."""
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
    buffers_bytes: int = 0
    buffers_source: str = ""

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes + self.buffers_bytes + self.overhead_bytes

    def describe(self) -> str:
        """One line: the total, then each part with where it came from."""
        buffers = (
            f", batch buffers {format_bytes(self.buffers_bytes)} ({self.buffers_source})" if self.buffers_source else ""
        )
        return (
            f"footprint {format_bytes(self.total_bytes)}: weights {format_bytes(self.weights_bytes)} "
            f"({self.weights_source}), KV cache {format_bytes(self.kv_cache_bytes)} ({self.kv_cache_source})"
            f"{buffers}, engine {format_bytes(self.overhead_bytes)} (fixed overhead per engine process)"
        )

    def parts(self) -> dict[str, int]:
        """The parts by name, as `appliance check --json` prints them."""
        return {
            "weights_bytes": self.weights_bytes,
            "kv_cache_bytes": self.kv_cache_bytes,
            "buffers_bytes": self.buffers_bytes,
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
    batch_tokens: int = 0,
) -> Footprint:
    """The footprint of the model at `model_dir` (an IR folder or a GGUF file) served as described
    (`batch_tokens`: an embedding or rerank graph's tokens per pipeline call, else 0); never raises
    (a file that cannot be read counts 0)."""
    files = _file_size(model_dir) if gguf else _bin_sizes(model_dir)
    files_source = "the GGUF file" if gguf else ".bin files of the model folder"
    if not gguf and not files:  # ONNX models OpenVINO reads as they are (hibari voices)
        files, files_source = _bin_sizes(model_dir, "*.onnx"), ".onnx files of the model folder"
    if draft_dir is not None:
        files += _bin_sizes(draft_dir)
        files_source += " and the draft model's"
    copies = WEIGHT_COPIES["gguf" if gguf else "ir"]
    weights = int(files * copies)
    how = "read and converted by the GGUF reader" if gguf else "mapped, and the CPU plugin's own copy"
    weights_source = f"{copies:g} x {format_bytes(files)} of {files_source}: {how}"
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
    buffers, buffers_source = 0, ""
    if batch_tokens:
        width = _widest_layer(model_dir)
        buffers = batch_tokens * width * 4
        buffers_source = f"one batch of {batch_tokens} tokens x {width} (config.json intermediate_size) in f32"
    return Footprint(weights, int(kv), ENGINE_OVERHEAD_BYTES, weights_source, kv_source, buffers, buffers_source)


def _widest_layer(model_dir: Path) -> int:
    """The widest activation per token: config.json `intermediate_size`, else 4 x `hidden_size`, else 0."""
    config = json_object(model_dir / "config.json")
    width = config.get("intermediate_size")
    if isinstance(width, int) and width > 0:
        return width
    hidden = config.get("hidden_size")
    return 4 * hidden if isinstance(hidden, int) and hidden > 0 else 0


def _bin_sizes(folder: Path, pattern: str = "*.bin") -> int:
    try:
        return sum(path.stat().st_size for path in folder.glob(pattern) if path.is_file())
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
