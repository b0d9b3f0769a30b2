"""`appliance export` on a Hugging Face model built locally, then served through `appliance serve`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import openai
import pytest

from appliance.tools.demo.recipes import RECIPES
from appliance.tools.demo.tokenizer_specs import CHAT_TOKENIZER
from tests.conftest import start_server, stop_server


@pytest.fixture(scope="module")
def hf_model(tmp_path_factory) -> Path:
    """A tiny random chat model saved the way the Hugging Face Hub serves one."""
    from appliance.tools.demo.export import make_causal_lm, train_tokenizer

    folder = tmp_path_factory.mktemp("hf") / "tiny-chat"
    tokenizer = train_tokenizer(CHAT_TOKENIZER)
    model = make_causal_lm(RECIPES["demo-chat"].model, tokenizer)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def run_export(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "appliance", "export", *args], capture_output=True, text=True, timeout=600
    )


def test_export_then_serve(hf_model: Path, tmp_path: Path) -> None:
    models, graphs = tmp_path / "models", tmp_path / "graphs"
    result = run_export(
        str(hf_model),
        "--name",
        "tiny-export",
        "--weight-format",
        "int8",
        "--models-dir",
        str(models),
        "--graphs-dir",
        str(graphs),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[1/3]" in result.stdout and "[3/3]" in result.stdout and "chat template renders" in result.stdout
    for name in ("openvino_model.xml", "openvino_tokenizer.xml", "openvino_detokenizer.xml"):
        assert (models / "tiny-export" / name).is_file()
    assert not list(models.glob(".*partial"))
    graph = (graphs / "tiny-export.toml").read_text()
    assert 'name = "tiny-export"' in graph and 'model_path = "../models/tiny-export"' in graph

    again = run_export(str(hf_model), "--name", "tiny-export", "--models-dir", str(models), "--graphs-dir", str(graphs))
    assert again.returncode == 1 and "--force" in again.stderr

    server = start_server(graphs, tmp_path / "server.log")
    try:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
        reply = client.chat.completions.create(
            model="tiny-export", messages=[{"role": "user", "content": "hi"}], max_tokens=5
        )
        assert reply.usage.completion_tokens <= 5 and reply.choices[0].finish_reason in ("stop", "length")
    finally:
        stop_server(server)


def test_export_for_npu_writes_a_stateful_graph(hf_model: Path, tmp_path: Path) -> None:
    from appliance.graphfiles import load_graph

    models, graphs = tmp_path / "models", tmp_path / "graphs"
    result = run_export(
        str(hf_model),
        "--name",
        "tiny-npu",
        "--weight-format",
        "int4",
        "--device",
        "NPU",
        "--max-prompt-len",
        "512",
        "--models-dir",
        str(models),
        "--graphs-dir",
        str(graphs),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # NPU's weights: symmetric int4 on every layer (nncf records what it did in the IR).
    ir = (models / "tiny-npu" / "openvino_model.xml").read_text()
    assert 'value="int4_sym"' in ir and '<ratio value="1.0"' in ir and '<group_size value="128"' in ir
    graph = load_graph(graphs / "tiny-npu.toml")
    assert (graph.device, graph.pipeline_kind, graph.max_prompt_len, graph.min_response_len) == ("NPU", "LM", 512, 128)
    # This machine has no NPU: the graph is refused at start-up, naming the file and the device.
    check = subprocess.run(
        [sys.executable, "-m", "appliance", "check", "--graphs", str(graphs)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode != 0
    assert "tiny-npu.toml" in check.stderr and "asks for device NPU" in check.stderr


def test_export_failures_are_clear(tmp_path: Path) -> None:
    missing = run_export(str(tmp_path / "no-such-model"), "--name", "x", "--models-dir", str(tmp_path / "m"))
    assert missing.returncode == 1 and "no-such-model: no such folder" in missing.stderr
    bad_name = run_export("whatever", "--name", "../evil")
    assert bad_name.returncode == 1 and "--name" in bad_name.stderr
    assert not (tmp_path / "m" / "x").exists()


def test_devices_command() -> None:
    result = subprocess.run([sys.executable, "-m", "appliance", "devices"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert result.stdout.startswith("CPU") and "FULL_DEVICE_NAME" in result.stdout
