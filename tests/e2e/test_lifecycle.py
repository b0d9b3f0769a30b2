"""Start-up, engine failure and restart, body limits: each with a server of its own."""

from __future__ import annotations

import os
import signal
import time

import httpx
import pytest

from tests.conftest import start_server, stop_server, wait_ready

MODEL = "demo-chat"


@pytest.fixture
def own_server(demo_root, tmp_path):
    servers = []

    def start(*extra: str, graphs=None, wait=True):
        server = start_server(graphs or demo_root / "graphs", tmp_path / f"server{len(servers)}.log", *extra, wait=wait)
        servers.append(server)
        return server

    yield start
    for server in servers:
        stop_server(server)


def test_health_is_503_until_loaded_then_200(own_server) -> None:
    server = own_server(wait=False)
    statuses = set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            response = httpx.get(f"{server.url}/health", timeout=2)
        except httpx.TransportError:
            time.sleep(0.02)
            continue
        statuses.add(response.status_code)
        if response.status_code == 200:
            break
        # 503 while any model still loads (demo-chat may be ready before demo-vision).
        assert "loading" in {model["state"] for model in response.json()["models"].values()}
        time.sleep(0.02)
    assert 200 in statuses


def test_engine_crash_fails_requests_cleanly_and_restarts(own_server) -> None:
    server = own_server()
    pid = server.model_status()["pid"]
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "long"}],
        "max_tokens": 1000,
        "ignore_eos": True,
        "stream": True,
    }
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=30) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        next(lines)
        os.kill(pid, signal.SIGKILL)
        rest = [line for line in lines if line]
    assert rest[-1] == "data: [DONE]"
    assert '"error"' in rest[-2]
    unavailable = httpx.post(f"{server.url}/v1/chat/completions", json={**body, "stream": False}, timeout=30)
    assert unavailable.status_code == 503
    assert unavailable.json()["error"]["code"] == "model_not_ready"
    assert "Retry-After" in unavailable.headers
    wait_ready(server, timeout=60)
    assert server.model_status()["pid"] != pid
    again = httpx.post(
        f"{server.url}/v1/chat/completions",
        json={"model": MODEL, "messages": [{"role": "user", "content": "back?"}], "max_tokens": 3},
        timeout=30,
    )
    assert again.status_code == 200


def test_body_size_limit(own_server) -> None:
    server = own_server("--max-body-size", "2000")
    base = b'{"model": "demo-chat", "max_tokens": 1, "messages": [{"role": "user", "content": "'
    tail = b'"}]}'
    at_limit = base + b"a" * (2000 - len(base) - len(tail)) + tail
    assert len(at_limit) == 2000
    ok = httpx.post(f"{server.url}/v1/chat/completions", content=at_limit, timeout=30)
    assert ok.status_code == 200, ok.text
    over = base + b"a" * (2001 - len(base) - len(tail)) + tail
    too_big = httpx.post(f"{server.url}/v1/chat/completions", content=over, timeout=30)
    assert too_big.status_code == 413
    assert too_big.json()["error"]["code"] == "payload_too_large"

    def chunked():
        yield base
        yield b"a" * 5000
        yield tail

    chunked_response = httpx.post(f"{server.url}/v1/chat/completions", content=chunked(), timeout=30)
    assert chunked_response.status_code == 413


def test_bad_graph_fails_startup_naming_file_and_field(own_server, tmp_path) -> None:
    graphs = tmp_path / "graphs"
    graphs.mkdir()
    (graphs / "broken.toml").write_text('name = "x"\nmodel_path = "."\n[scheduler]\ncache_sise = 1\n')
    server = own_server(graphs=graphs, wait=False)
    assert server.process.wait(60) == 2
    log = server.log()
    assert "broken.toml" in log and "cache_sise" in log


def test_missing_device_fails_startup(own_server, demo_root, tmp_path) -> None:
    graphs = tmp_path / "graphs"
    graphs.mkdir()
    text = (demo_root / "graphs" / "demo-chat.toml").read_text()
    text = text.replace('device = "CPU"', 'device = "GPU"').replace(
        'model_path = "../models/demo-chat"', f'model_path = "{demo_root / "models" / "demo-chat"}"'
    )
    (graphs / "gpu.toml").write_text(text)
    server = own_server(graphs=graphs, wait=False)
    assert server.process.wait(60) == 2
    log = server.log()
    assert "gpu.toml" in log and "GPU" in log and "does not have" in log


def test_check_command(demo_root, tmp_path) -> None:
    import subprocess
    import sys

    ok = subprocess.run(
        [sys.executable, "-m", "appliance", "check", "--graphs", str(demo_root / "graphs")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert "demo-chat" in ok.stdout and ok.stdout.startswith("ok")
    (tmp_path / "bad.toml").write_text('name = "x"\nmodel_path = "nowhere"\n')
    bad = subprocess.run(
        [sys.executable, "-m", "appliance", "check", "--graphs", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2
    assert "bad.toml" in bad.stderr and "model_path" in bad.stderr


def test_a_port_in_use_is_one_line_and_exit_3_before_any_engine(demo_root, tmp_path) -> None:
    import socket
    import subprocess
    import sys

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    (tmp_path / "none.toml").write_text("")
    env = {name: value for name, value in os.environ.items() if not name.startswith("APPLIANCE_")}
    with taken:
        run = subprocess.run(
            [sys.executable, "-m", "appliance", "serve", str(demo_root / "graphs" / "demo-chat.toml"),
             "--port", str(port), "--config", str(tmp_path / "none.toml")],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
    assert run.returncode == 3
    assert run.stderr == (
        f"appliance: cannot listen on 127.0.0.1:{port}: the port is already in use by another process "
        "(`ss -ltnp` shows which); stop it, or choose another port with --port\n"
    )
    # No "serving ..." line, no uvicorn start, no engine (its load line, or a traceback when it dies).
    assert run.stdout == ""


def test_ctrl_c_drains_and_exits_0_without_a_traceback(own_server) -> None:
    server = own_server()
    server.process.send_signal(signal.SIGINT)
    assert server.process.wait(60) == 0
    assert "Traceback" not in server.log() and "KeyboardInterrupt" not in server.log()
