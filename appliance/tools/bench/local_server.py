"""Start `appliance serve` for one graph on a free local port, for the length of a benchmark.

The server gets a private graphs directory holding a copy of the graph file (paths made absolute,
so the copy points at the same model) and an empty settings file, so neither the machine's
/etc/appliance settings nor APPLIANCE_* variables change what is measured.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from types import TracebackType

import httpx

from appliance.config import Graph

__all__ = ["LocalServer"]

_READY_TIMEOUT_S = 900.0  # a large model can take minutes to compile


class LocalServer:
    """`with LocalServer(graph) as url:` serves the graph at `url` and stops it (SIGTERM) on exit."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self._tmp = tempfile.TemporaryDirectory(prefix="appliance-bench-")
        self._process: subprocess.Popen[bytes] | None = None
        self.log_path = Path(self._tmp.name) / "server.log"

    def __enter__(self) -> str:
        root = Path(self._tmp.name)
        graphs = root / "graphs"
        graphs.mkdir()
        source = Path(self.graph.source)
        (graphs / source.name).write_text(_absolute_paths(source), encoding="utf-8")
        settings = root / "settings.toml"
        settings.write_text("", encoding="utf-8")
        port = _free_port()
        env = {key: value for key, value in os.environ.items() if not key.startswith("APPLIANCE_")}
        env.pop("CREDENTIALS_DIRECTORY", None)
        command = [
            sys.executable, "-m", "appliance", "serve", "--config", str(settings), "--graphs", str(graphs),
            "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
        ]  # fmt: skip
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            self._wait_ready(url)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return url

    def _wait_ready(self, url: str) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"`appliance serve` exited with code {self._process.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(f"{url}/health", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"`appliance serve` was not ready after {_READY_TIMEOUT_S:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        """The last lines the server wrote (for error messages)."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._tmp.cleanup()


def _absolute_paths(source: Path) -> str:
    """The graph file's text with every top-level `*_path` value made absolute (relative to the file)."""
    text = source.read_text(encoding="utf-8")
    for key, value in tomllib.loads(text).items():
        if key.endswith("_path") and isinstance(value, str) and not Path(value).is_absolute():
            absolute = (source.parent / value).resolve()
            # A JSON string is a valid TOML basic string.
            text = re.sub(
                rf"^{re.escape(key)}\s*=.*$",
                lambda _: f"{key} = {json.dumps(str(absolute))}",
                text,
                count=1,
                flags=re.MULTILINE,
            )
    return text


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
