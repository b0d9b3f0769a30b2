"""Random-weight demo models built here, as specs: every field is part of the model's fingerprint.

`CausalLMSpec` and `QwenVLSpec` are exported to OpenVINO IR by `export`, `SpeechT5Spec` by `tts`;
`RandomGGUFSpec` is written straight to a GGUF file by `random_gguf` (its tokenizer copied from a
packaged GGUF), and `GGUFToIRSpec` turns another demo's GGUF file into IR with OpenVINO GenAI's
own reader (`gguf_ir`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .packaged_specs import PackagedGGUFSpec


@dataclass(frozen=True)
class CausalLMSpec:
    """A decoder-only transformer with random (seeded, hence reproducible) weights."""

    architecture: Literal["llama", "qwen2"]
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    seed: int = 0
    weight_format: Literal["int8"] = "int8"


@dataclass(frozen=True)
class QwenVLSpec:
    """A Qwen2-VL vision-language model with random (seeded) weights: a ViT image encoder whose
    merged patches become tokens of a small Qwen2 language model with multimodal RoPE."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    max_position_embeddings: int
    mrope_section: tuple[int, int, int]
    """Rotary dimensions for (time, height, width); they sum to head_dim / 2."""
    vision_depth: int
    vision_embed_dim: int
    vision_num_heads: int
    patch_size: int = 14
    spatial_merge_size: int = 2
    temporal_patch_size: int = 2
    min_pixels: int = 56 * 56
    max_pixels: int = 224 * 224
    """The image processor scales every image into [min_pixels, max_pixels] (few tokens per image)."""
    seed: int = 0
    weight_format: Literal["fp32"] = "fp32"


@dataclass(frozen=True)
class SpeechT5Spec:
    """A random-weight SpeechT5 text-to-speech model with a random HiFi-GAN vocoder, built and
    exported here (`tts`), and its voices: one speaker embedding per name, drawn from `seed`.

    `min_length_ratio` is generation_config.json's `minlenratio` (mel frames per input token at
    least: SpeechT5 makes 2 frames of 256 samples a decoder step); `vocoder_gain` scales the vocoder's output layer so the noise is audible."""

    hidden_size: int = 64
    layers: int = 2
    attention_heads: int = 2
    speaker_embedding_dim: int = 512
    voices: tuple[str, ...] = ("alloy", "echo")
    min_length_ratio: float = 4.0
    vocoder_gain: float = 3.0e7
    seed: int = 0


@dataclass(frozen=True)
class RandomGGUFSpec:
    """A Llama-shaped model with random (seeded) weights written straight to a GGUF file here
    (`random_gguf`, with the `gguf_writer`): projections Q4_0, the token embedding Q8_0 and tied
    to the output, norms f32 ones; the tokenizer and chat template are `tokenizer_from`'s metadata,
    copied verbatim. A network of an edge box's real size in seconds, for benchmarks: the same file
    is served by the appliance and by llama.cpp's server."""

    file: str
    """The file's name in the model directory, e.g. "demo-1b.Q4_0.gguf"."""
    tokenizer_from: PackagedGGUFSpec
    """The packaged GGUF file whose `tokenizer.*` metadata (vocabulary, merges, special tokens,
    chat template) the file copies."""
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    context_length: int
    rope_theta: float = 500_000.0
    rms_norm_eps: float = 1e-5
    seed: int = 0

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


@dataclass(frozen=True)
class GGUFToIRSpec:
    """OpenVINO IR made from another demo's GGUF file by OpenVINO GenAI itself (`gguf_ir`): its
    GGUF reader builds the model, `enable_save_ov_model` saves it with the tokenizer IRs, so the IR
    holds the GGUF's own weights (Q4_0 stays int4 with a scale per group of 32)."""

    source: str
    """The demo whose model directory holds the GGUF file (a `RandomGGUFSpec` recipe)."""
