"""Clients that hold connections open without sending their requests (issue 21, item 1): read
deadlines close them while everyone else is served, and a connection cap keeps file descriptors
for the models."""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import RunningServer, copy_demo_graphs, running_server

TIMEOUT_S = 1.0
MAX_CONNECTIONS = 8
CHAT = {"model": "demo-chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


@pytest.fixture(scope="module")
def guarded_server(demo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp("hostile")
    graphs = directory / "graphs"
    graphs.mkdir()
    with running_server(
        copy_demo_graphs(demo_root, graphs, ["demo-chat"]),
        directory / "server.log",
        "--header-timeout",
        str(TIMEOUT_S),
        "--body-timeout",
        str(TIMEOUT_S),
        "--max-connections",
        str(MAX_CONNECTIONS),
    ) as running:
        yield running


def _connect(server: RunningServer, data: bytes = b"") -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    if data:
        sock.sendall(data)
    return sock


def _closed_after(sock: socket.socket, started: float) -> tuple[float, bytes]:
    """Seconds from `started` until the server closed `sock`, and what it sent before."""
    received = b""
    try:
        while chunk := sock.recv(4096):
            received += chunk
    except ConnectionResetError:
        # Closed all the same: a reset, not a FIN, when bytes the server never read (the short
        # body's, or a trickled byte racing the close) were still in its receive buffer.
        pass
    sock.close()
    return time.monotonic() - started, received


def test_slow_headers_and_short_bodies_are_closed_while_others_are_served(guarded_server: RunningServer) -> None:
    started = time.monotonic()
    sockets = {
        "silent": _connect(guarded_server),
        "half headers": _connect(guarded_server, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"),
        "short body": _connect(
            guarded_server,
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"model',
        ),
        "trickled headers": _connect(guarded_server, b"G"),
    }

    def trickle() -> None:
        # One byte every 0.2 s: each byte is activity, none of it completes the headers.
        for byte in b"ET /health HTTP/1.1\r\nHost: x\r\n":
            time.sleep(0.2)
            try:
                if select.select([sockets["trickled headers"]], [], [], 0)[0]:
                    return  # answered (408) or closed: a byte sent now would only draw a reset
                sockets["trickled headers"].send(bytes([byte]))
            except (OSError, ValueError):  # ValueError: the test has closed the socket itself
                return

    threading.Thread(target=trickle, daemon=True).start()
    # Served while the slow connections are open (not timed: a loaded machine may take longer).
    served = httpx.post(f"{guarded_server.url}/v1/chat/completions", json=CHAT, timeout=10)
    assert served.status_code == 200
    closed = {name: _closed_after(sock, started) for name, sock in sockets.items()}
    for name, (seconds, _) in closed.items():
        assert TIMEOUT_S - 0.1 < seconds < TIMEOUT_S + 1.0, (name, seconds)
    for name in ("half headers", "trickled headers"):
        assert closed[name][1].startswith(b"HTTP/1.1 408 "), closed[name][1]
        assert b'"code": "request_timeout"' in closed[name][1]
    assert closed["silent"][1] == b"" and closed["short body"][1] == b""
    print({name: round(seconds, 2) for name, (seconds, _) in closed.items()})
    assert httpx.post(f"{guarded_server.url}/v1/chat/completions", json=CHAT, timeout=10).status_code == 200
    log = guarded_server.log()
    assert "header_timeout" in log and "body_timeout" in log
    # The handler reading the short body saw the connection close: 499 in the access log, not a 500.
    assert '"status":499' in log and '"status":500' not in log


def test_connection_cap_makes_room_for_prompt_clients(guarded_server: RunningServer) -> None:
    # The cap is full of clients that never send a request: the one waiting longest makes room.
    idle = [_connect(guarded_server) for _ in range(MAX_CONNECTIONS)]
    time.sleep(0.2)
    assert httpx.get(f"{guarded_server.url}/health", timeout=5).status_code == 200
    assert idle[0].recv(1) == b""  # evicted
    for sock in idle:
        sock.close()
    # Every connection busy with a request (bodies still arriving): a new one gets 503 at once.
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n"
    )
    busy = [_connect(guarded_server, head) for _ in range(MAX_CONNECTIONS)]
    time.sleep(0.2)
    refused = httpx.get(f"{guarded_server.url}/health", timeout=5)
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["code"] == "too_many_connections"
    for sock in busy:
        sock.close()
    time.sleep(0.2)
    assert httpx.get(f"{guarded_server.url}/health", timeout=5).status_code == 200


def test_content_length_with_transfer_encoding_is_refused_and_closed(guarded_server: RunningServer) -> None:
    """A proxy in front that frames by Content-Length would forward the chunked body's tail as a
    second request it never saw (request smuggling): one 400, then the connection closes."""
    body = '{"model": "demo-chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}'
    smuggled = "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
    request = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n{len(body):x}\r\n{body}\r\n0\r\n\r\n{smuggled}"
    )
    sock = _connect(guarded_server, request.encode())
    _, answer = _closed_after(sock, time.monotonic())
    assert answer.count(b"HTTP/1.1 ") == 1 and answer.startswith(b"HTTP/1.1 400 "), answer
    assert (
        json.loads(answer.partition(b"\r\n\r\n")[2])["error"]["code"] == "ambiguous_length"
        and b"connection: close" in answer.lower()
    )
