"""Issue 40, rows H3, M1, L1 and part of L3 on the in-process app: numbers beyond a float are
`invalid_json` on every route, nested objects refuse unknown fields, nothing a client sends makes an
access line long, two credential headers are refused, and `drain_seconds` is finite and bounded."""

from __future__ import annotations

import asyncio
import logging
import re

import httpx
import pytest
from litestar.testing import TestClient

from appliance.api.gate import RECORDED_CHARS, Gate
from appliance.api.profiles import JSON, Dialects
from appliance.entry.decoding import decode_body
from appliance.errors import InvalidRequest
from appliance.protocol.openai import ChatCompletionRequest
from appliance.settings import MAX_DRAIN_SECONDS
from tests.apps import USER, app_client, fake_app
from tests.fakes import FakeEngineClient, fake_graph


@pytest.fixture(scope="module")
def client():
    with app_client(FakeEngineClient(fake_graph("fake"))) as test_client:
        yield test_client


def _body_routes(client: TestClient) -> list[str]:
    """Every POST path of the app that takes JSON, with its parameters filled in, but the admin
    routes (they read no body). The audio routes take a multipart form (the gate refuses JSON
    there, 415)."""
    dialects = Dialects.of(client.app)
    paths = {
        re.sub(r"\{[^}]*\}", "fake", route.path)
        for route in client.app.routes
        if "POST" in getattr(route, "methods", ()) and not route.path.startswith("/admin/")
    }
    paths = {path for path in paths if JSON in dialects.media_types(path, "POST")}
    return sorted(paths)


OUT_OF_RANGE = [
    b'{"model": "fake", "x": 1e400}',  # a field the struct would refuse, before its value is read
    b'{"model": "fake", "messages": [{"role": "user", "content": "hi"}], "metadata": {"a": [1, -1e400]}}',
    b"[1e400]",
    b'{"model": "fake", "x": 1, "y": 1e400, "z": ',  # refused as not JSON, however it is read
]


@pytest.mark.parametrize("body", OUT_OF_RANGE)
def test_a_number_beyond_a_float_is_invalid_json_on_every_route(client: TestClient, body: bytes) -> None:
    routes = _body_routes(client)
    assert {"/v1/messages", "/v1/messages/count_tokens", "/v1/responses", "/_inference/fake/_stream"} <= set(routes)
    for path in routes:
        response = client.post(path, content=body, headers={"content-type": "application/json"})
        assert response.status_code == 400, (path, response.status_code, response.text)
        error = response.json()
        if "code" in error.get("error", {}):  # the OpenAI envelope (the others carry no code)
            assert error["error"]["code"] == "invalid_json", (path, error)
        assert "not valid JSON" in response.text, (path, response.text)


def test_a_number_out_of_range_in_a_known_field_is_named(client: TestClient) -> None:
    for value in ("1e400", "1" + "0" * 400):  # the integer too: no float holds it
        body = f'{{"model": "fake", "messages": [{{"role": "user", "content": "hi"}}], "temperature": {value}}}'
        response = client.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
        assert response.status_code == 400
        assert response.json()["error"] | {"message": ""} == {
            "message": "",
            "type": "invalid_request_error",
            "param": "temperature",
            "code": "invalid_json",
        }


def test_a_body_that_is_not_json_says_so_before_its_fields_are_judged() -> None:
    with pytest.raises(InvalidRequest) as refused:
        decode_body(b'{"surprise": 1, "model": "m", "messages": [', ChatCompletionRequest)
    assert refused.value.code == "invalid_json"
    with pytest.raises(InvalidRequest) as refused:
        decode_body(b'{"surprise": 1, "model": "m", "messages": []}', ChatCompletionRequest)
    assert (refused.value.code, refused.value.param) == ("unknown_parameter", "surprise")


@pytest.mark.parametrize("path", ["/v1/rerank", "/rerank", "/v2/rerank"])
def test_unknown_fields_of_rerank_documents_are_refused(client: TestClient, path: str) -> None:
    body = {"model": "fake", "query": "q", "documents": ["a", {"text": "b", "title": "B"}]}
    response = client.post(path, json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["param"], error["code"]) == ("documents[1].title", "unknown_parameter")


def test_the_access_log_caps_what_the_client_named(caplog: pytest.LogCaptureFixture) -> None:
    huge = "u" * 1_000_000
    engine = FakeEngineClient(fake_graph("fake"))
    with TestClient(Gate(fake_app(engine))) as gated, caplog.at_level(logging.INFO, logger="appliance.access"):
        assert gated.post("/v1/chat/completions", json={"model": "fake", "messages": USER, "user": huge}).is_success
        messages = {"model": "fake", "max_tokens": 4, "messages": USER, "metadata": {"user_id": huge}}
        assert gated.post("/v1/messages", json=messages).is_success
        assert gated.post("/v1/chat/completions", json={"model": huge, "messages": USER}).status_code == 404
        assert gated.post("/v1/embeddings", json={"model": "fake", "input": "a", "user": huge}).status_code == 400
    lines = [record for record in caplog.records if record.name == "appliance.access"]
    recorded = [(record.fields.get("user"), record.fields["model"]) for record in lines]
    assert len(recorded) == 4
    for user, model in recorded:
        assert len(model) <= RECORDED_CHARS and (user is None or len(user) <= RECORDED_CHARS)
    cut = [recorded[0][0], recorded[1][0], recorded[2][1], recorded[3][0]]
    assert all(value.startswith("u" * 100) and "999" in value and "chars cut" in value for value in cut), cut
    assert all(len(record.getMessage()) < 1000 for record in lines)


def _gate_call(headers: list[tuple[str, str]], path: str = "/v1/models") -> httpx.Response:
    """`path` through the gate of the app with its real dialects (whose profiles declare the
    credential headers), keys "a" and "b"; a GET, so /v1/models answers 200 when let through."""

    async def go() -> httpx.Response:
        app = Gate(fake_app(FakeEngineClient(fake_graph("fake"))), api_keys=["a", "b"])
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://appliance") as http:
            return await http.get(path, headers=headers)

    return asyncio.run(go())


@pytest.mark.parametrize(
    "headers",
    [
        [("Authorization", "Bearer a"), ("Authorization", "Bearer b")],
        [("Authorization", "Bearer a"), ("Authorization", "Bearer a")],  # the same key twice, too
        [("x-api-key", "b"), ("X-Api-Key", "a")],
        [("Authorization", "Bearer wrong"), ("Authorization", "Bearer a")],
    ],
)
def test_two_credential_headers_are_refused(headers: list[tuple[str, str]]) -> None:
    response = _gate_call(headers)
    assert response.status_code == 400
    name = headers[0][0].lower()
    assert response.json()["error"] | {"message": ""} == {
        "message": "",
        "type": "invalid_request_error",
        "param": name,
        "code": "duplicate_header",
    }
    anthropic = _gate_call(headers, "/v1/messages")
    assert anthropic.status_code == 400 and anthropic.json()["error"]["type"] == "invalid_request_error"


def test_one_of_each_credential_header_is_one_key_each() -> None:
    assert _gate_call([("Authorization", "Bearer a"), ("x-api-key", "b")]).status_code == 200
    assert _gate_call([("x-api-key", "b")]).status_code == 200


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "1e400", str(MAX_DRAIN_SECONDS + 1), "Infinity"])
def test_drain_seconds_must_be_finite_and_bounded(client: TestClient, value: str) -> None:
    response = client.post(f"/admin/models/fake/unload?drain_seconds={value}")
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "drain_seconds"
    assert client.get("/admin/models").json()["models"]["fake"]["state"] == "ready"  # not unloaded


def test_a_drain_in_bounds_unloads() -> None:
    with app_client(FakeEngineClient(fake_graph("fake"))) as fresh:
        response = fresh.post(f"/admin/models/fake/unload?drain_seconds={MAX_DRAIN_SECONDS:g}")
        assert response.status_code == 200 and response.json()["unloaded"] is True
