"""Issue 28, items 6, 7 and 9 and the response store, against a real server with API keys and admin keys: metric labels
from unauthenticated requests come from a fixed set, authorisation is decided on the path the
router matches, and /health reports a model whose engine stopped stepping for a few seconds."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import RunningServer, copy_demo_graphs, running_server
from tests.e2e.neighbour import Neighbour

API_KEY = "api-key-for-tests"
OTHER_KEY = "another-tenant's-key"
STORED = 16
ADMIN_KEY = "admin-key-for-tests"
AUTH = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture(scope="module")
def keyed_server(demo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp("hostile-gate")
    graphs = directory / "graphs"
    graphs.mkdir()
    copy_demo_graphs(demo_root, graphs, ["demo-chat"])
    graph = graphs / "demo-chat.toml"
    # Degraded after 2 s of silence, stalled (refusing requests) only after 30 s.
    graph.write_text(
        graph.read_text().replace("[limits]\n", "[limits]\nengine_degraded_seconds = 2\nengine_hang_seconds = 60\n")
    )
    (directory / "api-keys").write_text(f"{API_KEY}\n{OTHER_KEY}\n")
    (directory / "admin-keys").write_text(ADMIN_KEY + "\n")
    with running_server(
        graphs,
        directory / "server.log",
        "--api-key-file",
        str(directory / "api-keys"),
        "--admin-key-file",
        str(directory / "admin-keys"),
        "--max-stored-responses",
        str(STORED),
    ) as running:
        yield running


def _raw(server: RunningServer, method: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """One request sent byte for byte (HTTP clients normalise paths such as `//admin` or `/./`)."""
    host, port = server.url.removeprefix("http://").split(":")
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Content-Length: 0", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    return status, answer.partition(b"\r\n\r\n")[2]


ROUTED_TO_RELOAD = ["//admin/reload", "///admin/reload", "/admin//reload", "/admin/reload/", "/admin/reload//",
                    "/admin%2Freload"]  # fmt: skip
"""Spellings Litestar routes to /admin/reload (it drops repeated and trailing slashes; uvicorn
decodes %2F); the others below match no route."""


@pytest.mark.parametrize(
    "path", [*ROUTED_TO_RELOAD, "/./admin/reload", "/x/../admin/reload", "/ADMIN/reload", "/admin/./reload"]
)
def test_path_variants_of_admin_routes_need_the_admin_key(keyed_server: RunningServer, path: str) -> None:
    with Neighbour(keyed_server.url, headers=AUTH) as neighbour:
        status, body = _raw(keyed_server, "POST", path, AUTH)
    neighbour.assert_unharmed()
    admin_status, admin_body = _raw(keyed_server, "POST", path, {"Authorization": f"Bearer {ADMIN_KEY}"})
    print(path, status, admin_status)
    if path in ROUTED_TO_RELOAD:
        assert status == 401 and b"invalid_admin_key" in body, (status, body)
        assert admin_status == 200, admin_body
    else:
        assert status in (401, 404) and admin_status in (401, 404), (status, body, admin_status)


def test_invented_methods_do_not_grow_the_metrics(keyed_server: RunningServer) -> None:
    def metrics_size() -> int:
        return len(httpx.get(f"{keyed_server.url}/metrics", headers=AUTH, timeout=30).content)

    before = metrics_size()
    with Neighbour(keyed_server.url, headers=AUTH) as neighbour:
        for index in range(200):
            status, _ = _raw(keyed_server, f"M{index:04d}" + "X" * 8000, "/v1/models")
            assert status == 401
    neighbour.assert_unharmed()
    after = metrics_size()
    print(f"/metrics: {before} -> {after} bytes after 200 invented 8 KB methods")
    metrics = httpx.get(f"{keyed_server.url}/metrics", headers=AUTH, timeout=30).text
    assert "XXXXXXXX" not in metrics
    assert 'method="other"' in metrics
    assert after < before + 2000  # one new series (route, "other", 401), not one per method


def test_an_engine_that_stops_stepping_is_degraded_before_it_is_stalled(keyed_server: RunningServer) -> None:
    health = httpx.get(f"{keyed_server.url}/health", timeout=10)
    assert health.status_code == 200
    pid = health.json()["models"]["demo-chat"]["pid"]
    # The engine process stopped for 4 s: not stepping, well inside half of engine_hang_seconds.
    os.kill(pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 4
        seen = []
        while time.monotonic() < deadline:
            answer = httpx.get(f"{keyed_server.url}/health", timeout=10)
            seen.append((answer.status_code, answer.json()["models"]["demo-chat"]["state"]))
            time.sleep(0.2)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert (503, "degraded") in seen, seen
    assert all(state in ("ready", "degraded") for _, state in seen), seen
    # Requests are still admitted while degraded, and the model is ready again once it steps.
    chat = {"model": "demo-chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    assert httpx.post(f"{keyed_server.url}/v1/chat/completions", json=chat, headers=AUTH, timeout=30).status_code == 200
    deadline = time.monotonic() + 10
    while httpx.get(f"{keyed_server.url}/health", timeout=10).status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert httpx.get(f"{keyed_server.url}/health", timeout=10).json()["models"]["demo-chat"]["pid"] == pid


def test_one_key_storing_a_burst_of_responses_evicts_only_its_own(keyed_server: RunningServer) -> None:
    def create(key: str) -> str:
        body = {"model": "demo-chat", "input": "hi", "max_output_tokens": 16}
        answer = httpx.post(
            f"{keyed_server.url}/v1/responses", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=30
        )
        assert answer.status_code == 200, answer.text
        return answer.json()["id"]

    def kept(key: str, ids: list[str]) -> int:
        headers = {"Authorization": f"Bearer {key}"}
        return sum(
            httpx.get(f"{keyed_server.url}/v1/responses/{rid}", headers=headers, timeout=30).status_code == 200
            for rid in ids
        )

    quiet = [create(OTHER_KEY) for _ in range(3)]
    with Neighbour(keyed_server.url, headers=AUTH) as neighbour:
        burst = [create(API_KEY) for _ in range(3 * STORED)]
    neighbour.assert_unharmed()
    assert kept(OTHER_KEY, quiet) == 3
    assert kept(API_KEY, burst) == STORED - 3
    assert kept(API_KEY, burst[-(STORED - 3) :]) == STORED - 3  # the newest of the burst
