"""Issue 40, rows L2 and L3, on the real server: loads under `max_loaded_models` wait in a fair
queue (a model beside two busy ones is served, not refused), the 503 only when the queue is full
or the wait passes `load_timeout_seconds`, an engine retiring after a reload counts against the
limit until its process is gone, and a load during an unload's drain cancels the unload."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.conftest import (
    RunningServer,
    assert_stream_completed,
    copy_demo_graphs,
    on_demand_chats,
    running_server,
)
from tests.e2e.neighbour import Neighbour


def _ask(server: RunningServer, model: str, max_tokens: int = 8) -> httpx.Response:
    body = {"model": model, "prompt": "hello there", "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
    return httpx.post(f"{server.url}/v1/completions", json=body, timeout=180)


def _admin(server: RunningServer) -> dict:
    return httpx.get(f"{server.url}/admin/models", timeout=10).json()


def _metric(server: RunningServer, name: str, labels: str = "") -> float:
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    found = re.search(rf"^{name}{re.escape(labels)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def _engine_processes(server: RunningServer) -> set[int]:
    """The server's engine processes alive now (spawned children, zombies left out)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == server.process.pid and fields[0] != "Z" and b"spawn_main" in cmdline:
            found.add(int(entry.name))
    return found


@contextmanager
def _counting_engines(server: RunningServer) -> Iterator[list[int]]:
    """Samples the number of engine processes alive until the block ends: the list's first item is
    the largest count seen."""
    largest = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            largest[0] = max(largest[0], len(_engine_processes(server)))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield largest
    finally:
        stop.set()
        sampler.join(10)


def _stream(server: RunningServer, model: str, lines: list[str], max_tokens: int = 1000) -> threading.Thread:
    """A long completion streamed on a thread of its own; its SSE data lines go to `lines`."""
    body = {"model": model, "prompt": "hello", "max_tokens": max_tokens, "temperature": 0, "stream": True}
    body["ignore_eos"] = True

    def run() -> None:
        with httpx.stream("POST", f"{server.url}/v1/completions", json=body, timeout=180) as response:
            lines.extend(line for line in response.iter_lines() if line.startswith("data: "))

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 60
    while not lines and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert lines, "the stream never started"
    return thread


def test_a_model_beside_two_busy_ones_is_served_not_refused(
    demo_root: Path, retrieval_root: Path, tmp_path: Path
) -> None:
    """The issue's L2: under max_loaded_models 2, demo-embed got 503 on 12 of 12 tries while two
    other models had steady traffic. Now every try is served, and so is every neighbour stream."""
    graphs = on_demand_chats(demo_root, tmp_path / "graphs", ["od-a", "od-b"])
    copy_demo_graphs(retrieval_root, graphs, ["demo-embed"])
    embed = graphs / "demo-embed.toml"
    embed.write_text(embed.read_text().replace('name = "demo-embed"', 'name = "demo-embed"\nload = "on_demand"'))
    with (
        running_server(graphs, tmp_path / "server.log", "--max-loaded-models", "2") as server,
        _counting_engines(server) as engines,
    ):
        with Neighbour(server.url, "od-a", max_tokens=32) as a, Neighbour(server.url, "od-b", max_tokens=32) as b:
            tries = []
            for attempt in range(12):
                body = {"model": "demo-embed", "input": f"try {attempt}"}
                tries.append(httpx.post(f"{server.url}/v1/embeddings", json=body, timeout=180))
        assert [answer.status_code for answer in tries] == [200] * 12, [answer.text for answer in tries]
        assert all(len(answer.json()["data"][0]["embedding"]) == 384 for answer in tries)
        for neighbour in (a, b):  # unloaded between their requests, never refused one
            assert not neighbour.failures, neighbour.failures
            assert neighbour.streams >= 1
        print(f"largest number of engine processes alive: {engines[0]}")
        assert engines[0] <= 2
        evictions = sum(
            _metric(server, "appliance_model_evictions_total", f'{{model="{name}"}}')
            for name in ("od-a", "od-b", "demo-embed")
        )
        assert evictions >= 1
        assert _metric(server, "appliance_load_queue_wait_seconds_count", '{model="demo-embed"}') >= 1
        assert _metric(server, "appliance_load_queue_refused_total", '{model="demo-embed",reason="timeout"}') == 0
        assert _metric(server, "appliance_load_queue_length") == 0


def test_a_full_queue_or_a_wait_past_the_load_timeout_is_a_503(demo_root: Path, tmp_path: Path) -> None:
    graphs = on_demand_chats(demo_root, tmp_path / "graphs", ["od-a", "od-c"])
    on_demand_chats(demo_root, graphs, ["od-b"], "load_timeout_seconds = 3")
    flags = ("--max-loaded-models", "1", "--min-resident-seconds", "600", "--load-queue-size", "1")
    with running_server(graphs, tmp_path / "server.log", *flags) as server:
        assert _ask(server, "od-a").status_code == 200  # resident for ten minutes: nothing makes room
        pid = _admin(server)["models"]["od-a"]["pid"]
        waited: list[httpx.Response] = []
        waiting = threading.Thread(target=lambda: waited.append(_ask(server, "od-b")))
        waiting.start()
        deadline = time.monotonic() + 10
        while _admin(server)["load_queue"] != ["od-b"] and time.monotonic() < deadline:
            time.sleep(0.02)
        full = _ask(server, "od-c")
        waiting.join()
        assert full.status_code == 503 and full.headers.get("retry-after"), full.text
        assert set(full.json()["error"]) == {"message", "type", "param", "code"}
        assert "load_queue_size" in full.json()["error"]["message"]
        (timed_out,) = waited
        assert timed_out.status_code == 503 and timed_out.headers.get("retry-after"), timed_out.text
        assert "waited 3 s (load_timeout_seconds)" in timed_out.json()["error"]["message"]
        admin = _admin(server)
        assert admin["load_queue"] == [] and admin["models"]["od-a"]["pid"] == pid
        assert admin["models"]["od-a"]["state"] == "ready"
        assert _metric(server, "appliance_load_queue_refused_total", '{model="od-c",reason="full"}') == 1
        assert _metric(server, "appliance_load_queue_refused_total", '{model="od-b",reason="timeout"}') == 1


def test_a_load_during_an_unload_drain_cancels_the_unload(demo_root: Path, tmp_path: Path) -> None:
    """L3: the load used to answer 200 "unloading" and the model unloaded anyway. Now the model
    serves on, the same process: the stream in flight and a neighbour's requests (queued while
    the unload drained) are all answered by it."""
    graphs = on_demand_chats(demo_root, tmp_path / "graphs", ["od-a"])
    with running_server(graphs, tmp_path / "server.log") as server:
        assert _ask(server, "od-a").status_code == 200
        lines: list[str] = []
        with Neighbour(server.url, "od-a", max_tokens=16) as neighbour:
            streaming = _stream(server, "od-a", lines)
            unloaded: list[dict] = []
            unloading = threading.Thread(
                target=lambda: unloaded.append(
                    httpx.post(f"{server.url}/admin/models/od-a/unload?drain_seconds=120", timeout=180).json()
                )
            )
            unloading.start()
            deadline = time.monotonic() + 10
            while _admin(server)["models"]["od-a"]["state"] != "unloading" and time.monotonic() < deadline:
                time.sleep(0.01)
            loaded = httpx.post(f"{server.url}/admin/models/od-a/load", timeout=60)
            still_streaming = streaming.is_alive()
            unloading.join()
            streaming.join()
        assert still_streaming, "the stream ended before the load: the drain was over too soon to test"
        assert loaded.status_code == 200, loaded.text
        assert loaded.json()["state"] == "ready" and loaded.json()["pid"] == neighbour.pid_before
        assert unloaded[0]["unloaded"] is False and unloaded[0]["state"] == "ready"
        assert_stream_completed(lines)
        neighbour.assert_unharmed()  # every stream answered, by the same engine process
        assert _ask(server, "od-a").status_code == 200
        assert _admin(server)["models"]["od-a"]["pid"] == neighbour.pid_before


def test_an_engine_retiring_after_a_reload_counts_against_the_limit(demo_root: Path, tmp_path: Path) -> None:
    """L3: a model changed by a reload while it streams leaves its old engine draining; a load
    for a third model used to start beside it (3 engines under a limit of 2). Now it waits until
    the old engine's process is gone, and the idle model that could have been unloaded is kept."""
    graphs = on_demand_chats(demo_root, tmp_path / "graphs", ["od-a", "od-b", "od-c"])
    with running_server(graphs, tmp_path / "server.log", "--max-loaded-models", "2") as server:
        assert _ask(server, "od-a").status_code == 200 and _ask(server, "od-b").status_code == 200
        pid_b = _admin(server)["models"]["od-b"]["pid"]
        lines: list[str] = []
        with _counting_engines(server) as engines:
            streaming = _stream(server, "od-a", lines)
            changed = (graphs / "od-a.toml").read_text().replace("[limits]", "[limits]\nrequest_timeout_seconds = 600")
            (graphs / "od-a.toml").write_text(changed)
            report = httpx.post(f"{server.url}/admin/reload", timeout=60).json()
            assert report["replaced"] == ["od-a"], report
            counted = _admin(server)["engines"]
            third = _ask(server, "od-c")
            ended_first = not streaming.is_alive()
            streaming.join()
        assert third.status_code == 200, third.text
        assert counted == 2  # the old od-a, draining, and od-b
        assert ended_first, "od-c was served while the old od-a still streamed"
        assert_stream_completed(lines)
        print(f"largest number of engine processes alive: {engines[0]}")
        assert engines[0] <= 2
        admin = _admin(server)
        assert admin["models"]["od-b"]["pid"] == pid_b and admin["models"]["od-a"]["state"] == "unloaded"
        assert admin["engines"] == 2
