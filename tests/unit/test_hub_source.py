"""`appliance export SOURCE` on a box with no route to the hub: one clear error, no traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from appliance.tools.export.hub_source import SourceError, hub_environment


@pytest.fixture
def closed_endpoint(monkeypatch: pytest.MonkeyPatch) -> str:
    """HF_ENDPOINT at a local port nothing listens on (an offline box, without touching the network)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    return f"127.0.0.1:{port}"


def test_a_local_folder_needs_nothing(tmp_path: Path) -> None:
    assert hub_environment(str(tmp_path)) == {}
    with pytest.raises(SourceError, match="no such folder"):
        hub_environment(str(tmp_path / "typo"))
    with pytest.raises(SourceError, match="no such folder"):
        hub_environment("./models/typo")


def test_a_hub_id_offline_says_how_to_export_from_a_folder(closed_endpoint: str) -> None:
    with pytest.raises(SourceError) as refused:
        hub_environment("nobody/tiny-model")
    message = str(refused.value)
    assert message.startswith(f"nobody/tiny-model: this machine is offline (cannot connect to {closed_endpoint}")
    assert "hf download nobody/tiny-model --local-dir tiny-model" in message
    assert "appliance export ./tiny-model --name tiny-model" in message


def test_hf_hub_offline_counts_as_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SourceError, match=r"offline \(HF_HUB_OFFLINE is set\)"):
        hub_environment("nobody/tiny-model")


def test_a_cached_hub_model_exports_offline(closed_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("appliance.tools.export.hub_source._cached", lambda source: source == "org/cached")
    assert hub_environment("org/cached") == {"HF_HUB_OFFLINE": "1"}


def test_the_command_exits_1_with_one_message(closed_endpoint: str, tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "appliance", "export", "nobody/tiny-model", "--name", "tiny",
         "--models-dir", str(tmp_path / "models"), "--graphs-dir", str(tmp_path / "graphs")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr.startswith("appliance export: nobody/tiny-model: this machine is offline")
    assert "Traceback" not in run.stderr and run.stderr.count("\n") == 1
    assert not (tmp_path / "models").exists()
