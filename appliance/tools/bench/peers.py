"""Peers: other OpenAI-compatible servers measured in the same run as the appliance.

A peer is a name and a URL (`--peer NAME=URL`: already running), or a name and a shell command
(`--peer-command NAME=COMMAND`) that the bench starts, waits on until `GET /v1/models` answers 200
(and `GET /health`, where the peer has it, no longer 503: servers that list their models while
they load, as the appliance does, answer 503 there until they can generate), drives, and stops
(SIGTERM to its process group, SIGKILL after a grace period). A `{port}` in the command is
replaced by a free local port and the peer's URL is then `http://127.0.0.1:{port}`; without one,
`--peer-url NAME=URL` says where it listens. Nothing here knows any particular server: llama.cpp's
`llama-server`, vLLM or another appliance are all just a command line and a URL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import httpx

from appliance.tools.launch import free_port

__all__ = ["RESERVED_NAMES", "Peer", "PeerProcess", "parse_peers", "peer_ready"]

RESERVED_NAMES = ("appliance", "served", "raw", "prefix-cache", "no-prefix-cache")
READY_PATH = "/v1/models"
HEALTH_PATH = "/health"


@dataclass(frozen=True)
class Peer:
    """One server to measure besides the appliance and the raw pipeline."""

    name: str
    url: str | None = None
    """Where it answers; None for a command with `{port}` (the URL is known once the port is)."""
    command: str | None = None
    """A shell command that starts it; None: it is already running at `url`."""
    model: str | None = None
    """The model name to send; None: the appliance's (`--model`, or the graph's name)."""


def parse_peers(
    urls: Sequence[str] = (),
    commands: Sequence[str] = (),
    command_urls: Sequence[str] = (),
    models: Sequence[str] = (),
) -> list[Peer]:
    """Peers from the `NAME=VALUE` flags, in the order given (URLs first); ValueError names the flag."""
    url_of = _pairs("--peer", urls)
    command_of = _pairs("--peer-command", commands)
    command_url_of = _pairs("--peer-url", command_urls)
    model_of = _pairs("--peer-model", models)
    for name in url_of.keys() & command_of.keys():
        raise ValueError(f"peer {name!r} is given both by --peer and by --peer-command")
    for flag, names in (("--peer-url", command_url_of), ("--peer-model", model_of)):
        for name in names.keys() - url_of.keys() - command_of.keys():
            raise ValueError(f"{flag} {name}=...: no --peer or --peer-command named {name!r}")
    for name in command_url_of.keys() & url_of.keys():
        raise ValueError(f"--peer-url {name}=...: {name!r} is a --peer (its URL is given there)")
    peers = [Peer(name, url=url, model=model_of.get(name)) for name, url in url_of.items()]
    for name, command in command_of.items():
        url = command_url_of.get(name)
        if url is None and "{port}" not in command:
            raise ValueError(
                f"--peer-command {name}=...: put {{port}} in the command (a free port is chosen) "
                f"or give --peer-url {name}=URL"
            )
        peers.append(Peer(name, url=url, command=command, model=model_of.get(name)))
    for peer in peers:
        if peer.url is not None and not peer.url.startswith("http://"):
            raise ValueError(f"peer {peer.name!r}: {peer.url}: only http:// URLs are supported")
    return peers


def _pairs(flag: str, values: Sequence[str]) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        name = name.strip()
        if not sep or not name or not rest.strip():
            raise ValueError(f"{flag} {value!r}: expected NAME=VALUE")
        if name in RESERVED_NAMES:
            raise ValueError(f"{flag} {value!r}: {name!r} names a system the bench measures itself")
        if name in pairs:
            raise ValueError(f"{flag}: {name!r} given twice")
        pairs[name] = rest.strip()
    return pairs


def peer_ready(url: str, *, api_key: str | None = None, timeout: float = 5.0) -> str | None:
    """None when `GET url/v1/models` answers 200 and `GET url/health` anything but 503 (a server
    without the route answers 404: ready), else why not (one line)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.get(f"{url.rstrip('/')}{READY_PATH}", headers=headers, timeout=timeout)
        if response.status_code != 200:
            return f"HTTP {response.status_code} from {READY_PATH}"
        response = httpx.get(f"{url.rstrip('/')}{HEALTH_PATH}", headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    return f"HTTP 503 from {HEALTH_PATH}" if response.status_code == 503 else None


class PeerProcess:
    """`with PeerProcess(peer) as url:` starts the peer's command, returns its URL once it answers
    `GET /v1/models`, and stops it on exit. RuntimeError, with the end of its output, when the
    command exits first or is not ready in `ready_timeout` seconds."""

    def __init__(self, peer: Peer, *, ready_timeout: float = 300.0, api_key: str | None = None) -> None:
        if peer.command is None:
            raise ValueError(f"peer {peer.name!r} has no command to start")
        self.peer = peer
        self.ready_timeout = ready_timeout
        self.api_key = api_key
        self._tmp = tempfile.TemporaryDirectory(prefix=f"appliance-bench-{peer.name}-")
        self.log_path = Path(self._tmp.name) / "output.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.command = peer.command
        self.url = peer.url
        if "{port}" in peer.command:
            port = free_port()
            self.command = peer.command.replace("{port}", str(port))
            self.url = self.url or f"http://127.0.0.1:{port}"

    def __enter__(self) -> str:
        assert self.url is not None  # parse_peers guarantees a URL or a {port}
        with self.log_path.open("wb") as log:
            # A shell, so `VAR=value prog ...` works; a session of its own, so stopping it stops
            # whatever the shell started too.
            self.process = subprocess.Popen(
                ["/bin/sh", "-c", self.command],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            self._tmp.cleanup()
            raise
        return self.url

    def _wait_ready(self) -> None:
        assert self.process is not None and self.url is not None
        deadline = time.monotonic() + self.ready_timeout
        why = "not polled yet"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"peer {self.peer.name!r}: `{self.command}` exited with code {self.process.returncode} "
                    f"before it answered {READY_PATH}:\n{self.log_tail()}"
                )
            why = peer_ready(self.url, api_key=self.api_key, timeout=2.0) or ""
            if not why:
                return
            time.sleep(0.2)
        raise RuntimeError(
            f"peer {self.peer.name!r}: {self.url}{READY_PATH} did not answer 200 within "
            f"{self.ready_timeout:g} s (last: {why}):\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 20) -> str:
        """The last `lines` the command wrote."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, grace: float = 30.0) -> int | None:
        """SIGTERM to the command's process group, SIGKILL after `grace` seconds; its exit code."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            _signal_group(process, signal.SIGTERM)
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                _signal_group(process, signal.SIGKILL)
                process.wait(5)
        # The shell may be gone while something it started lingers in the group.
        _signal_group(process, signal.SIGKILL)
        return process.returncode

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()
        self._tmp.cleanup()


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
