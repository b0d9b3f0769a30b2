"""The offline install rehearsed: a bundle (scripts/bundle.sh --demo, built beforehand on a
connected machine and named by OFFLINE_BUNDLE) installed by `install.sh --from` inside a network
namespace with no route, then served, and demo-smol answers. Skipped without OFFLINE_BUNDLE or
where `unshare -n` is not allowed: building the bundle needs the package registry. The same with
the export tools (scripts/bundle.sh --export, named by OFFLINE_EXPORT_BUNDLE): `appliance export`
of a local model folder on the box."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
set -euo pipefail
ip link set lo up
if python3 -c "import socket; socket.create_connection(('pypi.org', 443), timeout=3)" 2>/dev/null; then
  echo "the namespace has a route" >&2; exit 99
fi
DESTDIR="$ROOT" "$INSTALL" --from "$BUNDLE" --demo --no-start
mkdir -p "$ROOT/graphs"
for g in "$ROOT"/etc/appliance/graphs/*.toml; do
  sed "s#\"/var/lib/appliance/#\"$ROOT/var/lib/appliance/#" "$g" > "$ROOT/graphs/$(basename "$g")"
done
"$ROOT/opt/appliance/.venv/bin/appliance" serve "$ROOT/graphs" --config /dev/null --port 8799 > "$ROOT/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 240); do curl -sf localhost:8799/health >/dev/null && break; sleep 0.5; done
curl -sf localhost:8799/v1/chat/completions -H 'content-type: application/json' -d '{"model": "demo-smol",
  "messages": [{"role": "user", "content": "What is the capital of France?"}], "temperature": 0, "max_tokens": 32}'
kill -TERM "$pid"
wait "$pid"
"""


def test_install_from_a_bundle_with_no_network_then_serve(tmp_path: Path) -> None:
    bundle = os.environ.get("OFFLINE_BUNDLE")
    if not bundle:
        pytest.skip("OFFLINE_BUNDLE names no bundle (build one with scripts/bundle.sh OUT --demo)")
    if not shutil.which("unshare") or subprocess.run(["unshare", "-n", "true"]).returncode != 0:
        pytest.skip("no network namespaces here (unshare -n)")
    env = {
        name: value for name, value in os.environ.items() if not name.startswith(("APPLIANCE_", "PIP_", "VIRTUAL_ENV"))
    }
    result = subprocess.run(
        ["unshare", "-n", "bash", "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=900,
        env={
            **env,
            "ROOT": str(tmp_path / "root"),
            "BUNDLE": str(Path(bundle).resolve()),
            "INSTALL": str(REPO / "systemd" / "install.sh"),
        },
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert '"content":"The capital of France is Paris."' in result.stdout


EXPORT_SCRIPT = r"""
set -euo pipefail
ip link set lo up
if python3 -c "import socket; socket.create_connection(('pypi.org', 443), timeout=3)" 2>/dev/null; then
  echo "the namespace has a route" >&2; exit 99
fi
export PIP_CONFIG_FILE=/dev/null  # nor this machine's find-links or file:// indexes
DESTDIR="$ROOT" "$INSTALL" --from "$BUNDLE" --export --no-start
bin="$ROOT/opt/appliance/.venv/bin"
"$bin/python" -c 'import torch; assert torch.version.cuda is None, torch.__version__; print("torch", torch.__version__)'
"$bin/appliance" export "$HF" --name tiny-offline --models-dir "$ROOT/models" --graphs-dir "$ROOT/graphs"
"$bin/appliance" serve "$ROOT/graphs" --config /dev/null --port 8798 > "$ROOT/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 240); do curl -sf localhost:8798/health >/dev/null && break; sleep 0.5; done
curl -sf localhost:8798/v1/chat/completions -H 'content-type: application/json' -d '{"model": "tiny-offline",
  "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}'
kill -TERM "$pid"
wait "$pid"
"""


def test_install_the_export_tools_from_a_bundle_with_no_network_then_export(tmp_path: Path) -> None:
    """OFFLINE_EXPORT_BUNDLE (scripts/bundle.sh OUT --export) installed with `install.sh --export`
    offline; `appliance export` of a local Hugging Face folder then works there, and the model answers."""
    bundle = os.environ.get("OFFLINE_EXPORT_BUNDLE")
    if not bundle:
        pytest.skip("OFFLINE_EXPORT_BUNDLE names no bundle (build one with scripts/bundle.sh OUT --export)")
    if not shutil.which("unshare") or subprocess.run(["unshare", "-n", "true"]).returncode != 0:
        pytest.skip("no network namespaces here (unshare -n)")
    from appliance.tools.demo.export import make_causal_lm, train_tokenizer
    from appliance.tools.demo.recipes import RECIPES
    from appliance.tools.demo.tokenizer_specs import CHAT_TOKENIZER

    hf = tmp_path / "hf-tiny-chat"  # a tiny random chat model, saved as the Hub serves one
    tokenizer = train_tokenizer(CHAT_TOKENIZER)
    make_causal_lm(RECIPES["demo-chat"].model, tokenizer).save_pretrained(hf)
    tokenizer.save_pretrained(hf)
    env = {
        name: value for name, value in os.environ.items() if not name.startswith(("APPLIANCE_", "PIP_", "VIRTUAL_ENV"))
    }
    result = subprocess.run(
        ["unshare", "-n", "bash", "-c", EXPORT_SCRIPT],
        capture_output=True,
        text=True,
        timeout=1200,
        env={
            **env,
            "ROOT": str(tmp_path / "root"),
            "BUNDLE": str(Path(bundle).resolve()),
            "INSTALL": str(REPO / "systemd" / "install.sh"),
            "HF": str(hf),
        },
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "torch 2.13.0+cpu" in result.stdout and "[3/3] writing" in result.stdout
    assert '"model":"tiny-offline"' in result.stdout and '"object":"chat.completion"' in result.stdout
