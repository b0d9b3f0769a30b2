"""Graph `aliases`: other names a model answers to (a client's placeholder such as "tgi"), unique
among all names and aliases."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.errors import ConfigError
from appliance.graphfiles import Graph
from appliance.graphfiles.load import load_graphs
from tests.apps import app_client
from tests.fakes import FakeEngineClient


def test_a_request_may_name_the_model_by_an_alias() -> None:
    engine = FakeEngineClient(Graph(name="fake", model_path="/nonexistent", aliases=("tgi", "dummy")))
    with app_client(engine) as client:
        for name in ("fake", "tgi", "dummy"):
            body = {"model": name, "messages": [{"role": "user", "content": "one two"}]}
            assert client.post("/v1/chat/completions", json=body).status_code == 200
        assert client.get("/v1/models/tgi").json()["id"] == "fake"
        assert [model["id"] for model in client.get("/v1/models").json()["data"]] == ["fake"]
        missing = client.post(
            "/v1/chat/completions", json={"model": "gpt-4", "messages": [{"role": "user", "content": "x"}]}
        )
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"


def write(directory: Path, name: str, text: str) -> None:
    (directory / f"{name}.toml").write_text(f'name = "{name}"\nmodel_path = "."\n{text}')


def test_aliases_are_unique_among_names_and_aliases(tmp_path: Path) -> None:
    write(tmp_path, "a", 'aliases = ["tgi"]\n')
    write(tmp_path, "b", "")
    assert [graph.aliases for graph in load_graphs(tmp_path)] == [("tgi",), ()]
    write(tmp_path, "b", 'aliases = ["a"]\n')
    with pytest.raises(ConfigError, match="alias 'a' is already a model name or alias"):
        load_graphs(tmp_path)
    write(tmp_path, "b", 'aliases = ["tgi"]\n')
    with pytest.raises(ConfigError, match="alias 'tgi'"):
        load_graphs(tmp_path)
