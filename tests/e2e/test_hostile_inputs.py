"""Issue 40, rows H3, M1, L1 and part of L3, against a real server with an API key, each hostile
request beside a neighbour stream on the same model (largest gap printed, every stream completed,
the engine the same process): ten requests naming an 8 MB user leave the log small; a number beyond
a float (`1e400`) is a 400 `invalid_json` on every route that reads a body (the route list is the
app's own); Messages' nested `cache_control` and a `tool_result` answering no call are refused,
through the `anthropic` SDK; two credential headers are a 400; `drain_seconds` inf and nan too."""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx
import pytest

from appliance.api.app import create_app
from appliance.api.profiles import JSON, Dialects
from appliance.runtime.registry import ModelRegistry
from tests.conftest import RunningServer, copy_demo_graphs, running_server
from tests.e2e.neighbour import Neighbour

MODEL = "demo-chat"
API_KEY = "hostile-inputs-key"
AUTH = {"Authorization": f"Bearer {API_KEY}"}
HUGE = 8 * 1024 * 1024
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


@pytest.fixture(scope="module")
def server(demo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp("hostile-inputs")
    (directory / "api-keys").write_text(API_KEY + "\n")
    graphs = copy_demo_graphs(demo_root, directory / "graphs", [MODEL])
    with running_server(graphs, directory / "server.log", "--api-key-file", str(directory / "api-keys")) as running:
        yield running


@pytest.fixture(scope="module")
def messages_client(server: RunningServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key=API_KEY, max_retries=0, timeout=120)


def test_ten_requests_naming_an_8_mb_user_leave_the_log_small(
    server: RunningServer, messages_client: anthropic.Anthropic
) -> None:
    before = server.log_path.stat().st_size
    user = "u" * HUGE
    with Neighbour(server.url, headers=AUTH) as neighbour:
        for index in range(10):
            if index % 3 == 0:  # Messages' metadata.user_id, through Anthropic's SDK
                messages_client.messages.create(
                    model=MODEL, max_tokens=2, messages=[{"role": "user", "content": "hi"}], metadata={"user_id": user}
                )
            elif index % 3 == 1:
                answer = httpx.post(
                    f"{server.url}/v1/chat/completions", json={**CHAT, "user": user}, headers=AUTH, timeout=120
                )
                assert answer.status_code == 200, answer.text[:300]
            else:  # a model no graph serves is named in the access line too
                answer = httpx.post(
                    f"{server.url}/v1/chat/completions", json={**CHAT, "model": user}, headers=AUTH, timeout=120
                )
                assert answer.status_code == 404
    neighbour.assert_unharmed()
    grown = server.log_path.read_bytes()[before:]
    lines = grown.decode(errors="replace").splitlines()
    print(f"log grew {len(grown)} bytes in {len(lines)} lines for ten requests of 8 MB each (80 MB before the cap)")
    access = [line for line in lines if '"user":"uuu' in line or '"model":"uuu' in line]
    assert len(access) == 10, lines[-20:]
    assert all("chars cut" in line and len(line) < 1000 for line in access), [len(line) for line in access]
    assert max(len(line) for line in lines) < 20_000
    assert len(grown) < 256 * 1024  # ten capped lines and the neighbour's, not 80 MB


def _body_routes() -> list[str]:
    """Every POST route of the app the server runs that takes JSON, parameters filled in, but the
    admin routes (they read no body). The audio upload routes take a multipart form (JSON: 415)."""
    app = create_app(ModelRegistry([]), start_engines=False, serve_playground=False)
    dialects = Dialects.of(app)
    paths = {
        re.sub(r"\{[^}]*\}", MODEL, route.path)
        for route in app.routes
        if "POST" in getattr(route, "methods", ()) and not route.path.startswith("/admin/")
    }
    return sorted(path for path in paths if JSON in dialects.media_types(path, "POST"))


def test_a_number_beyond_a_float_is_invalid_json_on_every_route(server: RunningServer) -> None:
    routes = _body_routes()
    assert {"/v1/messages", "/v1/messages/count_tokens", "/v1/responses", f"/_inference/{MODEL}/_stream"} <= set(routes)
    bodies = [
        json.dumps(CHAT)[:-1] + ', "x": 1e400}',
        json.dumps(CHAT)[:-1] + ', "metadata": {"deep": [[{"n": -1e400}]]}}',
    ]
    answers = {}
    with Neighbour(server.url, headers=AUTH) as neighbour:
        for path in routes:
            for body in bodies:
                answer = httpx.post(
                    f"{server.url}{path}",
                    content=body,
                    headers={**AUTH, "Content-Type": "application/json"},
                    timeout=60,
                )
                answers[path] = answer.status_code
                assert answer.status_code == 400, (path, answer.status_code, answer.text[:300])
                assert "not valid JSON" in answer.text and "out of range" in answer.text, (path, answer.text)
                if "code" in answer.json().get("error", {}):  # the OpenAI envelope
                    assert answer.json()["error"]["code"] == "invalid_json", (path, answer.text)
    neighbour.assert_unharmed()
    print(f"{len(routes)} routes, each 400: {answers}")
    assert "Traceback" not in server.log() and "unhandled error" not in server.log()


def test_cache_control_of_another_type_is_refused(server: RunningServer, messages_client: anthropic.Anthropic) -> None:
    with Neighbour(server.url, headers=AUTH) as neighbour:
        with pytest.raises(anthropic.BadRequestError) as refused:
            messages_client.messages.create(
                model=MODEL,
                max_tokens=2,
                system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "persistent"}}],  # type: ignore[typeddict-item]
                messages=[{"role": "user", "content": "hi"}],
            )
        assert refused.value.body["error"]["message"].startswith("system[0].cache_control.type:")
        with pytest.raises(anthropic.BadRequestError) as refused:
            messages_client.messages.create(
                model=MODEL,
                max_tokens=2,
                messages=[{"role": "user", "content": "hi"}],
                extra_body={"cache_control": {"type": "ephemeral", "scope": "workspace"}},
            )
        assert refused.value.body["error"]["message"].startswith("cache_control.scope:")
        accepted = messages_client.messages.create(
            model=MODEL,
            max_tokens=2,
            system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
            messages=[{"role": "user", "content": "hi"}],
        )
        assert accepted.usage.output_tokens > 0
    neighbour.assert_unharmed()


def test_a_tool_result_that_answers_no_call_is_refused(
    server: RunningServer, messages_client: anthropic.Anthropic
) -> None:
    weather = {"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
    call = {"type": "tool_use", "id": "toolu_issued", "name": "get_weather", "input": {"city": "Oslo"}}
    history = [{"role": "user", "content": "Weather in Oslo?"}, {"role": "assistant", "content": [call]}]

    def answer(tool_use_id: str) -> list:
        return [
            *history,
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use_id, "content": "Rain."}]},
        ]

    with Neighbour(server.url, headers=AUTH) as neighbour:
        with pytest.raises(anthropic.BadRequestError) as refused:
            messages_client.messages.create(model=MODEL, max_tokens=2, tools=[weather], messages=answer("toolu_never"))
        assert refused.value.body["error"]["message"].startswith("messages[2].content[0].tool_use_id:")
        with pytest.raises(anthropic.BadRequestError):
            messages_client.messages.count_tokens(model=MODEL, tools=[weather], messages=answer("toolu_never"))
        accepted = messages_client.messages.create(
            model=MODEL, max_tokens=2, tools=[weather], messages=answer("toolu_issued")
        )
        assert accepted.usage.input_tokens > 0
    neighbour.assert_unharmed()


def _raw_post(server: RunningServer, path: str, headers: list[tuple[str, str]]) -> tuple[int, dict]:
    """A POST with `headers` exactly as listed, repeated names included (http.client sends each)."""
    host, port = server.url.removeprefix("http://").split(":")
    body = json.dumps({**CHAT, "max_tokens": 2}).encode()
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        connection.putrequest("POST", path)
        for name, value in [*headers, ("Content-Type", "application/json"), ("Content-Length", str(len(body)))]:
            connection.putheader(name, value)
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


@pytest.mark.parametrize(
    "headers",
    [
        [("Authorization", f"Bearer {API_KEY}"), ("Authorization", "Bearer someone-else")],
        [("Authorization", "Bearer someone-else"), ("Authorization", f"Bearer {API_KEY}")],
        [("Authorization", f"Bearer {API_KEY}"), ("Authorization", f"Bearer {API_KEY}")],
        [("x-api-key", API_KEY), ("x-api-key", "someone-else")],
    ],
)
def test_two_credential_headers_are_refused(server: RunningServer, headers: list[tuple[str, str]]) -> None:
    with Neighbour(server.url, headers=AUTH) as neighbour:
        status, answer = _raw_post(server, "/v1/chat/completions", headers)
        messages_status, messages_answer = _raw_post(server, "/v1/messages", headers)
    neighbour.assert_unharmed()
    assert status == 400 and answer["error"]["code"] == "duplicate_header", answer
    assert answer["error"]["param"] == headers[0][0].lower()
    assert messages_status == 400 and messages_answer["type"] == "error", messages_answer
    assert _raw_post(server, "/v1/chat/completions", headers[:1])[0] in (200, 401)  # one is read as before


@pytest.mark.parametrize("value", ["inf", "nan", "-inf", "1e400", "86400"])
def test_drain_seconds_must_be_finite_and_bounded(server: RunningServer, value: str) -> None:
    with Neighbour(server.url, headers=AUTH) as neighbour:
        answer = httpx.post(
            f"{server.url}/admin/models/{MODEL}/unload", params={"drain_seconds": value}, headers=AUTH, timeout=60
        )
    neighbour.assert_unharmed()  # the same engine: the model was not unloaded
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == "drain_seconds", answer.text
    assert server.model_status(MODEL)["state"] == "ready"
