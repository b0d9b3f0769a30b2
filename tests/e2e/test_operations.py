"""Operators' view: API keys, Prometheus metrics, the request log."""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import running_server, start_server, stop_server

MODEL = "demo-chat"
KEYS = ["key-one", "Key-Two"]


@pytest.fixture(scope="module")
def keyed_server(demo_root, tmp_path_factory):
    directory = tmp_path_factory.mktemp("keyed")
    key_file = directory / "api-keys"
    key_file.write_text("# operators' keys\nkey-one\n\nKey-Two\n")
    with running_server(demo_root / "graphs", directory / "server.log", "--api-key-file", str(key_file)) as server:
        yield server


def chat_body(**extra) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": "SECRET-PROMPT-TEXT"}], "max_tokens": 4, **extra}


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Bearer KEY-ONE"},  # keys are case-sensitive
        {"Authorization": "Basic key-one"},
        {"Authorization": "key-one"},
        {"Authorization": "Bearer  key-one-extra"},
    ],
)
def test_requests_without_a_valid_key_are_401(keyed_server, headers: dict) -> None:
    response = httpx.post(f"{keyed_server.url}/v1/chat/completions", json=chat_body(), headers=headers, timeout=30)
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert httpx.get(f"{keyed_server.url}/v1/models", headers=headers, timeout=5).status_code == 401
    assert httpx.get(f"{keyed_server.url}/metrics", headers=headers, timeout=5).status_code == 401


def test_valid_keys_and_open_paths(keyed_server) -> None:
    for key in KEYS:
        client = openai.OpenAI(base_url=f"{keyed_server.url}/v1", api_key=key, max_retries=0)
        assert client.chat.completions.create(**chat_body()).choices
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{keyed_server.url}/v1", api_key="nope", max_retries=0).models.list()
    assert httpx.get(f"{keyed_server.url}/health", timeout=5).status_code == 200
    assert httpx.get(f"{keyed_server.url}/health/live", timeout=5).status_code == 200


def _samples(server) -> dict[tuple[str, tuple], float]:
    text = httpx.get(f"{server.url}/metrics", timeout=5).text
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return values


def test_metrics_move_after_requests(server, openai_client: openai.OpenAI) -> None:
    before = _samples(server)
    openai_client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "count me"}], max_tokens=8, extra_body={"ignore_eos": True}
    )
    stream = openai_client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "stream me"}],
        max_tokens=8,
        stream=True,
        extra_body={"ignore_eos": True},
    )
    list(stream)
    after = _samples(server)
    model = (("model", MODEL),)

    def delta(name: str, labels: tuple = model) -> float:
        return after.get((name, labels), 0.0) - before.get((name, labels), 0.0)

    assert delta("appliance_generation_tokens_total") == 16
    assert delta("appliance_prompt_tokens_total") > 0
    assert delta("appliance_requests_total", (("finish_reason", "length"), ("model", MODEL))) == 2
    assert delta("appliance_time_to_first_token_seconds_count") == 2
    assert delta("appliance_e2e_request_latency_seconds_count") == 2
    assert delta("appliance_request_time_per_output_token_seconds_count") == 2
    assert delta("appliance_inter_token_latency_seconds_count") == 14
    ok = (("method", "POST"), ("route", "/v1/chat/completions"), ("status", "200"))
    assert delta("appliance_http_requests_total", ok) == 2
    assert after[("appliance_model_ready", model)] == 1
    assert ("appliance_kv_cache_usage_ratio", model) in after
    assert ("appliance_num_requests_waiting", model) in after
    assert after[("appliance_event_loop_lag_seconds_count", ())] > 0


def test_one_log_line_per_request_without_prompts(server, openai_client: openai.OpenAI) -> None:
    openai_client.chat.completions.create(**chat_body(user="log-test-user"))
    # The access line is written once the answer has been sent: the client may read it first.
    deadline = time.monotonic() + 10
    while True:
        lines = [
            json.loads(line.split(" appliance.access: ", 1)[1])
            for line in server.log().splitlines()
            if " appliance.access: " in line
        ]
        mine = [line for line in lines if line.get("user") == "log-test-user"]
        if mine or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(mine) == 1
    entry = mine[0]
    assert entry["status"] == 200 and entry["model"] == MODEL and entry["path"] == "/v1/chat/completions"
    assert entry["prompt_tokens"] > 0 and entry["completion_tokens"] <= 4 and entry["latency_ms"] > 0
    assert "SECRET-PROMPT-TEXT" not in server.log()


@pytest.fixture(scope="module")
def guarded_server(demo_root, tmp_path_factory):
    directory = tmp_path_factory.mktemp("guarded")
    with running_server(
        demo_root / "graphs",
        directory / "server.log",
        "--allowed-hosts",
        "127.0.0.1,localhost,*.edge.example",
        "--cors-allowed-origins",
        "https://app.example.com",
    ) as server:
        yield server


def test_foreign_host_header_is_400(guarded_server) -> None:
    url = f"{guarded_server.url}/v1/models"
    assert httpx.get(url, timeout=5).status_code == 200
    assert httpx.get(url, headers={"Host": "box.edge.example:8000"}, timeout=5).status_code == 200
    response = httpx.get(url, headers={"Host": "attacker.example"}, timeout=5)
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_host"


def test_cors_only_for_listed_origins(guarded_server) -> None:
    url = f"{guarded_server.url}/v1/chat/completions"
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    unknown = httpx.options(url, headers={**preflight, "Origin": "https://evil.example"}, timeout=5)
    assert "access-control-allow-origin" not in unknown.headers
    known = httpx.options(url, headers={**preflight, "Origin": "https://app.example.com"}, timeout=5)
    assert known.status_code == 204
    assert known.headers["access-control-allow-origin"] == "https://app.example.com"
    answer = httpx.get(f"{guarded_server.url}/v1/models", headers={"Origin": "https://app.example.com"}, timeout=5)
    assert answer.headers["access-control-allow-origin"] == "https://app.example.com"
    other = httpx.get(f"{guarded_server.url}/v1/models", headers={"Origin": "https://evil.example"}, timeout=5)
    assert "access-control-allow-origin" not in other.headers


def test_json_logs_are_one_object_per_line(demo_root, tmp_path) -> None:
    graphs = tmp_path / "graphs"
    graphs.mkdir()
    text = (demo_root / "graphs" / "demo-chat.toml").read_text()
    (graphs / "demo-chat.toml").write_text(text.replace('"../models/', f'"{(demo_root / "models").resolve()}/'))
    (tmp_path / "appliance.toml").write_text('log_format = "json"\n')  # the settings file's key, as --log-format
    server = start_server(graphs, tmp_path / "server.log", "--config", str(tmp_path / "appliance.toml"))
    try:
        assert httpx.post(f"{server.url}/v1/chat/completions", json=chat_body(user="json-user"), timeout=30).is_success
        assert httpx.get(f"{server.url}/no-such-route", timeout=5).status_code == 404
        assert httpx.post(f"{server.url}/admin/reload", timeout=60).status_code == 200
    finally:
        assert stop_server(server) == 0
    lines = [json.loads(line) for line in server.log().splitlines()]  # every line, or this raises
    assert all(isinstance(line, dict) and {"time", "level", "logger"} <= set(line) for line in lines)
    loggers = {line["logger"] for line in lines}
    assert {"appliance.server", "appliance.engine", "appliance.access", "appliance.reload", "uvicorn.error"} <= loggers
    access = [line for line in lines if line["logger"] == "appliance.access"]
    assert {(line["path"], line["status"]) for line in access} >= {
        ("/v1/chat/completions", 200),
        ("/no-such-route", 404),
        ("/admin/reload", 200),
    }
    chat = next(line for line in access if line.get("user") == "json-user")
    assert chat["event"] == "request" and chat["model"] == MODEL and chat["completion_tokens"] <= 4
    reload = next(line for line in lines if line["logger"] == "appliance.reload")
    assert reload["event"] == "reload" and reload["unchanged"] == [MODEL]
    assert "SECRET-PROMPT-TEXT" not in server.log()


def test_admin_keys_and_the_open_network_warning(demo_root, tmp_path) -> None:
    (tmp_path / "api-keys").write_text("api-key\n")
    (tmp_path / "admin-keys").write_text("# operators only\nadmin-key\n")
    keyed = start_server(demo_root / "graphs", tmp_path / "keyed.log", "--api-key-file", str(tmp_path / "api-keys"),
                         "--admin-key-file", str(tmp_path / "admin-keys"), "--host", "0.0.0.0")  # fmt: skip
    try:

        def reload(key: str) -> httpx.Response:
            return httpx.post(f"{keyed.url}/admin/reload", headers={"Authorization": f"Bearer {key}"}, timeout=60)

        assert reload("api-key").status_code == 401 and reload("api-key").json()["error"]["code"] == "invalid_admin_key"
        assert reload("admin-key").status_code == 200
        assert httpx.get(f"{keyed.url}/v1/models", headers={"Authorization": "Bearer admin-key"}).status_code == 401
    finally:
        stop_server(keyed)
    assert "WITHOUT API KEYS" not in keyed.log()
    # Every interface, no key: one loud warning before serving.
    open_server = start_server(demo_root / "graphs", tmp_path / "open.log", "--host", "0.0.0.0")
    stop_server(open_server)
    warnings = [line for line in open_server.log().splitlines() if "WITHOUT API KEYS" in line]
    assert len(warnings) == 1 and " WARNING appliance.server: listening on 0.0.0.0:" in warnings[0]
