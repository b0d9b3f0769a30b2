"""A Llama-shaped GGUF model with random weights, written directly (no torch, no converter).

The tensors are those llama.cpp's converter writes for a Llama checkpoint with tied embeddings
(gguf-py `constants.py`, MODEL_ARCH.LLAMA), in its order: `token_embd.weight`, then per block
`attn_norm`, `attn_q`, `attn_k`, `attn_v`, `attn_output`, `ffn_norm`, `ffn_gate`, `ffn_up`,
`ffn_down`, then `output_norm.weight`; no `output.weight`, so llama.cpp and OpenVINO GenAI both
use the embedding as the output layer. Dimensions are GGUF's, fastest-varying first: a projection
from `n_in` to `n_out` is `(n_in, n_out)`.

Blocks are written as gguf-py `quants.py` lays them out: Q4_0 is an f16 scale `d` then 16 bytes
of nibbles (value `d * (q - 8)`; byte j holds weights j and j + 16 of the block), Q8_0 an f16
scale then 32 int8. The values are uniform random and centred: nibbles in 1..15 (q - 8 in -7..7)
and int8 in -127..127. Uniform nibbles in 0..15 would give every weight a mean of -d/2, a rank-one
part shared by all of a projection's outputs that grows about fivefold per projection at width
2048: it took over the residual stream, and the 1B model wrote one token over and over, the one
whose embedding row sums lowest. The scale is fixed per tensor so a projection's output has about unit
variance for unit-variance inputs (E[(q - 8)^2] = 56/3, hence d = 1 / sqrt(56/3 n_in)); the
embedding's scale gives unit-variance logits.
Norm weights are f32 ones. One numpy Generator seeded from the spec draws everything in file
order, so a build is reproducible byte for byte.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from appliance.graphfiles.gguf import read_header, read_metadata_entries

from . import packaged
from .gguf_writer import F32, Q4_0, Q8_0, MetadataValue, TensorInfo, write_gguf
from .random_specs import RandomGGUFSpec

__all__ = ["build", "llama_metadata", "llama_tensors", "write_random_llama"]

_BLOCK = 32
_Q4_0_SECOND_MOMENT = 56 / 3
"""E[(q - 8)^2] for a uniform nibble q in 1..15: 2 (1 + 4 + ... + 49) / 15."""
_Q8_0_SECOND_MOMENT = 127 * 128 / 3
"""E[q^2] for a uniform int8 q in -127..127: (127 * 128 * 255 / 3) / 255."""
_BLOCKS_PER_CHUNK = 1 << 18
"""Blocks drawn at a time: 4.5 MB of Q4_0, so memory stays small and the draw order is fixed."""
_LLAMA_FILE_TYPE_Q4_0 = 2
"""`general.file_type` MOSTLY_Q4_0 (gguf-py LlamaFileType): OpenVINO GenAI builds int4 weights from it."""
_QUANTIZATION_VERSION = 2


def build(name: str, spec: RandomGGUFSpec, out_dir: Path, log: Callable[[str], None]) -> Path:
    """Write `out_dir/spec.file` with the tokenizer of `spec.tokenizer_from`'s installed package; its path."""
    tokenizer_file = packaged.locate(name, spec.tokenizer_from)
    packaged.check_sha256(name, spec.tokenizer_from, tokenizer_file)
    target = out_dir / spec.file
    size = write_random_llama(target, spec, tokenizer_file, model_name=name)
    header = read_header(target)
    weights = sum(math.prod(tensor.shape) for tensor in header.tensors)
    facts = f"{weights / 1e6:,.0f} M weights, {size / 1e6:,.0f} MB, tokenizer of {tokenizer_file.name}"
    log(f"{name}: wrote {target.name}: {facts}")
    return target


def write_random_llama(path: Path, spec: RandomGGUFSpec, tokenizer_file: Path, *, model_name: str) -> int:
    """Write the random model of `spec` to `path` with every `tokenizer.*` metadata entry of the GGUF
    file `tokenizer_file`; returns the file's size in bytes."""
    tokenizer = read_metadata_entries(tokenizer_file, "tokenizer.")
    tokens = read_header(tokenizer_file).metadata.get("tokenizer.ggml.tokens")
    vocab_size = getattr(tokens, "count", 0)
    if "tokenizer.ggml.model" not in tokenizer or not vocab_size:
        raise ValueError(f"{tokenizer_file}: no tokenizer in its metadata (tokenizer.ggml.model and .tokens)")
    rng = np.random.default_rng(spec.seed)
    return write_gguf(
        path,
        llama_metadata(spec, vocab_size, model_name),
        llama_tensors(spec, vocab_size),
        lambda tensor: _random_data(tensor, rng),
        raw_metadata=tokenizer,
    )


def llama_metadata(spec: RandomGGUFSpec, vocab_size: int, model_name: str) -> dict[str, MetadataValue]:
    """The model's own metadata, as llama.cpp's converter names it for a Llama checkpoint."""
    return {
        "general.architecture": "llama",
        "general.type": "model",
        "general.name": model_name,
        "general.file_type": _LLAMA_FILE_TYPE_Q4_0,
        "general.quantization_version": _QUANTIZATION_VERSION,
        "llama.vocab_size": vocab_size,
        "llama.context_length": spec.context_length,
        "llama.embedding_length": spec.hidden_size,
        "llama.block_count": spec.num_hidden_layers,
        "llama.feed_forward_length": spec.intermediate_size,
        "llama.attention.head_count": spec.num_attention_heads,
        "llama.attention.head_count_kv": spec.num_key_value_heads,
        "llama.attention.layer_norm_rms_epsilon": spec.rms_norm_eps,
        "llama.rope.freq_base": spec.rope_theta,
        "llama.rope.dimension_count": spec.head_dim,
    }


def llama_tensors(spec: RandomGGUFSpec, vocab_size: int) -> list[TensorInfo]:
    """The tensor table, in llama.cpp's converter's order (see the module docstring)."""
    hidden, kv_width, ffn = spec.hidden_size, spec.num_key_value_heads * spec.head_dim, spec.intermediate_size
    if spec.hidden_size % spec.num_attention_heads or spec.num_attention_heads % spec.num_key_value_heads:
        raise ValueError("hidden_size must divide into heads, and heads into KV heads")
    if any(width % _BLOCK for width in (hidden, ffn)):
        raise ValueError(f"hidden_size and intermediate_size must be multiples of {_BLOCK} (the Q4_0 block)")
    tensors = [TensorInfo("token_embd.weight", Q8_0, (hidden, vocab_size))]
    for layer in range(spec.num_hidden_layers):
        block = f"blk.{layer}"
        tensors += [
            TensorInfo(f"{block}.attn_norm.weight", F32, (hidden,)),
            TensorInfo(f"{block}.attn_q.weight", Q4_0, (hidden, hidden)),
            TensorInfo(f"{block}.attn_k.weight", Q4_0, (hidden, kv_width)),
            TensorInfo(f"{block}.attn_v.weight", Q4_0, (hidden, kv_width)),
            TensorInfo(f"{block}.attn_output.weight", Q4_0, (hidden, hidden)),
            TensorInfo(f"{block}.ffn_norm.weight", F32, (hidden,)),
            TensorInfo(f"{block}.ffn_gate.weight", Q4_0, (hidden, ffn)),
            TensorInfo(f"{block}.ffn_up.weight", Q4_0, (hidden, ffn)),
            TensorInfo(f"{block}.ffn_down.weight", Q4_0, (ffn, hidden)),
        ]
    tensors.append(TensorInfo("output_norm.weight", F32, (hidden,)))
    return tensors


def _random_data(tensor: TensorInfo, rng: np.random.Generator) -> Iterator[bytes]:
    n_in = tensor.shape[0]
    if tensor.ggml_type == F32:
        yield np.ones(math.prod(tensor.shape), dtype="<f4").tobytes()
    elif tensor.ggml_type == Q4_0:
        yield from _blocks(tensor, rng, 1 / math.sqrt(_Q4_0_SECOND_MOMENT * n_in), _random_nibbles)
    elif tensor.ggml_type == Q8_0:
        # Embedding rows of about 1 / sqrt(n_in) per value: tied logits of about unit variance.
        yield from _blocks(tensor, rng, 1 / math.sqrt(_Q8_0_SECOND_MOMENT * n_in), _random_int8)
    else:  # pragma: no cover - llama_tensors uses only the types above
        raise ValueError(f"{tensor.name}: no random data for ggml type {tensor.ggml_type}")


def _blocks(
    tensor: TensorInfo, rng: np.random.Generator, scale: float, values: Callable[[np.random.Generator, int], np.ndarray]
) -> Iterator[bytes]:
    """The tensor's blocks: each the f16 `scale`, then `values(rng, count)` (count blocks' payloads)."""
    remaining = math.prod(tensor.shape) // _BLOCK
    scale_bytes = np.array([scale], dtype="<f2").view(np.uint8)
    while remaining:
        count = min(remaining, _BLOCKS_PER_CHUNK)
        payload = values(rng, count)
        blocks = np.empty((count, 2 + payload.shape[1]), dtype=np.uint8)
        blocks[:, :2] = scale_bytes
        blocks[:, 2:] = payload
        yield blocks.tobytes()
        remaining -= count


def _random_nibbles(rng: np.random.Generator, count: int) -> np.ndarray:
    """`count` Q4_0 payloads: 16 bytes, each two uniform nibbles in 1..15 (weight j low, j + 16 high)."""
    q = rng.integers(1, 16, size=(count, _BLOCK), dtype=np.uint8)
    return q[:, : _BLOCK // 2] | (q[:, _BLOCK // 2 :] << 4)


def _random_int8(rng: np.random.Generator, count: int) -> np.ndarray:
    """`count` Q8_0 payloads: 32 uniform int8 in -127..127 (ggml's quantizer never writes -128)."""
    return rng.integers(-127, 128, size=(count, _BLOCK), dtype=np.int8).view(np.uint8)
