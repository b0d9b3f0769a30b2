"""The CTranslate2 model.bin reader and the Whisper name mapping, on tiny files written here.

`write_model_bin` follows CTranslate2's own writer (`ModelSpec._serialize`); `ct2_whisper` fuses
Hugging Face Whisper tensors the way its Transformers converter does (`WhisperLoader`), so reading
the file back and undoing the mapping must give every tensor back unchanged.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from appliance.tools.demo.ct2 import Ct2FormatError, read_model_bin
from appliance.tools.demo.whisper import hf_state_dict, whisper_shape

_TYPE_IDS = {np.dtype("<f4"): 0, np.dtype("i1"): 1, np.dtype("<i2"): 2, np.dtype("<i4"): 3, np.dtype("<f2"): 4}


def _string(text: str) -> bytes:
    raw = text.encode() + b"\0"
    return struct.pack("<H", len(raw)) + raw


def _variable(name: str, value: np.ndarray, type_id: int | None = None) -> bytes:
    out = _string(name) + struct.pack("<B", value.ndim) + b"".join(struct.pack("<I", d) for d in value.shape)
    raw = value.tobytes()
    return out + struct.pack("<BI", _TYPE_IDS[value.dtype] if type_id is None else type_id, len(raw)) + raw


def write_model_bin(
    path: Path,
    variables: dict[str, np.ndarray],
    aliases: dict[str, str] | None = None,
    *,
    spec: str = "WhisperSpec",
    version: int = 6,
) -> Path:
    body = struct.pack("<I", version) + _string(spec) + struct.pack("<II", 3, len(variables))
    body += b"".join(_variable(name, variables[name]) for name in sorted(variables))
    body += struct.pack("<I", len(aliases or {}))
    body += b"".join(_string(alias) + _string(target) for alias, target in (aliases or {}).items())
    path.write_bytes(body)
    return path


def test_reads_tensors_scalars_and_aliases(tmp_path: Path) -> None:
    weight = np.arange(6, dtype="<f2").reshape(2, 3)
    path = write_model_bin(
        tmp_path / "model.bin",
        {"a/weight": weight, "a/bias": np.array([0.5, -1.0], dtype="<f4"), "a/num_heads": np.array(6, dtype="<i2")},
        {"b/weight": "a/weight"},
        spec="TransformerSpec",
    )
    model = read_model_bin(path)
    assert (model.spec, model.revision, model.binary_version) == ("TransformerSpec", 3, 6)
    assert model["a/weight"].dtype == np.float16 and np.array_equal(model["a/weight"], weight)
    assert np.array_equal(model["b/weight"], weight) and "b/weight" in model and "c" not in model
    assert model["a/bias"].tolist() == [0.5, -1.0]
    assert model.scalar("a/num_heads") == 6
    with pytest.raises(Ct2FormatError, match="not a scalar"):
        model.scalar("a/bias")


def test_bfloat16_becomes_float32(tmp_path: Path) -> None:
    values = np.array([1.5, -2.0, 3.25], dtype=np.float32)  # exact in bfloat16
    top_halves = (values.view(np.uint32) >> 16).astype("<u2")
    path = tmp_path / "model.bin"
    body = struct.pack("<I", 6) + _string("S") + struct.pack("<II", 1, 1)
    body += _string("w") + struct.pack("<BI", 1, 3) + struct.pack("<BI", 5, 6) + top_halves.tobytes()
    path.write_bytes(body + struct.pack("<I", 0))
    assert read_model_bin(path)["w"].tolist() == values.tolist()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda raw: raw[:-9], "truncated at byte"),
        (lambda raw: raw + b"\0", "unexpected bytes"),
        (lambda raw: struct.pack("<I", 3) + raw[4:], "binary version 3"),
        (lambda raw: struct.pack("<I", 7) + raw[4:], "binary version 7"),
    ],
)
def test_damaged_files_are_refused(tmp_path: Path, damage, message: str) -> None:
    path = write_model_bin(tmp_path / "model.bin", {"w": np.ones(4, dtype="<f4")})
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(Ct2FormatError, match=message):
        read_model_bin(path)


def test_unknown_type_wrong_size_and_dangling_alias_are_refused(tmp_path: Path) -> None:
    def file(variable: bytes, aliases: bytes = struct.pack("<I", 0)) -> Path:
        path = tmp_path / "model.bin"
        path.write_bytes(struct.pack("<I", 6) + _string("S") + struct.pack("<II", 1, 1) + variable + aliases)
        return path

    value = np.ones(4, dtype="<f4")
    with pytest.raises(Ct2FormatError, match="unknown data type id 9"):
        read_model_bin(file(_variable("w", value, type_id=9)))
    with pytest.raises(Ct2FormatError, match="16 bytes for 4 values of int16"):
        read_model_bin(file(_variable("w", value, type_id=2)))
    with pytest.raises(Ct2FormatError, match="names a missing variable"):
        read_model_bin(file(_variable("w", value), struct.pack("<I", 1) + _string("x") + _string("nope")))


# --- the Whisper mapping ------------------------------------------------------------------------

D_MODEL, HEADS, FFN, VOCAB, MELS, SOURCE, TARGET = 8, 2, 16, 12, 4, 6, 5


def hf_whisper(rng: np.random.Generator, layers: int = 2) -> dict[str, np.ndarray]:
    """Every tensor of a tiny WhisperForConditionalGeneration, by its Hugging Face name."""

    def rand(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    out = {
        "model.encoder.conv1.weight": rand(D_MODEL, MELS, 3),
        "model.encoder.conv1.bias": rand(D_MODEL),
        "model.encoder.conv2.weight": rand(D_MODEL, D_MODEL, 3),
        "model.encoder.conv2.bias": rand(D_MODEL),
        "model.encoder.embed_positions.weight": rand(SOURCE, D_MODEL),
        "model.decoder.embed_tokens.weight": rand(VOCAB, D_MODEL),
        "model.decoder.embed_positions.weight": rand(TARGET, D_MODEL),
    }
    for part in ("model.encoder", "model.decoder"):
        out |= {f"{part}.layer_norm.weight": rand(D_MODEL), f"{part}.layer_norm.bias": rand(D_MODEL)}
        for i in range(layers):
            attentions = ("self_attn", "encoder_attn") if part == "model.decoder" else ("self_attn",)
            for attn in attentions:
                for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    out[f"{part}.layers.{i}.{attn}.{proj}.weight"] = rand(D_MODEL, D_MODEL)
                    if proj != "k_proj":  # Whisper's key projections have no bias
                        out[f"{part}.layers.{i}.{attn}.{proj}.bias"] = rand(D_MODEL)
            for norm in (*(f"{a}_layer_norm" for a in attentions), "final_layer_norm"):
                out |= {
                    f"{part}.layers.{i}.{norm}.weight": rand(D_MODEL),
                    f"{part}.layers.{i}.{norm}.bias": rand(D_MODEL),
                }
            out |= {f"{part}.layers.{i}.fc1.weight": rand(FFN, D_MODEL), f"{part}.layers.{i}.fc1.bias": rand(FFN)}
            out |= {f"{part}.layers.{i}.fc2.weight": rand(D_MODEL, FFN), f"{part}.layers.{i}.fc2.bias": rand(D_MODEL)}
    out["proj_out.weight"] = out["model.decoder.embed_tokens.weight"]
    return out


def ct2_whisper(hf: dict[str, np.ndarray], layers: int = 2) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The variables CTranslate2's WhisperLoader writes for `hf` (float16, as faster-whisper's are)."""
    out: dict[str, np.ndarray] = {}

    def linear(ct2: str, parts: list[str]) -> None:
        out[f"{ct2}/weight"] = np.concatenate([hf[f"{p}.weight"] for p in parts])
        out[f"{ct2}/bias"] = np.concatenate([hf.get(f"{p}.bias", np.zeros(D_MODEL, np.float32)) for p in parts])

    def norm(ct2: str, part: str) -> None:
        out[f"{ct2}/gamma"], out[f"{ct2}/beta"] = hf[f"{part}.weight"], hf[f"{part}.bias"]

    linear("encoder/conv1", ["model.encoder.conv1"])
    linear("encoder/conv2", ["model.encoder.conv2"])
    out["encoder/position_encodings/encodings"] = hf["model.encoder.embed_positions.weight"]
    out["decoder/embeddings/weight"] = hf["model.decoder.embed_tokens.weight"]
    out["decoder/position_encodings/encodings"] = hf["model.decoder.embed_positions.weight"]
    for side in ("encoder", "decoder"):
        norm(f"{side}/layer_norm", f"model.{side}.layer_norm")
        out[f"{side}/num_heads"] = np.array(HEADS, dtype="<i2")
        for i in range(layers):
            hf_layer, ct2_layer = f"model.{side}.layers.{i}", f"{side}/layer_{i}"
            attn = f"{hf_layer}.self_attn"
            linear(f"{ct2_layer}/self_attention/linear_0", [f"{attn}.q_proj", f"{attn}.k_proj", f"{attn}.v_proj"])
            linear(f"{ct2_layer}/self_attention/linear_1", [f"{attn}.out_proj"])
            norm(f"{ct2_layer}/self_attention/layer_norm", f"{hf_layer}.self_attn_layer_norm")
            if side == "decoder":
                cross = f"{hf_layer}.encoder_attn"
                linear(f"{ct2_layer}/attention/linear_0", [f"{cross}.q_proj"])
                linear(f"{ct2_layer}/attention/linear_1", [f"{cross}.k_proj", f"{cross}.v_proj"])
                linear(f"{ct2_layer}/attention/linear_2", [f"{cross}.out_proj"])
                norm(f"{ct2_layer}/attention/layer_norm", f"{hf_layer}.encoder_attn_layer_norm")
            linear(f"{ct2_layer}/ffn/linear_0", [f"{hf_layer}.fc1"])
            linear(f"{ct2_layer}/ffn/linear_1", [f"{hf_layer}.fc2"])
            norm(f"{ct2_layer}/ffn/layer_norm", f"{hf_layer}.final_layer_norm")
    flags = {"pre_norm": 1, "activation": 3, "scale_embeddings": 0, "alibi": 0, "start_from_zero_embedding": 0}
    out |= {f"decoder/{flag}": np.array(value, dtype="i1") for flag, value in flags.items()}
    out = {name: v.astype("<f2") if v.dtype == np.float32 else v for name, v in out.items()}
    return out, {"decoder/projection/weight": "decoder/embeddings/weight"}


def test_whisper_tensors_round_trip_through_ctranslate2(tmp_path: Path) -> None:
    hf = {k: v.astype(np.float16).astype(np.float32) for k, v in hf_whisper(np.random.default_rng(0)).items()}
    variables, aliases = ct2_whisper(hf)
    model = read_model_bin(write_model_bin(tmp_path / "model.bin", variables, aliases))
    assert whisper_shape(model) == {
        "vocab_size": VOCAB,
        "d_model": D_MODEL,
        "num_mel_bins": MELS,
        "encoder_layers": 2,
        "decoder_layers": 2,
        "encoder_attention_heads": HEADS,
        "decoder_attention_heads": HEADS,
        "encoder_ffn_dim": FFN,
        "decoder_ffn_dim": FFN,
        "max_source_positions": SOURCE,
        "max_target_positions": TARGET,
    }
    back = hf_state_dict(model)
    assert sorted(back) == sorted(hf)
    for name, value in hf.items():
        assert back[name].dtype == np.float32 and np.array_equal(back[name], value), name


def test_a_file_of_another_layout_is_refused(tmp_path: Path) -> None:
    variables, aliases = ct2_whisper(hf_whisper(np.random.default_rng(1)))

    def read(**changes: np.ndarray) -> None:
        hf_state_dict(read_model_bin(write_model_bin(tmp_path / "model.bin", variables | changes, aliases)))

    with pytest.raises(Ct2FormatError, match="decoder/activation is 1"):
        read(**{"decoder/activation": np.array(1, dtype="i1")})
    with pytest.raises(Ct2FormatError, match="does not know: decoder/layernorm_embedding/gamma"):
        read(**{"decoder/layernorm_embedding/gamma": np.ones(D_MODEL, dtype="<f2")})
    fused = variables["encoder/layer_0/self_attention/linear_0/bias"].copy()
    fused[D_MODEL] = 1.0  # the key projection's part of the fused bias
    with pytest.raises(Ct2FormatError, match="key projection's part is not zero"):
        read(**{"encoder/layer_0/self_attention/linear_0/bias": fused})
    with pytest.raises(Ct2FormatError, match="not a Whisper model"):
        whisper_shape(read_model_bin(write_model_bin(tmp_path / "other.bin", variables, spec="TransformerSpec")))
