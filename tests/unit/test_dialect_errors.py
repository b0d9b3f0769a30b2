"""Each dialect's answers at the edge: the gate's refusals, Litestar's own errors and the routes'
own, all in the dialect's shape (read from its profile)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from litestar.testing import TestClient

from appliance.api.gate import Gate
from tests.apps import fake_app
from tests.fakes import FakeEngineClient, fake_graph

KEY = "k-1"


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(
        Gate(fake_app(FakeEngineClient(fake_graph("fake")), max_body_size=4096), api_keys=[KEY])
    ) as test_client:
        yield test_client


def _shape(body: dict) -> str:
    if body.get("type") == "error":
        return "anthropic"
    if isinstance(body.get("error"), dict) and "root_cause" in body["error"]:
        return "elasticsearch"
    if isinstance(body.get("error"), str) and isinstance(body.get("code"), int):
        return "lmi"
    if set(body) == {"error"} and isinstance(body["error"], str):
        return "ollama"
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    return "openai"


@pytest.mark.parametrize(
    ("path", "shape"),
    [
        ("/v1/chat/completions", "openai"),
        ("/v1/messages", "anthropic"),
        ("/api/chat", "ollama"),
        ("/api/embed", "ollama"),
        ("/invocations", "lmi"),
        ("/predictions/fake", "lmi"),
        ("/_inference/chat_completion/x/_stream", "elasticsearch"),
    ],
)
def test_every_error_on_a_route_takes_its_dialects_shape(client: TestClient, path: str, shape: str) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    answers = {
        "no key": client.post(path, json={}),
        "text body": client.post(path, content=b"{}", headers={**auth, "Content-Type": "text/plain"}),
        "wrong method": client.get(path, headers=auth),
        "too large": client.post(path, content=b" " * 5000, headers={**auth, "Content-Type": "application/json"}),
        "bad body": client.post(path, content=b"[", headers={**auth, "Content-Type": "application/json"}),
    }
    statuses = {name: answer.status_code for name, answer in answers.items()}
    assert statuses == {"no key": 401, "text body": 415, "wrong method": 405, "too large": 413, "bad body": 400}
    for name, answer in answers.items():
        assert _shape(answer.json()) == shape, (name, answer.text)


def test_a_chat_body_on_invocations_keeps_openais_envelope(client: TestClient) -> None:
    answer = client.post(
        "/invocations", json={"messages": [], "max_tokens": -1}, headers={"Authorization": f"Bearer {KEY}"}
    )
    assert answer.status_code == 400 and _shape(answer.json()) == "openai"


@pytest.mark.parametrize("model", [None, 3, {}, ["fake"]])
def test_elasticsearch_refuses_a_model_that_is_no_name(client: TestClient, model: object) -> None:
    answer = client.post(
        "/_inference/chat_completion/fake/_stream",
        json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
        headers={"Authorization": f"Bearer {KEY}"},
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["reason"].startswith("Invalid value for 'model'")


@pytest.mark.parametrize("stream", [False, {}, "true"])
def test_elasticsearch_always_streams(client: TestClient, stream: object) -> None:
    answer = client.post(
        "/_inference/chat_completion/fake/_stream",
        json={"messages": [{"role": "user", "content": "hi"}], "stream": stream},
        headers={"Authorization": f"Bearer {KEY}"},
    )
    assert answer.status_code == 400 and answer.json()["error"]["reason"].startswith("This route always streams")


def test_elasticsearch_checks_the_stream_options_it_completes(client: TestClient) -> None:
    # The route streams with usage unless the body's stream options, checked, say otherwise.
    answer = client.post(
        "/_inference/chat_completion/fake/_stream",
        json={"messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": False, "x": 1}},
        headers={"Authorization": f"Bearer {KEY}"},
    )
    assert answer.status_code == 400 and "stream_options.x" in answer.json()["error"]["reason"], answer.text
    without = client.post(
        "/_inference/chat_completion/fake/_stream",
        json={"messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": False}},
        headers={"Authorization": f"Bearer {KEY}"},
    )
    assert without.status_code == 200 and "chat_completion" in without.text and '"usage"' not in without.text
    default = client.post(
        "/_inference/chat_completion/fake/_stream",
        json={"messages": [{"role": "user", "content": "hi"}]},
        headers={"Authorization": f"Bearer {KEY}"},
    )
    assert default.status_code == 200 and '"usage"' in default.text
