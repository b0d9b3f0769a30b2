"""The systemd unit passes `systemd-analyze verify` silently and scores OK on security."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "systemd" / "appliance.service"


def _unit_with_real_binary(tmp_path: Path) -> Path:
    # verify checks that ExecStart exists: point it at this checkout's console script.
    binary = Path(sys.executable).parent / "appliance"
    assert binary.exists(), binary
    unit = tmp_path / "appliance.service"
    unit.write_text(UNIT.read_text().replace("/opt/appliance/.venv/bin/appliance", str(binary)))
    return unit


def test_verify_prints_nothing(tmp_path: Path) -> None:
    assert shutil.which("systemd-analyze"), "systemd-analyze is needed (Debian package systemd)"
    result = subprocess.run(
        ["systemd-analyze", "verify", str(_unit_with_real_binary(tmp_path))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # verify exits 0 on unknown keys (warnings only): any output at all is a failure.
    assert result.returncode == 0 and result.stdout == "" and result.stderr == "", result.stdout + result.stderr


def test_security_exposure_is_ok(tmp_path: Path) -> None:
    result = subprocess.run(
        ["systemd-analyze", "security", "--offline=yes", str(_unit_with_real_binary(tmp_path))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", result.stdout + result.stderr)
    assert match, result.stdout + result.stderr
    assert float(match.group(1)) <= 2.0


def test_install_script_stages_a_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    result = subprocess.run(
        ["bash", str(REPO / "systemd" / "install.sh"), "--no-start"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DESTDIR": str(root), "SKIP_SETUP": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (root / "etc/systemd/system/appliance.service").read_text() == UNIT.read_text()
    assert (root / "opt/appliance/appliance/cli.py").is_file()
    assert (root / "etc/appliance/graphs").is_dir() and (root / "var/lib/appliance/models").is_dir()
    settings = root / "etc/appliance/appliance.toml"
    assert settings.read_text() == (REPO / "systemd/appliance.toml").read_text()
    assert not (root / "etc/systemd/system/appliance.service.d").exists()


def test_example_settings_file_is_valid() -> None:
    from appliance.settings import load_settings

    settings = load_settings({}, config=REPO / "systemd" / "appliance.toml", environ={})
    assert settings.graphs == "/etc/appliance/graphs" and settings.host == "0.0.0.0"
    assert "--config /etc/appliance/appliance.toml" in UNIT.read_text()


def test_install_script_wires_api_keys_as_a_credential(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc/appliance").mkdir(parents=True)
    (root / "etc/appliance/api-keys").write_text("secret\n")
    (root / "etc/appliance/admin-keys").write_text("operator\n")
    result = subprocess.run(
        ["bash", str(REPO / "systemd" / "install.sh"), "--no-start"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DESTDIR": str(root), "SKIP_SETUP": "1"},
    )
    assert result.returncode == 0, result.stderr
    dropin = (root / "etc/systemd/system/appliance.service.d/api-keys.conf").read_text()
    assert dropin == "[Service]\nLoadCredential=api-keys:/etc/appliance/api-keys\n"
    admin = (root / "etc/systemd/system/appliance.service.d/admin-keys.conf").read_text()
    assert admin == "[Service]\nLoadCredential=admin-keys:/etc/appliance/admin-keys\n"


def test_open_file_limit_leaves_room_for_every_connection() -> None:
    from appliance.settings import Settings

    limit = re.search(r"^LimitNOFILE=(\d+)$", UNIT.read_text(), re.MULTILINE)
    assert limit, "the unit sets LimitNOFILE (systemd's default soft limit is 1024)"
    assert int(limit.group(1)) >= Settings().max_connections + 256


def test_the_filter_lets_the_server_set_its_cpus() -> None:
    # server_cpus calls sched_setaffinity, which ~@resources denies (SIGSYS, not EPERM): it must
    # come back in an allow line after the deny list, which systemd applies in order.
    filters = re.findall(r"^SystemCallFilter=(.*)$", UNIT.read_text(), re.MULTILINE)
    denied = next(index for index, line in enumerate(filters) if line.startswith("~") and "@resources" in line)
    assert any(not line.startswith("~") and "sched_setaffinity" in line.split() for line in filters[denied + 1 :]), (
        filters
    )
