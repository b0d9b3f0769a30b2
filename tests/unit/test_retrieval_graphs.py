"""Embedding and rerank graphs (issue 33): their kind from the model folder, their settings from
the model's own sentence-transformers files unless the graph says otherwise, and the keys that
belong to generative graphs refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from appliance.errors import ConfigError
from appliance.graphfiles import load_graph


def _model(tmp_path: Path, files: dict[str, object]) -> None:
    model = tmp_path / "model"
    for name, content in files.items():
        (model / name).parent.mkdir(parents=True, exist_ok=True)
        (model / name).write_text(json.dumps(content))
    model.mkdir(exist_ok=True)


def _graph(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "g.toml"
    path.write_text(f'name = "m"\nmodel_path = "model"\n{extra}')
    return path


SENTENCE_TRANSFORMERS = {
    "modules.json": [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ],
    "1_Pooling/config.json": {"word_embedding_dimension": 384, "pooling_mode_mean_tokens": True},
    "sentence_bert_config.json": {"max_seq_length": 256},
    "config_sentence_transformers.json": {"prompts": {"query": "query: ", "document": "passage: "}},
    "config.json": {"architectures": ["BertModel"], "max_position_embeddings": 512},
}


def test_settings_come_from_the_model_files(tmp_path: Path) -> None:
    _model(tmp_path, SENTENCE_TRANSFORMERS)
    graph = load_graph(_graph(tmp_path))
    assert graph.pipeline_kind == "TEXT_EMBEDDING" and graph.task == "embed"
    config = graph.retrieval
    assert (config.pooling, config.normalize, config.max_length) == ("mean", True, 256)
    assert (config.query_instruction, config.document_instruction) == ("query: ", "passage: ")


def test_the_graph_overrides_the_model_files(tmp_path: Path) -> None:
    _model(tmp_path, SENTENCE_TRANSFORMERS)
    extra = '[embedding]\npooling = "cls"\nnormalize = false\nmax_length = 128\nquery_instruction = ""\n'
    config = load_graph(_graph(tmp_path, extra)).retrieval
    assert (config.pooling, config.normalize, config.max_length, config.query_instruction) == ("cls", False, 128, "")


def test_a_cross_encoder_is_a_reranker(tmp_path: Path) -> None:
    _model(tmp_path, {"config.json": {"architectures": ["BertForSequenceClassification"]}})
    graph = load_graph(_graph(tmp_path))
    assert graph.pipeline_kind == "TEXT_RERANK" and graph.task == "rerank"
    assert graph.retrieval.max_length == 512 and graph.retrieval.pooling == "cls"


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("[scheduler]\nmax_num_seqs = 4\n", "`scheduler` applies to generative graphs"),
        ('tool_parser = "hermes"\n', "`tool_parser` applies to generative graphs"),
        ("prompt_lookup = true\n", "`prompt_lookup` applies to generative graphs"),
        ("[embedding]\nmax_lenght = 3\n", "max_lenght"),
    ],
)
def test_generation_keys_are_refused(tmp_path: Path, extra: str, expected: str) -> None:
    _model(tmp_path, SENTENCE_TRANSFORMERS)
    with pytest.raises(ConfigError, match=expected):
        load_graph(_graph(tmp_path, extra))


def test_embedding_section_on_a_chat_graph_is_refused(tmp_path: Path) -> None:
    _model(tmp_path, {"config.json": {"architectures": ["LlamaForCausalLM"]}})
    with pytest.raises(ConfigError, match=r"`\[embedding\]` applies to embedding and rerank graphs"):
        load_graph(_graph(tmp_path, "[embedding]\nmax_length = 64\n"))
