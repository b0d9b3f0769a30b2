"""scripts/bundle.sh and systemd/install.sh --from: their refusals, each one line and exit 2."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INSTALL = REPO / "systemd" / "install.sh"


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", *argv], capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}
    )


def test_install_from_something_that_is_not_a_bundle(tmp_path: Path) -> None:
    staged = {"DESTDIR": str(tmp_path / "root"), "SKIP_SETUP": "1"}
    result = run(str(INSTALL), "--from", str(tmp_path), "--no-start", env=staged)
    assert result.returncode == 2 and "is not a bundle (no wheels/)" in result.stderr
    result = run(str(INSTALL), "--from", env=staged)
    assert result.returncode == 2 and "--from needs a bundle directory" in result.stderr


def test_install_from_a_bundle_for_another_python(tmp_path: Path) -> None:
    (tmp_path / "wheels").mkdir()
    (tmp_path / "bundle.txt").write_text("python 3.99\n")
    result = run(str(INSTALL), "--from", str(tmp_path), "--no-start", env={"DESTDIR": str(tmp_path / "root")})
    assert result.returncode == 2 and "wheels are for Python 3.99" in result.stderr


def test_demo_without_an_environment_says_why_instead_of_exit_127(tmp_path: Path) -> None:
    result = run(str(INSTALL), "--demo", "--no-start", env={"DESTDIR": str(tmp_path / "root"), "SKIP_SETUP": "1"})
    assert result.returncode == 2 and "--demo needs" in result.stderr


def test_bundle_usage() -> None:
    assert run(str(REPO / "scripts" / "bundle.sh")).returncode == 2
    assert run(str(REPO / "scripts" / "bundle.sh"), "out", "--torch").returncode == 2


def test_demo_installs_every_graph_it_built_with_absolute_model_paths(tmp_path: Path) -> None:
    root = tmp_path / "root"
    fake = root / "opt/appliance/.venv/bin/appliance"
    fake.parent.mkdir(parents=True)
    # Stands in for `appliance demo STATE`: two graphs, model paths relative to the graph directory.
    fake.write_text(
        '#!/bin/sh\nmkdir -p "$2/graphs"\n'
        'for n in demo-chat demo-smol; do printf \'name = "%s"\\nmodel_path = "../models/%s"\\n\' $n $n > "$2/graphs/$n.toml"; done\n'
    )
    fake.chmod(0o755)
    result = run(str(INSTALL), "--demo", "--no-start", env={"DESTDIR": str(root), "SKIP_SETUP": "1"})
    assert result.returncode == 0, result.stderr
    for name in ("demo-chat", "demo-smol"):
        text = (root / f"etc/appliance/graphs/{name}.toml").read_text()
        assert f'model_path = "/var/lib/appliance/models/{name}"' in text
