"""Start `appliance serve` as a child process on a free local port and wait until /health is 200.

The one launcher for everything that needs a real server for a while: `appliance bench` (a private
server per benchmark, see `bench/local_server.py`) and the end-to-end tests (`tests/conftest.py`).
The child runs `python -m appliance` with this interpreter, so it serves the same code.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import httpx

__all__ = ["ServerProcess", "free_port"]


@dataclass
class ServerProcess:
    """A running `appliance serve`: its URL, process and the file its output goes to."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @classmethod
    def start(cls, graphs: Path, log_path: Path, *flags: str, env: Mapping[str, str] | None = None) -> Self:
        """Start serving `graphs` on 127.0.0.1 and a free port (without waiting); `env` None:
        this process's environment."""
        port = free_port()
        command = [sys.executable, "-m", "appliance", "serve", "--graphs", str(graphs), "--port", str(port), *flags]
        with log_path.open("wb") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        return cls(url=f"http://127.0.0.1:{port}", process=process, log_path=log_path)

    def wait_ready(self, timeout: float = 120.0, *, log_lines: int | None = None) -> None:
        """Return once /health answers 200; RuntimeError with the log (its last `log_lines`, or
        all of it) when the server exits first or `timeout` seconds pass."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"`appliance serve` exited with code {self.process.returncode}:\n{self.log_tail(log_lines)}"
                )
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"`appliance serve` was not ready after {timeout:.0f} s:\n{self.log_tail(log_lines)}")

    def log(self) -> str:
        """Everything the server wrote so far."""
        return self.log_path.read_text(errors="replace")

    def log_tail(self, lines: int | None = 20) -> str:
        """The last `lines` the server wrote (None: all), for error messages."""
        try:
            text = self.log()
        except OSError:
            return ""
        return text if lines is None else "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (the server drains), SIGKILL after `timeout` seconds; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        return self.process.returncode


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
