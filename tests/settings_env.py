"""A test's settings environment cleaned of the machine's: for tests that run `appliance`'s
commands, which read `APPLIANCE_*` variables and /etc/appliance/appliance.toml."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No APPLIANCE_* variables, the working directory `tmp_path`, and an empty settings file to
    pass as --config (not /etc/appliance/appliance.toml, whatever this machine has there)."""
    for name in list(os.environ):
        if name.startswith("APPLIANCE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "none.toml"
    config.write_text("")
    return config
