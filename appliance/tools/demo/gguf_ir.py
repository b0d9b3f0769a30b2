"""OpenVINO IR made from a GGUF file by OpenVINO GenAI itself.

`LLMPipeline(gguf, "CPU", enable_save_ov_model=True)` builds the model with its GGUF reader
(openvino.genai `gguf_modeling.cpp`, `create_from_gguf`) and saves `openvino_model.xml/.bin` and
the tokenizer and detokenizer IRs beside the GGUF file: the IR holds the GGUF's own weights (a
Q4_0 projection stays 4-bit with one f16 scale per group of 32), so an IR graph and a GGUF graph
of one model differ in how they load, not in what they compute. `ATTENTION_BACKEND="SDPA"` makes
the pipeline the stateful one, whose model is saved before any paged-attention rewrite. The GGUF
file is linked into a scratch folder first, so nothing is written beside the demo's own file.

A `config.json` in Hugging Face's layout is written from the GGUF metadata: the appliance reads the
context and the KV-cache size per token from it (`graphfiles.facts`, `graphfiles.footprint`).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from appliance.graphfiles.gguf import GGUFHeader, read_header

__all__ = ["IR_FILES", "build", "hf_config"]

SAVED_FILES = (
    "openvino_model.xml",
    "openvino_model.bin",
    "openvino_tokenizer.xml",
    "openvino_tokenizer.bin",
    "openvino_detokenizer.xml",
    "openvino_detokenizer.bin",
)
"""What OpenVINO GenAI saves beside the GGUF file."""
IR_FILES = (*SAVED_FILES, "config.json")
"""What a finished IR folder holds."""
_HF_ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}


def build(name: str, gguf_path: Path, out_dir: Path, scratch_dir: Path, log: Callable[[str], None]) -> None:
    """Write the IR of the GGUF file at `gguf_path` into the (empty) `out_dir`."""
    import openvino_genai

    header = read_header(gguf_path)
    work = scratch_dir / "gguf"
    work.mkdir()
    linked = work / gguf_path.name
    try:
        os.link(gguf_path, linked)
    except OSError:  # another filesystem, or one without hard links
        shutil.copyfile(gguf_path, linked)
    started = time.perf_counter()
    pipeline = openvino_genai.LLMPipeline(str(linked), "CPU", ATTENTION_BACKEND="SDPA", enable_save_ov_model=True)
    del pipeline
    missing = [file for file in SAVED_FILES if not (work / file).is_file()]
    if missing:
        raise RuntimeError(f"{name}: OpenVINO GenAI saved no {', '.join(missing)} beside {linked}")
    for file in SAVED_FILES:
        os.replace(work / file, out_dir / file)
    (out_dir / "config.json").write_text(json.dumps(hf_config(header), indent=2) + "\n", encoding="utf-8")
    _verify_4bit(name, header, out_dir / "openvino_model.xml")
    log(f"{name}: OpenVINO GenAI wrote the IR of {gguf_path.name} in {time.perf_counter() - started:.1f} s")


def hf_config(header: GGUFHeader) -> dict[str, Any]:
    """A Hugging Face `config.json` for the model in the GGUF `header` (the keys the appliance and
    OpenVINO tools read; ValueError for an architecture other than llama, qwen2, qwen3)."""
    arch, meta = header.architecture, header.metadata
    if arch not in _HF_ARCHITECTURES:
        raise ValueError(f"{header.path}: no IR config for architecture {arch!r}")
    heads = meta[f"{arch}.attention.head_count"]
    hidden = meta[f"{arch}.embedding_length"]
    assert isinstance(heads, int) and isinstance(hidden, int)
    tokens = meta.get("tokenizer.ggml.tokens")
    config = {
        "architectures": [_HF_ARCHITECTURES[arch]],
        "model_type": arch,
        "hidden_size": hidden,
        "intermediate_size": meta.get(f"{arch}.feed_forward_length"),
        "num_hidden_layers": meta[f"{arch}.block_count"],
        "num_attention_heads": heads,
        "num_key_value_heads": meta.get(f"{arch}.attention.head_count_kv", heads),
        "head_dim": hidden // heads,
        "max_position_embeddings": header.context_length,
        "rms_norm_eps": _f32(meta[f"{arch}.attention.layer_norm_rms_epsilon"]),
        "rope_theta": _f32(meta.get(f"{arch}.rope.freq_base", 10_000.0)),
        "vocab_size": getattr(tokens, "count", None),
        "tie_word_embeddings": not any(tensor.name == "output.weight" for tensor in header.tensors),
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
    }
    return {key: value for key, value in config.items() if value is not None}


def _f32(value: object) -> float:
    """A float32 metadata value as the decimal it was written from (1e-05, not 9.99999974e-06)."""
    assert isinstance(value, float | int)
    return float(f"{value:.7g}")


def _verify_4bit(name: str, header: GGUFHeader, model_xml: Path) -> None:
    """The IR of a 4-bit GGUF file keeps 4-bit weights (the point of making it from the GGUF)."""
    if not {"Q4_0", "Q4_1"} & header.type_counts.keys():
        return
    text = model_xml.read_text(encoding="utf-8")
    if 'element_type="u4"' not in text and 'element_type="i4"' not in text:
        raise RuntimeError(f"{name}: the IR OpenVINO GenAI saved from {header.path.name} holds no 4-bit weights")
