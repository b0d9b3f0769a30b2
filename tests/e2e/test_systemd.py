"""systemd integration against a fake NOTIFY_SOCKET and a real SIGTERM."""

from __future__ import annotations

import signal
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import start_server, stop_server


class FakeNotifySocket:
    """Collects what the server sends to $NOTIFY_SOCKET, with arrival times."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.messages: list[tuple[float, str]] = []
        self._stop = False
        self._thread = threading.Thread(target=self._collect, daemon=True)
        self._thread.start()

    def _collect(self) -> None:
        while not self._stop:
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                continue
            for line in data.decode().splitlines():
                self.messages.append((time.monotonic(), line))

    def lines(self) -> list[str]:
        return [line for _, line in self.messages]

    def first(self, prefix: str) -> float | None:
        return next((at for at, line in self.messages if line.startswith(prefix)), None)

    def close(self) -> None:
        self._stop = True
        self._thread.join(2)
        self.sock.close()


@pytest.fixture
def notify_socket(tmp_path: Path):
    fake = FakeNotifySocket(tmp_path / "notify.sock")
    yield fake
    fake.close()


def test_ready_watchdog_and_stopping(demo_root, tmp_path, notify_socket: FakeNotifySocket) -> None:
    server = start_server(
        demo_root / "graphs",
        tmp_path / "server.log",
        wait=False,
        env={"NOTIFY_SOCKET": str(notify_socket.path), "WATCHDOG_USEC": "400000"},
    )
    try:
        deadline = time.monotonic() + 60
        while notify_socket.first("READY=1") is None and time.monotonic() < deadline:
            time.sleep(0.05)
        ready_at = notify_socket.first("READY=1")
        assert ready_at is not None, server.log()
        # READY only once the socket accepts and every model is loaded.
        assert httpx.get(f"{server.url}/health", timeout=5).status_code == 200
        lines = notify_socket.lines()
        assert any(line.startswith("STATUS=loading") for line in lines)
        assert any(line.startswith("EXTEND_TIMEOUT_USEC=") for line in lines)
        assert any(line.startswith("STATUS=serving demo-chat") for line in lines)
        time.sleep(1.0)
        pings = [at for at, line in notify_socket.messages if line == "WATCHDOG=1"]
        assert len(pings) >= 3  # every WATCHDOG_USEC/2 = 0.2 s
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(30) == 0
        time.sleep(0.3)
        assert "STOPPING=1" in notify_socket.lines()
    finally:
        stop_server(server)


def test_sigterm_drains_in_flight_streams(demo_root, tmp_path) -> None:
    server = start_server(demo_root / "graphs", tmp_path / "server.log", "--drain-seconds", "20")
    body = {
        "model": "demo-chat",
        "messages": [{"role": "user", "content": "drain"}],
        "max_tokens": 400,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    try:
        with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=30) as response:
            lines = response.iter_lines()
            next(lines)
            server.process.send_signal(signal.SIGTERM)
            time.sleep(0.2)
            # The listener is closed: new connections are refused while the stream goes on.
            with pytest.raises(httpx.ConnectError):
                httpx.get(f"{server.url}/health", timeout=2)
            rest = [line for line in lines if line]
        assert rest[-1] == "data: [DONE]"
        assert '"completion_tokens":400' in rest[-2]
        assert server.process.wait(30) == 0
    finally:
        stop_server(server)
