"""Graph changes without a restart: SIGHUP and POST /admin/reload."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import assert_stream_completed, start_server, stop_server


def graph_text(demo_root: Path, name: str, max_tokens_limit: int = 1024) -> str:
    return (
        f'name = "{name}"\n'
        f'model_path = "{demo_root / "models" / "demo-chat"}"\n'
        "[scheduler]\ncache_size = 1\nmax_num_batched_tokens = 2048\n"
        f"[limits]\nmax_tokens_limit = {max_tokens_limit}\n"
        '[plugin_config]\nINFERENCE_PRECISION_HINT = "f32"\n'
    )


def model_ids(server) -> list[str]:
    return [model["id"] for model in httpx.get(f"{server.url}/v1/models", timeout=5).json()["data"]]


def wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def wait_in_flight(server, model: str) -> None:
    """Until the model has a request in flight (so the reload really happens under load)."""
    deadline = time.monotonic() + 10
    while httpx.get(f"{server.url}/health", timeout=5).json()["models"].get(model, {}).get("in_flight", 0) < 1:
        assert time.monotonic() < deadline
        time.sleep(0.005)


def long_stream(server, model: str, results: list) -> None:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "x"}],
        "max_tokens": 1000,
        "ignore_eos": True,
        "stream": True,
    }
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=60) as response:
        results.append([line for line in response.iter_lines() if line])


@pytest.fixture
def reload_setup(demo_root, tmp_path):
    graphs = tmp_path / "graphs"
    graphs.mkdir()
    (graphs / "a.toml").write_text(graph_text(demo_root, "model-a"))
    server = start_server(graphs, tmp_path / "server.log")
    yield server, graphs
    stop_server(server)


def test_add_change_bad_and_remove(reload_setup, demo_root) -> None:
    server, graphs = reload_setup
    assert model_ids(server) == ["model-a"]

    (graphs / "b.toml").write_text(graph_text(demo_root, "model-b"))
    server.process.send_signal(signal.SIGHUP)
    wait_for(lambda: "model-b" in model_ids(server))
    body = {"model": "model-b", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
    assert httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=30).status_code == 200

    # A bad file refuses the whole reload and leaves the running models alone.
    (graphs / "c.toml").write_text('name = "model-c"\nmodel_path = "x"\ncolour = 1\n')
    refused = httpx.post(f"{server.url}/admin/reload", timeout=60)
    assert refused.status_code == 400 and "c.toml" in refused.json()["error"]
    assert model_ids(server) == ["model-a", "model-b"]
    (graphs / "c.toml").unlink()

    # A changed graph takes over without dropping the request in flight on the old engine.
    results: list = []
    streaming = threading.Thread(target=long_stream, args=(server, "model-b", results))
    streaming.start()
    wait_in_flight(server, "model-b")
    (graphs / "b.toml").write_text(graph_text(demo_root, "model-b", max_tokens_limit=50))
    report = httpx.post(f"{server.url}/admin/reload", timeout=60).json()
    assert report["replaced"] == ["model-b"] and report["unchanged"] == ["model-a"]
    streaming.join(60)
    assert_stream_completed(results[0])
    too_many = httpx.post(f"{server.url}/v1/chat/completions", json={**body, "max_tokens": 100}, timeout=30)
    assert too_many.status_code == 400 and too_many.json()["error"]["param"] == "max_tokens"

    # A removed graph stops taking requests; its in-flight request still finishes.
    results.clear()
    streaming = threading.Thread(target=long_stream, args=(server, "model-a", results))
    streaming.start()
    wait_in_flight(server, "model-a")
    (graphs / "a.toml").unlink()
    report = httpx.post(f"{server.url}/admin/reload", timeout=60).json()
    assert report["removed"] == ["model-a"]
    gone = httpx.post(f"{server.url}/v1/chat/completions", json={**body, "model": "model-a"}, timeout=30)
    assert gone.status_code == 404
    streaming.join(60)
    assert_stream_completed(results[0])
    assert model_ids(server) == ["model-b"]


def test_an_empty_directory_serves_until_a_reload_adds_models(demo_root, tmp_path) -> None:
    graphs = tmp_path / "graphs"
    graphs.mkdir()
    server = start_server(graphs, tmp_path / "server.log", wait=False)
    try:
        wait_for(lambda: _health(server).status_code == 503)
        assert _health(server).json()["status"] == "no_models" and model_ids(server) == []
        (graphs / "a.toml").write_text(graph_text(demo_root, "model-a"))
        assert httpx.post(f"{server.url}/admin/reload", timeout=60).json()["added"] == ["model-a"]
        assert _health(server).status_code == 200 and model_ids(server) == ["model-a"]
    finally:
        stop_server(server)
    assert "holds no graph files: serving no models" in server.log()


def _health(server) -> httpx.Response:
    try:
        return httpx.get(f"{server.url}/health", timeout=5)
    except httpx.TransportError:
        return httpx.Response(599)
