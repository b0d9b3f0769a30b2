"""`appliance tune` end to end (issue 42): demo-chat tuned on this CPU within its time budget, each
form measured on the real pipeline, and the graph it writes is one `appliance check` accepts (and
`serve` would serve), marked with this CPU."""

from __future__ import annotations

import subprocess
import sys
import time
import tomllib
from pathlib import Path

from appliance.cpu_features import isa, tuned_isa
from tests.conftest import copy_demo_graphs

BUDGET_S = 15


def test_tune_demo_chat_within_its_budget(demo_root: Path, tmp_path: Path) -> None:
    graphs = copy_demo_graphs(demo_root, tmp_path / "graphs", ["demo-chat"])
    graph = graphs / "demo-chat.toml"
    before = tomllib.loads(graph.read_text())
    started = time.monotonic()
    tune = subprocess.run(
        [
            sys.executable,
            "-m",
            "appliance",
            "tune",
            str(graph),
            "--budget",
            str(BUDGET_S),
            "--output-tokens",
            "16",
            "--prompt-tokens",
            "32",
            "--level-seconds",
            "0.3",
            "--weights",
            "int8_sym",
            "--weights-dir",
            str(tmp_path / "weights"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    spent = time.monotonic() - started
    print(tune.stdout[-3000:], tune.stderr[-2000:], f"tune took {spent:.0f} s", sep="\n")
    assert tune.returncode == 0, tune.stderr
    assert "machine: " in tune.stdout and "[1/" in tune.stdout and f"{graph}: written" in tune.stdout
    assert "the graph as it is: " in tune.stdout and " tok/s one stream" in tune.stdout
    # The weight format is the first lever: demo-chat's IR written again as int8, its perplexity beside.
    assert "weights=int8_sym: " in tune.stdout and ", perplexity " in tune.stdout
    text = graph.read_text()
    assert tuned_isa(text) == isa() and "# appliance tune " in text
    after = tomllib.loads(text)
    assert {key: value for key, value in after.items() if key not in ("plugin_config", "model_path")} == {
        key: value for key, value in before.items() if key not in ("plugin_config", "model_path")
    }
    candidate = tmp_path / "weights" / f"{Path(before['model_path']).name}-int8_sym"
    if after["model_path"] != before["model_path"]:  # int8 won: the graph serves its folder, kept
        assert (graph.parent / after["model_path"]).resolve() == candidate.resolve()
        assert (candidate / "openvino_model.xml").is_file() and "# was: model_path" in text
    else:  # it lost: its folder is gone
        assert not candidate.exists()
    check = subprocess.run(
        [sys.executable, "-m", "appliance", "check", "--graphs", str(graphs)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0, check.stderr
    assert "ok     demo-chat" in check.stdout and "tuned on" not in check.stderr
