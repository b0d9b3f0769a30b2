"""Speculative decoding and prompt lookup: graph keys, start-up checks, per-request parameters."""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec
import pytest

from appliance.errors import ConfigError, InvalidRequest
from appliance.graphfiles import Graph, SpeculativeSettings, load_graph
from appliance.graphfiles.checks import _check_draft
from appliance.protocol.openai import ChatCompletionRequest
from appliance.service.sampling import sampling_params

BASE = 'name = "m"\nmodel_path = "model"\n'


def write(tmp_path: Path, text: str) -> Path:
    for name in ("model", "draft"):
        (tmp_path / name).mkdir(exist_ok=True)
    path = tmp_path / "g.toml"
    path.write_text(BASE + text)
    return path


def test_draft_and_lookup_keys(tmp_path: Path) -> None:
    graph = load_graph(
        write(
            tmp_path,
            'draft_model_path = "draft"\ndraft_device = "CPU"\n[draft_scheduler]\ncache_size = 2\n'
            "[speculative]\nnum_assistant_tokens = 3\n",
        )
    )
    assert graph.assisted == "draft"
    assert graph.draft_dir == (tmp_path / "draft").resolve()
    assert graph.draft_scheduler.cache_size == 2 and graph.draft_scheduler.max_num_seqs is None
    assert graph.speculative.num_assistant_tokens == 3
    assert load_graph(write(tmp_path, "prompt_lookup = true\n")).assisted == "lookup"
    assert load_graph(write(tmp_path, "")).assisted is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('draft_model_path = "draft"\nprompt_lookup = true\n', "cannot be combined"),
        ('draft_device = "CPU"\n', "`draft_device` needs `draft_model_path`"),
        ("[draft_scheduler]\ncache_size = 2\n", "`draft_scheduler` needs"),
        ('draft_model_path = "nowhere"\n', "`draft_model_path`"),
        ('draft_model_path = "draft"\ndraft_device = "TPU"\n', "draft_device"),
        ("[speculative]\nnum_assistant_tokens = 0\n", "speculative.num_assistant_tokens"),
        ("[speculative]\nassistant_confidence_threshold = 1.5\n", "assistant_confidence_threshold"),
        ("[speculative]\nmax_ngram = 2\n", "max_ngram"),
    ],
)
def test_invalid_graphs_name_the_problem(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_graph(write(tmp_path, text))


def test_draft_with_another_tokenizer_is_refused(demo_root: Path, tmp_path: Path) -> None:
    models = demo_root / "models"
    graph = Graph(name="m", model_path=str(models / "demo-chat"), draft_model_path=str(models / "demo-spec"))
    _check_draft(graph, graph.draft_dir)  # same tokenizer: accepted
    other = tmp_path / "other-draft"
    shutil.copytree(models / "demo-spec", other)
    shutil.copy(models / "demo-vision" / "openvino_tokenizer.bin", other / "openvino_tokenizer.bin")
    with pytest.raises(ConfigError, match="different tokenizer"):
        _check_draft(graph, other)


def request(**fields) -> ChatCompletionRequest:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields}
    return msgspec.convert(body, ChatCompletionRequest)


def params(graph: Graph, **fields):
    return sampling_params(graph, request(**fields), max_tokens=None, max_tokens_param="max_tokens")


DRAFT = Graph(name="m", model_path="/m", draft_model_path="/d", speculative=SpeculativeSettings(num_assistant_tokens=5))
LOOKUP = Graph(name="m", model_path="/m", prompt_lookup=True)
PLAIN = Graph(name="m", model_path="/m")


def test_graph_defaults_fill_in() -> None:
    assert params(DRAFT).num_assistant_tokens == 5
    assert params(DRAFT, num_assistant_tokens=2).num_assistant_tokens == 2
    threshold = params(DRAFT, assistant_confidence_threshold=0.4)
    assert (threshold.num_assistant_tokens, threshold.assistant_confidence_threshold) == (0, 0.4)
    lookup = params(LOOKUP)
    assert (lookup.num_assistant_tokens, lookup.max_ngram_size) == (4, 3)
    assert params(PLAIN).num_assistant_tokens == 0
    by_threshold = msgspec.structs.replace(DRAFT, speculative=SpeculativeSettings(assistant_confidence_threshold=0.7))
    assert params(by_threshold).assistant_confidence_threshold == 0.7
    assert params(by_threshold, num_assistant_tokens=3).num_assistant_tokens == 3


@pytest.mark.parametrize(
    ("graph", "fields", "param"),
    [
        (PLAIN, {"num_assistant_tokens": 2}, "num_assistant_tokens"),
        (PLAIN, {"assistant_confidence_threshold": 0.5}, "assistant_confidence_threshold"),
        (DRAFT, {"num_assistant_tokens": 2, "assistant_confidence_threshold": 0.5}, "assistant_confidence_threshold"),
        (DRAFT, {"max_ngram_size": 2}, "max_ngram_size"),
        (DRAFT, {"n": 2, "temperature": 1.0}, "n"),
        (DRAFT, {"best_of": 3}, "best_of"),
        (LOOKUP, {"assistant_confidence_threshold": 0.5}, "assistant_confidence_threshold"),
        (LOOKUP, {"best_of": 2}, "best_of"),
    ],
)
def test_unsupported_combinations_are_400(graph: Graph, fields: dict, param: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        params(graph, **fields)
    assert caught.value.param == param
