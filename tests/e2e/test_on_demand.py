"""More models than memory (issue 34): models loaded on their first request, unloaded when idle or
to make room under `max_loaded_models`, and by the admin routes, without losing a request. The
load queue itself (issue 40): tests/e2e/test_load_queue.py."""

from __future__ import annotations

import concurrent.futures
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import RunningServer, on_demand_chats, running_server

NAMES = ("od-a", "od-b", "od-c")


def _graphs(demo_root: Path, directory: Path, extra: str = "") -> Path:
    """Three on-demand copies of demo-chat under their own names."""
    return on_demand_chats(demo_root, directory, list(NAMES), extra)


def _ask(server: RunningServer, model: str, max_tokens: int = 8) -> httpx.Response:
    # ignore_eos: a random-weight model may end early on another CPU; the tests need lengths they chose.
    body = {"model": model, "prompt": "hello there", "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
    return httpx.post(f"{server.url}/v1/completions", json=body, timeout=120)


def _states(server: RunningServer) -> dict[str, str]:
    models = httpx.get(f"{server.url}/v1/models", timeout=10).json()["data"]
    return {model["id"]: model["state"] for model in models}


def _loads(server: RunningServer, model: str) -> float:
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    found = re.search(rf'^appliance_model_loads_total\{{model="{model}"\}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


@pytest.fixture(scope="module")
def budget_server(demo_root: Path, tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("on-demand")
    graphs = _graphs(demo_root, base / "graphs")
    flags = ("--max-loaded-models", "2", "--min-resident-seconds", "1")
    with running_server(graphs, base / "server.log", *flags) as server:
        yield server


def test_unloaded_models_are_available_and_the_third_load_evicts_the_least_recently_used(
    budget_server: RunningServer,
) -> None:
    server = budget_server
    health = httpx.get(f"{server.url}/health", timeout=10)
    assert health.status_code == 200, health.text  # unloaded on-demand models are available
    assert _states(server) == dict.fromkeys(NAMES, "unloaded")
    for name in NAMES:
        response = _ask(server, name)
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["text"]
    states = _states(server)
    assert states == {"od-a": "unloaded", "od-b": "ready", "od-c": "ready"}, states
    admin = httpx.get(f"{server.url}/admin/models", timeout=10).json()
    assert admin["loaded"] == 2 and admin["models"]["od-a"]["pid"] is None
    assert admin["models"]["od-c"]["rss_mb"] > 0
    # The least recently used is now od-b: asking od-a again evicts it.
    assert _ask(server, "od-a").status_code == 200
    assert _states(server) == {"od-a": "ready", "od-b": "unloaded", "od-c": "ready"}


def test_concurrent_first_requests_share_one_load(budget_server: RunningServer) -> None:
    server = budget_server
    target = next(name for name, state in _states(server).items() if state == "unloaded")
    before = _loads(server, target)
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda _: _ask(server, target), range(16)))
    assert [answer.status_code for answer in answers] == [200] * 16
    assert _loads(server, target) == before + 1


def test_a_full_budget_of_busy_models_makes_the_third_wait_and_loses_nothing(budget_server: RunningServer) -> None:
    server = budget_server
    states = _states(server)
    loaded = [name for name, state in states.items() if state == "ready"]
    waiting = next(name for name, state in states.items() if state == "unloaded")
    assert len(loaded) == 2
    results: list[httpx.Response] = []

    def long_answer(name: str) -> None:
        results.append(_ask(server, name, max_tokens=1000))

    threads = [threading.Thread(target=long_answer, args=(name,)) for name in loaded]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # both generating
        models = httpx.get(f"{server.url}/admin/models", timeout=10).json()["models"]
        if all(models[name]["in_flight"] for name in loaded):
            break
        time.sleep(0.02)
    served = _ask(server, waiting)  # it waits while the one loaded first finishes, then loads
    for thread in threads:
        thread.join()
    assert served.status_code == 200, served.text
    assert [result.status_code for result in results] == [200, 200]
    assert _states(server)[waiting] == "ready"


def test_admin_unload_finishes_streams_in_flight(budget_server: RunningServer) -> None:
    server = budget_server
    name = next(name for name, state in _states(server).items() if state == "ready")
    body = {"model": name, "prompt": "hello", "max_tokens": 600, "temperature": 0, "stream": True, "ignore_eos": True}
    chunks: list[str] = []

    def stream() -> None:
        with httpx.stream("POST", f"{server.url}/v1/completions", json=body, timeout=120) as response:
            chunks.extend(line for line in response.iter_lines() if line.startswith("data: "))

    reader = threading.Thread(target=stream)
    reader.start()
    while not chunks and reader.is_alive():
        time.sleep(0.01)
    unloaded = httpx.post(f"{server.url}/admin/models/{name}/unload", timeout=120).json()
    reader.join()
    assert unloaded["unloaded"] is True and unloaded["state"] == "unloaded"
    assert chunks[-1] == "data: [DONE]" and '"finish_reason":"length"' in chunks[-2].replace(" ", "")
    loaded = httpx.post(f"{server.url}/admin/models/{name}/load", timeout=120).json()
    assert loaded["state"] == "ready" and loaded["pid"]


def test_an_idle_model_is_unloaded_and_its_memory_freed(demo_root: Path, tmp_path: Path) -> None:
    graphs = _graphs(demo_root, tmp_path / "graphs", extra="idle_unload_seconds = 2")
    for name in NAMES[1:]:
        (graphs / f"{name}.toml").unlink()
    with running_server(graphs, tmp_path / "server.log") as server:
        assert _ask(server, "od-a").status_code == 200
        model = httpx.get(f"{server.url}/admin/models", timeout=10).json()["models"]["od-a"]
        pid, rss = model["pid"], model["rss_mb"]
        assert pid and rss > 0
        print(f"engine RSS while loaded: {rss} MiB")
        deadline = time.monotonic() + 30
        while _states(server)["od-a"] != "unloaded" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _states(server)["od-a"] == "unloaded"
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not os.path.exists(f"/proc/{pid}")  # the process, and its memory, are gone
        assert _ask(server, "od-a").status_code == 200  # and it loads again on demand


def test_the_models_command_lists_loads_and_unloads(budget_server: RunningServer) -> None:
    def models(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "appliance", "models", *args, "--url", budget_server.url]
        return subprocess.run(command, capture_output=True, text=True, timeout=120)

    listed = models("list")
    assert listed.returncode == 0, listed.stderr
    assert "max_loaded_models 2" in listed.stdout and all(name in listed.stdout for name in NAMES)
    name = next(name for name, state in _states(budget_server).items() if state == "ready")
    unloaded = models("unload", name)
    assert (unloaded.returncode, unloaded.stdout.strip()) == (0, f"{name}: unloaded")
    assert _states(budget_server)[name] == "unloaded"
    loaded = models("load", name)
    assert (loaded.returncode, loaded.stdout.strip()) == (0, f"{name}: ready")
    missing = models("load", "no-such-model")
    assert missing.returncode == 1 and "404" in missing.stderr and "does not exist" in missing.stderr
