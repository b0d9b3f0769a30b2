"""Graph files: valid ones load, every mistake names the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.errors import ConfigError
from appliance.graphfiles import load_graph, load_graphs
from appliance.graphfiles.checks import check_device

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str, name: str = "g.toml") -> Path:
    (tmp_path / "model").mkdir(exist_ok=True)
    path = tmp_path / name
    path.write_text(text)
    return path


def test_minimal_graph_gets_defaults(tmp_path: Path) -> None:
    graph = load_graph(write(tmp_path, 'name = "m"\nmodel_path = "model"\n'))
    assert graph.device == "CPU"
    assert graph.model_dir == (tmp_path / "model").resolve()
    assert graph.scheduler.max_num_batched_tokens == 512
    assert graph.prefix_caching  # a text model without assisted decoding
    assert graph.stream_interval_ms == 5
    explicit = load_graph(
        write(tmp_path, 'name = "m"\nmodel_path = "model"\n[scheduler]\nenable_prefix_caching = false\n')
    )
    assert not explicit.prefix_caching
    lookup = load_graph(write(tmp_path, 'name = "m"\nmodel_path = "model"\nprompt_lookup = true\n'))
    assert not lookup.prefix_caching  # not measured with assisted decoding: off unless asked for
    assert graph.limits.max_tokens_limit == 4096


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('name = "m"\nmodel_path = "model"\n[scheduler]\ncache_sise = 1\n', "cache_sise"),
        ('name = "m"\nmodel_path = "model"\n[scheduler]\ncache_size = -1\n', "scheduler.cache_size"),
        ('name = "m"\nmodel_path = "model"\ncolour = 1\n', "colour"),
        ('model_path = "model"\n', "name"),
        ('name = "m"\nmodel_path = "model"\ndevice = "TPU"\n', "device"),
        ('name = "m"\nmodel_path = "missing"\n', "model_path"),
        ('name = "m"\nmodel_path = "model"\npipeline = "XYZ"\n', "pipeline"),
        ('name = "m"\nmodel_path = "model"\n[limits]\nmax_tokens_limit = "many"\n', "limits.max_tokens_limit"),
        ('name = "m\nmodel_path = "model"\n', "not valid TOML"),
        ('name = "m"\nmodel_path = "model"\nstream_interval_ms = -1\n', "stream_interval_ms"),
        ('name = "m"\nmodel_path = "model"\nstream_interval_ms = 5000\n', "stream_interval_ms"),
        # TOML writes infinity: a timeout of `inf` would never fire.
        ('name = "m"\nmodel_path = "model"\nload_timeout_seconds = inf\n', "load_timeout_seconds"),
        ('name = "m"\nmodel_path = "model"\nidle_unload_seconds = inf\n', "idle_unload_seconds"),
        ('name = "m"\nmodel_path = "model"\n[limits]\nrequest_timeout_seconds = inf\n', "request_timeout_seconds"),
        (
            'name = "m"\nmodel_path = "model"\n[plugin_config]\nKV_CACHE_PRECISION = "i8"\n',
            "KV_CACHE_PRECISION` is 'i8'",
        ),
        ('name = "m"\nmodel_path = "model"\n[plugin_config]\nKV_CACHE_PRECISION = "f32"\n', "INFERENCE_PRECISION_HINT"),
        ('name = "m"\nmodel_path = "model"\n[plugin_config]\nINFERENCE_PRECISION_HINT = "fp16"\n', "bf16, f16, f32"),
        ('name = "m"\nmodel_path = "model"\n[plugin_config]\nDYNAMIC_QUANTIZATION_GROUP_SIZE = -1\n', "DYNAMIC_QUANT"),
        ('name = "m"\nmodel_path = "model"\n[plugin_config]\nENABLE_CPU_PINNING = "no"\n', "true or false"),
        (
            'name = "m"\nmodel_path = "model"\ndraft_model_path = "model"\n[draft_plugin_config]\nKV_CACHE_PRECISION = "q4"\n',
            "draft_plugin_config.KV_CACHE_PRECISION",
        ),
    ],
)
def test_bad_graph_names_file_and_field(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_graph(path)
    assert str(path) in str(info.value)
    assert expected in str(info.value)


def test_cpu_properties_that_run_load(tmp_path: Path) -> None:
    """Every value measured to compile on the CPU loads; other devices' values are theirs to check."""
    for text in (
        'KV_CACHE_PRECISION = "u4"\nDYNAMIC_QUANTIZATION_GROUP_SIZE = 0\nENABLE_CPU_PINNING = false\n',
        'KV_CACHE_PRECISION = "f32"\nINFERENCE_PRECISION_HINT = "f32"\nPERFORMANCE_HINT = "LATENCY"\n',
    ):
        load_graph(write(tmp_path, f'name = "m"\nmodel_path = "model"\n[plugin_config]\n{text}'))
    load_graph(
        write(
            tmp_path, 'name = "m"\nmodel_path = "model"\ndevice = "GPU"\n[plugin_config]\nKV_CACHE_PRECISION = "i8"\n'
        ),
        check_paths=False,
    )


def test_duplicate_names_and_empty_dir(tmp_path: Path) -> None:
    write(tmp_path, 'name = "m"\nmodel_path = "model"\n', "a.toml")
    write(tmp_path, 'name = "m"\nmodel_path = "model"\n', "b.toml")
    with pytest.raises(ConfigError, match="already served"):
        load_graphs(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match="no graph files"):
        load_graphs(empty)


def test_repository_graph_files_are_valid() -> None:
    files = sorted((REPO / "graphs").glob("*.toml"))
    assert files, "graphs/ must hold the demo graph files"
    for path in files:
        assert load_graph(path, check_paths=False).name == path.stem


@pytest.mark.parametrize(
    ("device", "present"),
    [
        ("CPU", True),
        ("GPU", False),
        ("NPU", False),
        ("AUTO", True),
        ("AUTO:GPU,CPU", True),
        ("AUTO:GPU,NPU", False),
        ("HETERO:GPU,CPU", False),
        ("GPU.1", True),
    ],
)
def test_device_presence(tmp_path: Path, device: str, present: bool) -> None:
    graph = load_graph(write(tmp_path, f'name = "m"\nmodel_path = "model"\ndevice = "{device}"\n'))
    available = ["CPU", "GPU.0", "GPU.1"] if device == "GPU.1" else ["CPU"]
    if present:
        check_device(graph, available)
    else:
        with pytest.raises(ConfigError) as info:
            check_device(graph, available)
        assert "g.toml" in str(info.value) and "does not have" in str(info.value)


def test_vision_pipeline_and_image_limits(tmp_path: Path) -> None:
    text = 'name = "m"\nmodel_path = "model"\n'
    graph = load_graph(write(tmp_path, text))
    assert (graph.pipeline, graph.pipeline_kind, graph.accepts_images) == ("AUTO", "LM_CB", False)
    assert (graph.limits.max_images_per_request, graph.limits.max_image_pixels) == (8, 4096 * 4096)
    (tmp_path / "model" / "openvino_vision_embeddings_model.xml").write_text("<net/>")
    assert load_graph(write(tmp_path, text)).pipeline_kind == "VLM_CB"  # AUTO finds the vision encoder
    explicit = load_graph(
        write(
            tmp_path, text + 'pipeline = "VLM_CB"\n[limits]\nmax_images_per_request = 2\nmax_image_pixels = 1000000\n'
        )
    )
    assert (explicit.pipeline_kind, explicit.limits.max_images_per_request, explicit.limits.max_image_pixels) == (
        "VLM_CB",
        2,
        1_000_000,
    )
    with pytest.raises(ConfigError, match="limits.max_image_pixels"):
        load_graph(write(tmp_path, text + "[limits]\nmax_image_pixels = 200000000\n"))
    with pytest.raises(ConfigError, match="limits.max_images_per_request"):
        load_graph(write(tmp_path, text + "[limits]\nmax_images_per_request = -1\n"))


def test_pipeline_must_match_the_model_folder(tmp_path: Path) -> None:
    from appliance.graphfiles.checks import prepare_graphs

    graphs, model = tmp_path / "graphs", tmp_path / "model"
    graphs.mkdir()
    model.mkdir()
    for name in ("openvino_language_model.xml", "openvino_tokenizer.xml", "openvino_detokenizer.xml"):
        (model / name).write_text("<net/>")
    (graphs / "g.toml").write_text('name = "m"\nmodel_path = "../model"\npipeline = "VLM_CB"\n')
    with pytest.raises(ConfigError, match="VLM_CB.*openvino_vision_embeddings_model.xml"):
        prepare_graphs(graphs, ["CPU"])
    (model / "openvino_vision_embeddings_model.xml").write_text("<net/>")
    assert prepare_graphs(graphs, ["CPU"])[0].accepts_images
    (graphs / "g.toml").write_text('name = "m"\nmodel_path = "../model"\npipeline = "LM_CB"\n')
    with pytest.raises(ConfigError, match="LM_CB.*vision-language"):
        prepare_graphs(graphs, ["CPU"])


def test_stateful_pipelines(tmp_path: Path) -> None:
    base = 'name = "m"\nmodel_path = "model"\n'
    lm = load_graph(write(tmp_path, base + 'pipeline = "LM"\n[plugin_config]\nMAX_PROMPT_LEN = 512\n'))
    assert (lm.pipeline_kind, lm.stateful, lm.accepts_images, lm.max_prompt_len) == ("LM", True, False, 512)
    npu = load_graph(write(tmp_path, base + 'device = "NPU"\n'))
    assert (npu.pipeline_kind, npu.stateful, npu.max_prompt_len, npu.min_response_len) == ("LM", True, 1024, 128)
    cpu = load_graph(write(tmp_path, base))
    assert (cpu.stateful, cpu.max_prompt_len, cpu.max_images) == (False, None, 8)
    (tmp_path / "model" / "openvino_vision_embeddings_model.xml").write_text("<net/>")
    vlm = load_graph(write(tmp_path, base + 'device = "NPU.0"\n[limits]\nmax_images_per_request = 4\n'))
    assert (vlm.pipeline_kind, vlm.accepts_images, vlm.max_images) == ("VLM", True, 1)
    # A virtual device that merely lists NPU keeps continuous batching unless the graph asks.
    assert load_graph(write(tmp_path, base + 'device = "AUTO:NPU,CPU"\n')).pipeline_kind == "VLM_CB"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[plugin_config]\nMAX_PROMPT_LEN = 512\n", "applies to the stateful pipeline only"),
        ('pipeline = "LM"\n[plugin_config]\nMAX_PROMPT_LEN = 0\n', "MAX_PROMPT_LEN` must be a positive"),
        ('pipeline = "LM"\n[plugin_config]\nMIN_RESPONSE_LEN = "many"\n', "MIN_RESPONSE_LEN` must be a positive"),
        ('pipeline = "LM"\nprompt_lookup = true\n', "need continuous batching"),
        ('device = "NPU"\ndraft_model_path = "model"\n', "need continuous batching"),
        ('pipeline = "LM"\n[scheduler]\nmax_num_seqs = 4\n', "has no scheduler"),
        ('pipeline = "LM"\n[plugin_config]\nATTENTION_BACKEND = "PA"\n', "ATTENTION_BACKEND"),
    ],
)
def test_stateful_graph_mistakes(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, 'name = "m"\nmodel_path = "model"\n' + text)
    with pytest.raises(ConfigError) as info:
        load_graph(path)
    assert str(path) in str(info.value) and expected in str(info.value)


def test_stateful_pipeline_must_match_the_model_folder(tmp_path: Path) -> None:
    from appliance.graphfiles.checks import prepare_graphs

    graphs, model = tmp_path / "graphs", tmp_path / "model"
    graphs.mkdir()
    model.mkdir()
    for name in ("openvino_model.xml", "openvino_tokenizer.xml", "openvino_detokenizer.xml"):
        (model / name).write_text("<net/>")
    (graphs / "g.toml").write_text('name = "m"\nmodel_path = "../model"\npipeline = "VLM"\n')
    with pytest.raises(ConfigError, match="is VLM but.*openvino_vision_embeddings_model.xml"):
        prepare_graphs(graphs, ["CPU"])
    (graphs / "g.toml").write_text('name = "m"\nmodel_path = "../model"\npipeline = "LM"\n')
    assert prepare_graphs(graphs, ["CPU"])[0].stateful
    (model / "openvino_vision_embeddings_model.xml").write_text("<net/>")
    with pytest.raises(ConfigError, match="is LM but.*use VLM or AUTO"):
        prepare_graphs(graphs, ["CPU"])


def test_min_response_len_off_npu_is_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from appliance.graphfiles.checks import prepare_graphs

    graphs, model = tmp_path / "graphs", tmp_path / "model"
    graphs.mkdir()
    model.mkdir()
    for name in ("openvino_model.xml", "openvino_tokenizer.xml", "openvino_detokenizer.xml"):
        (model / name).write_text("<net/>")
    base = 'name = "m"\nmodel_path = "../model"\npipeline = "LM"\n[plugin_config]\nMAX_PROMPT_LEN = 64\n'
    (graphs / "g.toml").write_text(base)
    with caplog.at_level("WARNING", logger="appliance.reload"):
        prepare_graphs(graphs, ["CPU"])
    assert not caplog.records
    (graphs / "g.toml").write_text(base + "MIN_RESPONSE_LEN = 32\n")
    with caplog.at_level("WARNING", logger="appliance.reload"):
        prepare_graphs(graphs, ["CPU"])
    assert "MIN_RESPONSE_LEN" in caplog.text and "no effect on CPU" in caplog.text and "g.toml" in caplog.text
