"""Two appliances behind HAProxy with the shipped deploy/haproxy/haproxy.cfg, all on 127.0.0.1:
streaming load through the balancer while one appliance has a rolling restart (SIGTERM, then
started again on its port). No request may fail, and both boxes must serve."""

from __future__ import annotations

import dataclasses
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from appliance.tools.launch import free_port
from tests.conftest import REPO, RunningServer, assert_stream_completed, copy_demo_graphs, start_server, stop_server

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
CONFIG = REPO / "deploy" / "haproxy" / "haproxy.cfg"
CLIENTS = 4
# Longer than HAProxy needs to see /health at 503 (the shipped checks: at most inter 1 s plus
# fastinter 0.5 s for fall 2), so it has stopped sending when the listener closes.
DELAY = ("--shutdown-delay-seconds", "3")
BODY = {
    "model": "demo-chat",
    "messages": [{"role": "user", "content": "through the balancer"}],
    "max_tokens": 120,
    "ignore_eos": True,
    "stream": True,
}

pytestmark = pytest.mark.skipif(
    not Path(HAPROXY).is_file(), reason="haproxy is not installed (apt-get install haproxy; .ci/run does)"
)


@dataclasses.dataclass
class Outcome:
    box: str
    started: float
    ended: float
    error: str = ""


def loopback_config(listen_port: int, boxes: dict[str, int], stats_socket: Path) -> str:
    """The shipped configuration with a global section fit for a test (foreground, no chroot or
    user switch, a stats socket of its own), listening on 127.0.0.1 and pointing at `boxes`."""
    text = CONFIG.read_text()
    defaults_and_rest = text[text.index("\ndefaults") :]
    test_global = f"global\n    log stdout format raw local0\n    stats socket {stats_socket} level admin\n"
    body = re.sub(r"(?m)^    bind :8000$", f"    bind 127.0.0.1:{listen_port}", defaults_and_rest)
    body = re.sub(r"(?m)^    server .*\n", "", body)
    servers = "".join(f"    server {name} 127.0.0.1:{port}\n" for name, port in boxes.items())
    assert f"bind 127.0.0.1:{listen_port}" in body
    return test_global + body.rstrip("\n") + "\n" + servers


def server_states(stats_socket: Path) -> dict[str, str]:
    """Each backend server's status as HAProxy sees it ("UP", "DOWN", "UP 1/2", ...)."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(stats_socket))
        sock.sendall(b"show stat\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    lines = data.decode().splitlines()
    header = lines[0].removeprefix("# ").split(",")
    rows = [dict(zip(header, line.split(","))) for line in lines[1:] if line]
    return {
        row["svname"]: row["status"] for row in rows if row["pxname"] == "appliances" and row["svname"] != "BACKEND"
    }


def wait_for_state(stats_socket: Path, box: str, state: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while (states := server_states(stats_socket)).get(box) != state:
        assert time.monotonic() < deadline, f"{box} not {state} in HAProxy after {timeout} s: {states}"
        time.sleep(0.1)


def client_loop(url: str, stop: threading.Event, outcomes: list[Outcome]) -> None:
    """Stream chat completions through the balancer, one after the other on a keep-alive client
    (as the openai SDK does), until `stop`; every request's outcome goes to `outcomes`."""
    with httpx.Client(base_url=url, timeout=30) as client:
        while not stop.is_set():
            started = time.monotonic()
            box, error = "", ""
            try:
                with client.stream("POST", "/v1/chat/completions", json=BODY) as response:
                    box = response.headers.get("x-appliance-box", "")
                    lines = [line for line in response.iter_lines() if line]
                    if response.status_code != 200:
                        error = f"status {response.status_code}: {lines[:1]}"
                    else:
                        assert_stream_completed(lines)
            except Exception as exc:  # any failure counts, whatever it is
                error = f"{type(exc).__name__}: {exc}"
            outcomes.append(Outcome(box, started, time.monotonic(), error))


def sticky_boxes(url: str, session: str, requests: int = 4) -> list[str]:
    """The box that answered each of `requests` short chat completions sent with `X-Session-Id`."""
    body = {**BODY, "stream": False, "max_tokens": 2}
    boxes = []
    for _ in range(requests):
        response = httpx.post(f"{url}/v1/chat/completions", json=body, headers={"X-Session-Id": session}, timeout=30)
        assert response.status_code == 200, response.text
        boxes.append(response.headers["x-appliance-box"])
    return boxes


def logged_chat_requests(server: RunningServer) -> int:
    """Chat completions in the appliance's access log (one JSON line per request)."""
    return sum(
        '"event":"request"' in line and '"path":"/v1/chat/completions"' in line for line in server.log().splitlines()
    )


def test_rolling_restart_behind_haproxy_loses_no_request(demo_root: Path, tmp_path: Path) -> None:
    graphs = tmp_path / "graphs"
    graphs.mkdir()
    copy_demo_graphs(demo_root, graphs, ["demo-chat"])
    box1 = start_server(graphs, tmp_path / "box1.log", *DELAY, wait=False)
    box2 = start_server(graphs, tmp_path / "box2.log", *DELAY)
    box1.wait_ready()
    port1 = int(box1.url.rsplit(":", 1)[1])
    port2 = int(box2.url.rsplit(":", 1)[1])
    listen_port = free_port()
    stats_socket = tmp_path / "haproxy.sock"
    config = tmp_path / "haproxy.cfg"
    config.write_text(loopback_config(listen_port, {"box1": port1, "box2": port2}, stats_socket))
    haproxy_log = tmp_path / "haproxy.log"
    with haproxy_log.open("wb") as log:
        haproxy = subprocess.Popen([HAPROXY, "-db", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT)
    restarted: RunningServer | None = None
    stop = threading.Event()
    outcomes: list[Outcome] = []
    workers = [
        threading.Thread(target=client_loop, args=(f"http://127.0.0.1:{listen_port}", stop, outcomes), daemon=True)
        for _ in range(CLIENTS)
    ]
    try:
        deadline = time.monotonic() + 10
        while not stats_socket.exists():
            assert haproxy.poll() is None and time.monotonic() < deadline, haproxy_log.read_text()
            time.sleep(0.05)
        wait_for_state(stats_socket, "box1", "UP")
        wait_for_state(stats_socket, "box2", "UP")
        sessions = {session: sticky_boxes(f"http://127.0.0.1:{listen_port}", session) for session in ("s1", "s2", "s3")}
        for worker in workers:
            worker.start()
        time.sleep(4)
        sigterm_at = time.monotonic()
        box1.process.send_signal(signal.SIGTERM)
        # Out of HAProxy on its /health 503, while it still accepts requests.
        wait_for_state(stats_socket, "box1", "DOWN", timeout=float(DELAY[1]))
        down_at = time.monotonic()
        assert box1.process.poll() is None
        assert box1.process.wait(30) == 0
        drained_at = time.monotonic()
        restarted = dataclasses.replace(
            RunningServer.start(graphs, tmp_path / "box1-again.log", *DELAY, "--port", str(port1)), url=box1.url
        )
        restarted.wait_ready()
        wait_for_state(stats_socket, "box1", "UP")
        back_at = time.monotonic()
        time.sleep(4)
    finally:
        stop.set()
        for worker in workers:
            worker.join(40)
        haproxy.terminate()
        haproxy.wait(10)
        for server in (box1, box2, restarted):
            if server is not None:
                stop_server(server)

    failed = [outcome for outcome in outcomes if outcome.error]
    spread = Counter(outcome.box for outcome in outcomes)
    delay_ends = sigterm_at + float(DELAY[1])
    phases = {
        "before SIGTERM": Counter(o.box for o in outcomes if o.started < sigterm_at),
        "SIGTERM to box1 back": Counter(o.box for o in outcomes if sigterm_at <= o.started < back_at),
        "after box1 back": Counter(o.box for o in outcomes if o.started >= back_at),
    }
    drained = [o for o in outcomes if o.box == "box1" and o.started < sigterm_at < o.ended]
    late = [o for o in outcomes if o.box == "box1" and sigterm_at <= o.started < drained_at]
    print(
        f"\n{len(outcomes)} streamed requests through HAProxy, {len(failed)} failed; per box: "
        f"{dict(sorted(spread.items()))}; by phase: { ({k: dict(sorted(v.items())) for k, v in phases.items()}) }; "
        f"box1: {len(drained)} streams in flight at SIGTERM and {len(late)} sent to it after SIGTERM (during its "
        f"{DELAY[1]} s shutdown delay) all finished; HAProxy took it out {down_at - sigterm_at:.1f} s after SIGTERM, "
        f"it exited after {drained_at - sigterm_at:.1f} s "
        f"and was back in HAProxy after {back_at - sigterm_at:.1f} s; X-Session-Id: {sessions}"
    )
    assert not failed, failed[:5]
    assert spread["box1"] > 0 and spread["box2"] > 0
    assert phases["before SIGTERM"]["box1"] > 0 and phases["before SIGTERM"]["box2"] > 0
    assert drained, "no stream was in flight on box1 when it got SIGTERM"
    assert phases["after box1 back"]["box1"] > 0, "box1 got no requests after its restart"
    # HAProxy saw /health at 503 and stopped sending before the listener closed.
    assert all(o.started < delay_ends for o in late), [o.started - sigterm_at for o in late]
    # X-Session-Id affinity: each session's requests all went to one box.
    assert all(len(set(boxes)) == 1 for boxes in sessions.values()), sessions
    # The appliances' own access logs agree with the balancer's X-Appliance-Box header.
    by_session = Counter(box for boxes in sessions.values() for box in boxes)
    assert logged_chat_requests(box1) + logged_chat_requests(restarted) == spread["box1"] + by_session["box1"]
    assert logged_chat_requests(box2) == spread["box2"] + by_session["box2"]


def test_shutdown_delay_keeps_serving_with_health_503(demo_root: Path, tmp_path: Path) -> None:
    graphs = tmp_path / "graphs"
    graphs.mkdir()
    server = start_server(copy_demo_graphs(demo_root, graphs, ["demo-chat"]), tmp_path / "server.log", *DELAY)
    body = {**BODY, "stream": False, "max_tokens": 4}
    try:
        server.process.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        health = httpx.get(f"{server.url}/health", timeout=5)
        assert health.status_code == 503 and health.json()["status"] == "draining"
        # Still served: a balancer that has not seen the 503 yet loses nothing.
        assert httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=10).status_code == 200
        assert server.process.poll() is None
        assert server.process.wait(30) == 0
        assert "requests accepted for 3 s more" in server.log()
    finally:
        stop_server(server)
