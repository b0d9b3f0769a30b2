"""A graph's footprint estimated from fake model folders: the .bin files (and a draft's), the
GGUF file, `cache_size` for continuous batching, one context of KV from config.json otherwise,
the engine's overhead; and a graph too big for the budget refused by `appliance check`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from appliance.cli import main
from appliance.graphfiles import load_graph
from appliance.graphfiles.footprint import ENGINE_OVERHEAD_BYTES, GIB, over_budget
from appliance.memory_budget import MemoryBudget
from tests.conftest import on_demand_chats

_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "max_position_embeddings": 1000,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "hidden_size": 128,
}


def _folder(path: Path, sizes: dict[str, int], config: dict | None = None) -> Path:
    path.mkdir(parents=True)
    for name, size in sizes.items():
        (path / name).write_bytes(b"\0" * size)
    (path / "config.json").write_text(json.dumps(config or _CONFIG))
    return path


def _graph(tmp_path: Path, body: str):
    graph_file = tmp_path / "g.toml"
    graph_file.write_text(f'name = "g"\n{body}')
    return load_graph(graph_file)


def test_an_ir_folder_counts_its_bin_files_and_cache_size(tmp_path: Path) -> None:
    bins = {"openvino_model.bin": 5000, "openvino_tokenizer.bin": 300, "openvino_detokenizer.bin": 200}
    _folder(tmp_path / "m", {**bins, "openvino_model.xml": 70_000, "tokenizer.json": 9000})
    graph = _graph(tmp_path, 'model_path = "m"\npipeline = "LM_CB"\n[scheduler]\ncache_size = 3\n')
    footprint = graph.footprint
    # The files mapped and the CPU plugin's own copy: twice.
    assert (footprint.weights_bytes, footprint.kv_cache_bytes, footprint.buffers_bytes) == (11000, 3 * GIB, 0)
    assert graph.footprint_bytes == 11000 + 3 * GIB + ENGINE_OVERHEAD_BYTES
    assert footprint.describe().startswith(
        "footprint 3.2 GiB: weights 10.7 KiB (2 x 5.4 KiB of .bin files of the model folder: mapped"
    )
    assert "KV cache 3.0 GiB ([scheduler] cache_size)" in footprint.describe()


def test_a_draft_model_adds_its_files_and_its_cache(tmp_path: Path) -> None:
    _folder(tmp_path / "m", {"openvino_model.bin": 4000})
    _folder(tmp_path / "d", {"openvino_model.bin": 1000})
    graph = _graph(
        tmp_path, 'model_path = "m"\npipeline = "LM_CB"\ndraft_model_path = "d"\n[draft_scheduler]\ncache_size = 2\n'
    )
    assert graph.footprint.weights_bytes == 2 * 5000
    assert graph.footprint.kv_cache_bytes == (1 + 2) * GIB  # the main's default 1 GB and the draft's 2


def test_cache_size_0_counts_one_context_of_kv_at_its_precision(tmp_path: Path) -> None:
    _folder(tmp_path / "m", {"openvino_model.bin": 10})
    graph = _graph(
        tmp_path,
        'model_path = "m"\npipeline = "LM_CB"\n[scheduler]\ncache_size = 0\n[plugin_config]\n'
        'KV_CACHE_PRECISION = "f32"\nINFERENCE_PRECISION_HINT = "f32"\n',
    )
    # keys and values x 2 layers x 2 KV heads x 32 (128 / 4) x 4 bytes, for 1000 tokens
    assert graph.footprint.kv_cache_bytes == 2 * 2 * 2 * 32 * 4 * 1000
    assert "grows on demand: one context of 1000 tokens, 1024 bytes each" in graph.footprint.describe()


def test_a_gguf_file_counts_its_size(tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(b"GGUF" + b"\0" * 996)
    graph = _graph(tmp_path, 'model_path = "m.gguf"\n')
    assert graph.footprint.weights_bytes == 2500
    assert graph.footprint.weights_source.startswith("2.5 x 1000 B of the GGUF file")


def test_an_embedding_graph_counts_a_batch_not_a_kv_cache(tmp_path: Path) -> None:
    _folder(tmp_path / "m", {"openvino_model.bin": 700}, {**_CONFIG, "intermediate_size": 512})
    graph = _graph(tmp_path, 'model_path = "m"\npipeline = "TEXT_EMBEDDING"\n[embedding]\nmax_batch_tokens = 1000\n')
    assert (graph.footprint.weights_bytes, graph.footprint.kv_cache_bytes) == (1400, 0)
    assert graph.footprint.buffers_bytes == 1000 * 512 * 4  # the widest activation of a batch, f32
    assert "batch buffers 2.0 MiB (one batch of 1000 tokens x 512" in graph.footprint.describe()


def test_over_budget_names_the_graph_its_estimate_and_the_budget(tmp_path: Path) -> None:
    _folder(tmp_path / "m", {"openvino_model.bin": 10})
    graph = _graph(tmp_path, 'model_path = "m"\npipeline = "LM_CB"\n')
    assert over_budget("g", graph.footprint, None) is None
    assert over_budget("g", graph.footprint, MemoryBudget(2 * GIB, "memory_budget 2GiB")) is None
    problem = over_budget("g", graph.footprint, MemoryBudget(GIB, "memory_budget 1GiB"))
    assert problem is not None
    assert (
        problem.startswith("g: its estimated footprint 1.2 GiB")
        and "memory_budget 1.0 GiB (memory_budget 1GiB)" in problem
    )


def test_check_prints_json_and_refuses_a_graph_over_the_budget(
    demo_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("appliance.engine.host.devices.available_devices", lambda: ["CPU"])
    graphs = on_demand_chats(demo_root, tmp_path / "graphs", ["g"])
    weights = sum(path.stat().st_size for path in (demo_root / "models" / "demo-chat").glob("*.bin"))
    settings = tmp_path / "appliance.toml"
    settings.write_text('memory_budget = "4GiB"\n')
    assert main(["check", "--config", str(settings), "--json", str(graphs)]) == 0
    [summary] = json.loads(capsys.readouterr().out)
    assert summary["name"] == "g" and summary["pipeline"] == "LM_CB" and summary["device"] == "CPU"
    assert summary["footprint_bytes"] == 2 * weights + GIB + ENGINE_OVERHEAD_BYTES  # demo-chat: cache_size = 1
    parts = ("weights_bytes", "kv_cache_bytes", "buffers_bytes", "overhead_bytes")
    assert sum(summary[part] for part in parts) == summary["footprint_bytes"]
    settings.write_text('memory_budget = "1GiB"\n')
    assert main(["check", "--config", str(settings), str(graphs)]) == 2
    captured = capsys.readouterr()
    assert "footprint 1.2 GiB" in captured.out  # the text output gives it per graph
    assert "error  g: its estimated footprint 1.2 GiB" in captured.err
    assert "exceeds memory_budget 1.0 GiB (memory_budget 1GiB)" in captured.err
