"""The GGUF writer and the random Llama-shaped GGUF bench model (demo-1b) with its IR (demo-1b-ir).

A tiny model of the same kind (hidden 64, 2 layers) on SmolLM2's real tokenizer metadata is written
and read back with `appliance.graphfiles.gguf`; the 1B build itself is never run here. Two tests,
marked e2e, load the tiny file with OpenVINO GenAI: it makes the IR and generates the same on both,
and it generates what a Llama written here in numpy computes from the file's bytes (so the tensors
mean to OpenVINO what they mean to ggml; llama.cpp's server agreed too, up to near-tied logits).
"""

from __future__ import annotations

import math
import struct
import tomllib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from appliance.graphfiles import load_graph
from appliance.graphfiles.gguf import check_loadable, read_header, read_metadata_entries, tensor_byte_size
from appliance.tools.demo import DEFAULT_DEMOS, build_demo, packaged
from appliance.tools.demo.bench_recipes import BENCH_1B
from appliance.tools.demo.chat_recipes import SMOLLM2
from appliance.tools.demo.gguf_writer import F32, Q4_0, Q8_0, TensorInfo, write_gguf
from appliance.tools.demo.graph import render_graph
from appliance.tools.demo.random_gguf import llama_tensors, write_random_llama
from appliance.tools.demo.random_specs import GGUFToIRSpec, RandomGGUFSpec
from appliance.tools.demo.recipe_types import DemoRecipe, GraphSpec
from appliance.tools.demo.recipes import RECIPES, fingerprint

TINY = replace(
    BENCH_1B,
    file="tiny.Q4_0.gguf",
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=128,
    context_length=256,
)


@pytest.fixture(scope="module")
def smol_file() -> Path:
    try:
        return packaged.locate("demo-smol", SMOLLM2)
    except packaged.MissingPackageError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def tiny_file(smol_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tiny") / TINY.file
    write_random_llama(path, TINY, smol_file, model_name="tiny")
    return path


def test_the_tiny_file_reads_back_as_written(tiny_file: Path) -> None:
    header = read_header(tiny_file, whole=("tokenizer.ggml.tokens",))
    meta = header.metadata
    assert (header.version, header.architecture, header.context_length) == (3, "llama", 256)
    assert (meta["llama.embedding_length"], meta["llama.block_count"]) == (64, 2)
    assert meta["llama.feed_forward_length"] == 128
    assert (meta["llama.attention.head_count"], meta["llama.attention.head_count_kv"]) == (4, 2)
    assert (meta["llama.rope.dimension_count"], meta["llama.vocab_size"], meta["general.file_type"]) == (16, 49152, 2)
    assert meta["llama.rope.freq_base"] == 500_000.0
    assert meta["llama.attention.layer_norm_rms_epsilon"] == pytest.approx(1e-5)
    assert header.type_counts == {"Q4_0": 14, "F32": 5, "Q8_0": 1}
    names = [tensor.name for tensor in header.tensors]
    assert names[:3] == ["token_embd.weight", "blk.0.attn_norm.weight", "blk.0.attn_q.weight"]
    assert names[-1] == "output_norm.weight" and "output.weight" not in names  # tied, as Llama-3.2-1B
    shapes = {tensor.name: tensor.shape for tensor in header.tensors}
    assert shapes["token_embd.weight"] == (64, 49152)  # GGUF order: the row's length first
    assert (shapes["blk.1.attn_k.weight"], shapes["blk.1.ffn_down.weight"]) == ((64, 32), (128, 64))
    assert header.data_offset % 32 == 0 and all(tensor.offset % 32 == 0 for tensor in header.tensors)
    last = header.tensors[-1]
    assert tiny_file.stat().st_size == header.data_offset + last.offset + 256  # 64 f32, padded to 32 bytes
    check_loadable(header, "LEGACY")


def test_every_tokenizer_entry_is_smollm2s_verbatim(tiny_file: Path, smol_file: Path) -> None:
    copied = read_metadata_entries(tiny_file, "tokenizer.")
    assert copied == read_metadata_entries(smol_file, "tokenizer.")
    assert {"tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.chat_template"} <= copied.keys()
    tokens = read_header(tiny_file, whole=("tokenizer.ggml.tokens",)).metadata["tokenizer.ggml.tokens"]
    assert tokens == read_header(smol_file, whole=("tokenizer.ggml.tokens",)).metadata["tokenizer.ggml.tokens"]


def _blocks(path: Path, name: str, block_bytes: int) -> np.ndarray:
    header = read_header(path)
    (tensor,) = [t for t in header.tensors if t.name == name]
    size = tensor_byte_size(tensor.ggml_type, tensor.shape)
    data = np.fromfile(path, dtype=np.uint8, count=size, offset=header.data_offset + tensor.offset)
    return data.reshape(-1, block_bytes)


def test_weights_give_unit_variance_outputs(tiny_file: Path) -> None:
    """Dequantized as ggml does (Q4_0: d * (q - 8), low nibbles first), a projection maps unit-variance
    inputs to about unit-variance outputs, with no shift common to all of them; norms are ones."""
    blocks = _blocks(tiny_file, "blk.0.ffn_gate.weight", 18)
    d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    q = np.concatenate([blocks[:, 2:] & 0x0F, blocks[:, 2:] >> 4], axis=1).astype(np.float32) - 8
    weights = (d * q).reshape(128, 64)  # 128 outputs over 64 inputs
    assert d[0, 0] == np.float16(1 / math.sqrt(56 / 3 * 64))
    assert q.min() == -7 and q.max() == 7
    outputs = weights @ np.random.default_rng(1).standard_normal((64, 4096))
    assert 0.8 < outputs.std() < 1.2
    # Centred: a mean weight of -d/2 (nibbles 0..15) made every output share one growing direction.
    assert abs(weights.mean()) < 0.05 * weights.std()
    assert abs((weights @ np.ones(64)).mean()) < 0.3  # a constant input: no common shift of the outputs
    embedding = _blocks(tiny_file, "token_embd.weight", 34)
    assert embedding[:, 2:].view(np.int8).min() >= -127
    norm = _blocks(tiny_file, "blk.0.attn_norm.weight", 4).view("<f4")
    assert (norm == 1).all()


def test_a_build_is_reproducible_and_the_seed_matters(tiny_file: Path, smol_file: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.gguf"
    write_random_llama(again, TINY, smol_file, model_name="tiny")
    assert again.read_bytes() == tiny_file.read_bytes()
    other = tmp_path / "other.gguf"
    write_random_llama(other, replace(TINY, seed=1), smol_file, model_name="tiny")
    assert other.stat().st_size == again.stat().st_size and other.read_bytes() != again.read_bytes()


def test_the_writer_refuses_data_of_the_wrong_size_and_keys_given_twice(tmp_path: Path) -> None:
    tensor = TensorInfo("a.weight", Q8_0, (32, 2))
    with pytest.raises(ValueError, match="a.weight: 34 bytes of data, its type and shape take 68"):
        write_gguf(tmp_path / "m.gguf", {}, [tensor], lambda t: [bytes(34)])
    entry = struct.pack("<Q", 5) + b"x.key" + struct.pack("<II", 4, 1)
    with pytest.raises(ValueError, match="given twice: x.key"):
        write_gguf(tmp_path / "m.gguf", {"x.key": 1}, [], lambda t: [], raw_metadata={"x.key": entry})
    with pytest.raises(ValueError, match="does not fit a uint32"):
        write_gguf(tmp_path / "m.gguf", {"x.key": -1}, [], lambda t: [])


def test_the_writer_aligns_every_tensor(tmp_path: Path) -> None:
    tensors = [TensorInfo("a", F32, (3,)), TensorInfo("b", Q4_0, (32, 3)), TensorInfo("c", F32, (1,))]
    size = write_gguf(tmp_path / "m.gguf", {"general.architecture": "llama", "x.flag": True}, tensors, _zeros)
    header = read_header(tmp_path / "m.gguf")
    assert [(t.offset, t.shape) for t in header.tensors] == [(0, (3,)), (32, (32, 3)), (96, (1,))]
    assert header.metadata == {"general.architecture": "llama", "x.flag": True}
    assert size == (tmp_path / "m.gguf").stat().st_size == header.data_offset + 128


def _zeros(tensor: TensorInfo) -> list[bytes]:
    return [bytes(tensor.nbytes)]


def test_the_1b_shape_is_llama_3_2_1b_on_smollm2s_vocabulary() -> None:
    tensors = llama_tensors(BENCH_1B, 49152)
    parameters = sum(math.prod(tensor.shape) for tensor in tensors)
    assert 1.05e9 < parameters < 1.1e9
    assert 0.64e9 < sum(tensor.nbytes for tensor in tensors) < 0.67e9
    assert (BENCH_1B.head_dim, BENCH_1B.rope_theta, BENCH_1B.context_length) == (64, 500_000.0, 4096)


def test_demo_1b_recipes_and_graphs() -> None:
    assert "demo-1b" not in DEFAULT_DEMOS and "demo-1b-ir" not in DEFAULT_DEMOS
    gguf, ir = RECIPES["demo-1b"], RECIPES["demo-1b-ir"]
    assert gguf.model == BENCH_1B and gguf.requires() == ()
    assert ir.model == GGUFToIRSpec(source="demo-1b") and ir.requires() == ("demo-1b",)
    assert fingerprint(ir)["source"] == fingerprint(gguf)  # a new GGUF makes a new IR
    for recipe, model_path in ((gguf, "../models/demo-1b/demo-1b.Q4_0.gguf"), (ir, "../models/demo-1b-ir")):
        graph = tomllib.loads(render_graph(recipe, Path("/r/graphs"), Path("/r/models")))
        assert (graph["model_path"], graph["pipeline"]) == (model_path, "LM_CB")
        assert graph["scheduler"]["cache_size"] == 2 and graph["scheduler"]["max_num_seqs"] == 16
        assert graph["scheduler"]["max_num_batched_tokens"] == 512 and graph["limits"]["max_tokens_limit"] == 1024


def _tiny_recipes(monkeypatch: pytest.MonkeyPatch) -> None:
    scheduler = dict(cache_size=1, max_num_seqs=4, max_num_batched_tokens=64, max_tokens_limit=32)
    for recipe in (
        DemoRecipe(name="demo-tiny", model=TINY, graph=GraphSpec(description="test", **scheduler)),
        DemoRecipe(
            name="demo-tiny-ir", model=GGUFToIRSpec(source="demo-tiny"), graph=GraphSpec(description="t", **scheduler)
        ),
    ):
        monkeypatch.setitem(RECIPES, recipe.name, recipe)


def test_build_demo_writes_the_gguf_and_its_graph_once(
    smol_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _tiny_recipes(monkeypatch)
    lines: list[str] = []
    (graph_path,) = build_demo(tmp_path, ["demo-tiny"], log=lines.append)
    model = tmp_path / "models" / "demo-tiny" / TINY.file
    assert lines[0].startswith("demo-tiny: wrote tiny.Q4_0.gguf: 3 M weights, 5 MB, tokenizer of SmolLM2-135M")
    assert load_graph(graph_path).model_dir == model.resolve()
    lines.clear()
    assert build_demo(tmp_path, ["demo-tiny"], log=lines.append) == [graph_path]
    assert lines == [f"demo-tiny: up to date ({tmp_path / 'models' / 'demo-tiny'})"]


def test_a_missing_tokenizer_package_is_said_before_any_build(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _tiny_recipes(monkeypatch)
    missing = replace(TINY, tokenizer_from=replace(SMOLLM2, package="no_such_pkg"))
    monkeypatch.setitem(RECIPES, "demo-tiny", replace(RECIPES["demo-tiny"], model=missing))
    with pytest.raises(packaged.MissingPackageError, match="demo-tiny: its model comes from the Python package"):
        build_demo(tmp_path, ["demo-tiny-ir"], log=lambda line: None)
    assert not (tmp_path / "models" / "demo-tiny").exists()


@pytest.mark.e2e
def test_openvino_genai_loads_the_tiny_gguf_and_its_ir_alike(
    smol_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The GGUF loads in OpenVINO GenAI; the IR it saves holds 4-bit weights and, greedy, generates
    what the GGUF generates (f32 inference: random weights give near-tied logits)."""
    import openvino_genai

    _tiny_recipes(monkeypatch)
    (graph_path,) = build_demo(tmp_path, ["demo-tiny-ir"], log=lambda line: None)
    ir_dir = tmp_path / "models" / "demo-tiny-ir"
    assert load_graph(graph_path).model_dir == ir_dir.resolve()
    assert 'element_type="u4"' in (ir_dir / "openvino_model.xml").read_text()
    config = openvino_genai.GenerationConfig(max_new_tokens=6, ignore_eos=True, do_sample=False)
    results = []
    for source in (tmp_path / "models" / "demo-tiny" / TINY.file, ir_dir):
        pipeline = openvino_genai.LLMPipeline(str(source), "CPU", INFERENCE_PRECISION_HINT="f32")
        result = pipeline.generate(["The capital of France is"], config)
        assert result.perf_metrics.get_num_generated_tokens() == 6
        assert result.texts[0] and math.isfinite(result.scores[0])
        results.append(result.texts[0])
    assert results[0] == results[1]

    lines: list[str] = []
    build_demo(tmp_path, ["demo-tiny-ir"], log=lines.append)
    assert lines[1] == f"demo-tiny-ir: up to date ({ir_dir})"
    build_demo(tmp_path, ["demo-tiny"], force=True, log=lambda line: None)
    lines.clear()
    build_demo(tmp_path, ["demo-tiny-ir"], log=lines.append)  # its GGUF is newer: made again
    assert lines[1] == "demo-tiny-ir: rebuilding (recipe changed or files missing)"


def _dequantized(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of the tiny file as float64, a matrix as (outputs, inputs), dequantized as ggml does."""
    header = read_header(path)
    weights = {}
    for tensor in header.tensors:
        size = tensor_byte_size(tensor.ggml_type, tensor.shape)
        data = np.fromfile(path, dtype=np.uint8, count=size, offset=header.data_offset + tensor.offset)
        if tensor.ggml_type == F32:
            weights[tensor.name] = data.view("<f4").astype(np.float64)
            continue
        blocks = data.reshape(-1, 18 if tensor.ggml_type == Q4_0 else 34)
        d = blocks[:, :2].copy().view("<f2").astype(np.float64)
        if tensor.ggml_type == Q4_0:
            q = np.concatenate([blocks[:, 2:] & 0x0F, blocks[:, 2:] >> 4], axis=1).astype(np.float64) - 8
        else:
            q = blocks[:, 2:].view(np.int8).astype(np.float64)
        weights[tensor.name] = (d * q).reshape(tensor.shape[1], tensor.shape[0])
    return weights


def _llama_logits(weights: dict[str, np.ndarray], ids: list[int], spec: RandomGGUFSpec) -> np.ndarray:
    """The last position's logits of a Llama over `ids` (RoPE on adjacent pairs, llama.cpp's for a
    llama GGUF; grouped-query attention; SwiGLU; tied output)."""
    heads, kv_heads, dim = spec.num_attention_heads, spec.num_key_value_heads, spec.head_dim

    def norm(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + spec.rms_norm_eps) * weight

    def rope(x: np.ndarray) -> np.ndarray:
        angles = np.arange(len(x))[:, None, None] * spec.rope_theta ** (-np.arange(0, dim, 2) / dim)
        even, odd, out = x[..., 0::2], x[..., 1::2], np.empty_like(x)
        out[..., 0::2] = even * np.cos(angles) - odd * np.sin(angles)
        out[..., 1::2] = even * np.sin(angles) + odd * np.cos(angles)
        return out

    x, count = weights["token_embd.weight"][ids], len(ids)
    for layer in range(spec.num_hidden_layers):
        w = {name.split(".", 2)[2]: value for name, value in weights.items() if name.startswith(f"blk.{layer}.")}
        a = norm(x, w["attn_norm.weight"])
        q = rope((a @ w["attn_q.weight"].T).reshape(count, heads, dim))
        k = np.repeat(rope((a @ w["attn_k.weight"].T).reshape(count, kv_heads, dim)), heads // kv_heads, axis=1)
        v = np.repeat((a @ w["attn_v.weight"].T).reshape(count, kv_heads, dim), heads // kv_heads, axis=1)
        scores = np.einsum("thd,shd->hts", q, k) / math.sqrt(dim) + np.triu(np.full((count, count), -np.inf), 1)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        x = x + np.einsum("hts,shd->thd", probs, v).reshape(count, -1) @ w["attn_output.weight"].T
        m = norm(x, w["ffn_norm.weight"])
        gate, up = m @ w["ffn_gate.weight"].T, m @ w["ffn_up.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ w["ffn_down.weight"].T
    return norm(x, weights["output_norm.weight"])[-1] @ weights["token_embd.weight"].T


@pytest.mark.e2e
def test_openvino_genai_computes_what_the_file_says(tiny_file: Path) -> None:
    import openvino_genai

    pipeline = openvino_genai.LLMPipeline(str(tiny_file), "CPU", INFERENCE_PRECISION_HINT="f32")
    tokenizer = pipeline.get_tokenizer()
    prompt = "Once upon a time"
    ids = [int(i) for i in tokenizer.encode(prompt).input_ids.data[0]]
    weights, expected = _dequantized(tiny_file), []
    for _ in range(8):
        logits = _llama_logits(weights, ids + expected, TINY)
        top = np.sort(logits)[-2:]
        assert top[1] - top[0] > 1e-3, "a near tie: the comparison would test rounding, pick another prompt"
        expected.append(int(logits.argmax()))
    generated = pipeline.generate(prompt, max_new_tokens=8, ignore_eos=True, do_sample=False, apply_chat_template=False)
    assert generated == tokenizer.decode(expected)
