"""`appliance bench` end to end on a stateful graph: served over HTTP, then the raw baseline on the
same stateful pipeline (one generate() at a time, closed loop of clients)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from appliance.tools.bench.workload import Prompt

STATEFUL_GRAPH = """
name = "bench-stateful"
model_path = "{models}/demo-chat"
pipeline = "LM"

[plugin_config]
INFERENCE_PRECISION_HINT = "f32"
MAX_PROMPT_LEN = 64
"""


def _graph(demo_root: Path, tmp_path: Path) -> Path:
    path = tmp_path / "bench-stateful.toml"
    path.write_text(STATEFUL_GRAPH.format(models=(demo_root / "models").resolve()))
    return path


def test_raw_stateful_baseline_queues_requests(demo_root: Path, tmp_path: Path) -> None:
    from appliance.graphfiles import load_graph
    from appliance.tools.bench.raw import RawStatefulPipeline, Tokenizer

    graph = load_graph(_graph(demo_root, tmp_path))
    tokenizer = Tokenizer(graph.model_dir)
    prompts = [
        Prompt(text=text, ids=tuple(tokenizer.encode(text))) for text in ("the license", "a license", "licenses")
    ]
    results, duration = RawStatefulPipeline(graph).run_level(prompts, concurrency=2, output_tokens=8)
    assert [(r.ok, r.output_tokens, len(r.chunk_times)) for r in results] == [(True, 8, 8)] * 3
    # Two clients sent at once: the second waits for the first, so it takes longer in all.
    assert results[1].latency > results[0].latency
    assert 0 < duration


def test_bench_command_on_a_stateful_graph(demo_root: Path, tmp_path: Path) -> None:
    report_path = tmp_path / "bench.json"
    result = subprocess.run(
        [
            sys.executable, "-m", "appliance", "bench", "--graph", str(_graph(demo_root, tmp_path)),
            "--concurrency", "1,2", "--requests", "3", "--prompt-tokens", "32", "--output-tokens", "16",
            "--json", str(report_path),
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "stateful LLMPipeline" in result.stdout
    report = json.loads(report_path.read_text())
    assert report["environment"]["pipeline"] == "LM"
    for level in report["levels"]:
        for run in ("served", "raw"):
            assert (level[run]["completed"], level[run]["failed"]) == (3, 0), level[run]
        assert level["served_over_raw"]["output_throughput"] > 0
