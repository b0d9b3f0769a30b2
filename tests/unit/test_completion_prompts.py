"""Completions prompts as text or token ids, sorted into engine prompts, and `echo` (issue 31)."""

from __future__ import annotations

import json

import pytest
from litestar.testing import TestClient

from appliance.engine.messages import TextPrompt, TokenPrompt
from tests.apps import app_client
from tests.fakes import FakeEngineClient


@pytest.fixture
def engine() -> FakeEngineClient:
    return FakeEngineClient()


@pytest.fixture
def client(engine: FakeEngineClient):
    with app_client(engine) as test_client:
        yield test_client


def _complete(client: TestClient, **fields):
    return client.post("/v1/completions", json={"model": "fake", "max_tokens": 2, **fields})


def test_each_kind_of_prompt_reaches_the_engine_as_sent(client: TestClient, engine: FakeEngineClient) -> None:
    assert _complete(client, prompt=[5, 6]).status_code == 200
    assert _complete(client, prompt=[[1, 2], "three four", [3]]).status_code == 200
    prompts = [submit.prompt for submit in engine.submitted]
    assert prompts == [TokenPrompt([5, 6]), TokenPrompt([1, 2]), TextPrompt("three four"), TokenPrompt([3])]


@pytest.mark.parametrize(
    "prompt, param",
    [
        ([1, "two"], "prompt"),
        ([[1], 2], "prompt"),
        ([[1], []], "prompt[1]"),
        (["a"] * 65, "prompt"),
        ([["a"]], "prompt[0][0]"),
        ([1.5], "prompt[0]"),
        ([2**31], "prompt[0]"),
    ],
)
def test_bad_prompts_are_refused_before_the_engine(
    client: TestClient, engine: FakeEngineClient, prompt: list, param: str
) -> None:
    answer = _complete(client, prompt=prompt)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param
    assert not engine.submitted


def test_echo_opens_every_choice_with_its_prompt(client: TestClient) -> None:
    choices = _complete(client, prompt=["one two", [7]], echo=True, n=2).json()["choices"]
    assert [choice["text"] for choice in choices] == ["one two two one"] * 2 + ["w7 w7"] * 2
    stream = _complete(client, prompt="one two", echo=True, stream=True).text
    events = [json.loads(line[6:]) for line in stream.splitlines() if line.startswith("data: {")]
    assert [event["choices"][0]["text"] for event in events][:2] == ["one two", " two one"]
