"""`appliance bench` end to end: on a stateful graph (served over HTTP, then the raw baseline on the
same stateful pipeline, one generate() at a time, closed loop of clients), and in an open loop with
peers (a second appliance by URL, the fake OpenAI-compatible server by command)."""

from __future__ import annotations

import json
import math
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from appliance.tools.bench.workload import Prompt
from tests.conftest import RunningServer

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
            "--repeat", "2", "--json", str(report_path),
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "stateful LLMPipeline" in result.stdout
    report = json.loads(report_path.read_text())
    assert report["environment"]["pipeline"] == "LM"
    assert report["environment"]["machine"]["cores"] >= 1 and "machine: " in result.stdout
    assert "round 2 of 2" in result.stderr and "rounds (systems interleaved each round)" in result.stdout
    for level in report["levels"]:
        for run in ("appliance", "raw"):
            assert (level["systems"][run]["completed"], level["systems"][run]["failed"]) == (3, 0), level
            assert len(level["rounds"][run]["output_throughput"]) == 2
        assert level["over_raw"]["appliance"]["output_throughput"] > 0
        assert len(level["rounds"]["appliance"]["over_raw"]) == 2


def test_bench_open_loop_with_peers(demo_root: Path, server: RunningServer, tmp_path: Path) -> None:
    fake = Path(__file__).resolve().parent.parent / "fake_openai_server.py"
    report_path, plot_path = tmp_path / "bench.json", tmp_path / "bench.png"
    result = subprocess.run(
        [
            sys.executable, "-m", "appliance", "bench", "--graph", str(demo_root / "graphs" / "demo-chat.toml"),
            "--rate", "20,40", "--requests", "6", "--prompt-tokens", "16", "--output-tokens", "8",
            "--peer", f"second={server.url}",
            "--peer-command", f"fake={shlex.quote(sys.executable)} {shlex.quote(str(fake))} {{port}}",
            "--peer-model", "fake=fake-model", "--peer-timeout", "60",
            "--json", str(report_path), "--plot", str(plot_path),
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "fake: stopped" in result.stderr
    for row in ("appliance/raw", "second/raw", "fake/raw", "good/s"):
        assert row in result.stdout
    report = json.loads(report_path.read_text())
    assert list(report["systems"]) == ["appliance", "second", "fake", "raw"]
    assert report["systems"]["fake"]["model"] == "fake-model"
    assert report["systems"]["second"]["how"] == "external"
    assert report["workload"]["mode"] == "open loop (Poisson arrivals)"
    assert [level["rate"] for level in report["levels"]] == [20.0, 40.0]
    for level in report["levels"]:
        assert list(level["systems"]) == ["appliance", "second", "fake", "raw"]
        for name, run in level["systems"].items():
            assert (run["completed"], run["failed"], run["output_token_mismatches"]) == (6, 0, 0), (name, run)
            assert 0 < run["ttft_ms"]["median"] <= run["e2el_ms"]["median"], (name, run)
            assert 0 < run["output_throughput"] and 0 <= run["goodput"] <= run["request_throughput"]
            assert run["concurrency"] is None
        assert level["systems"]["appliance"]["event_loop_lag_ms"] is not None
        assert level["systems"]["fake"]["event_loop_lag_ms"] is None
        for name in ("appliance", "second", "fake"):
            assert math.isfinite(level["over_raw"][name]["output_throughput"])
    assert plot_path.read_bytes()[:4] == b"\x89PNG"


def test_bench_multi_turn_with_prefix_caching_on_and_off(smol_root: Path, tmp_path: Path) -> None:
    report_path = tmp_path / "bench.json"
    result = subprocess.run(
        [
            sys.executable, "-m", "appliance", "bench", "--graph", str(smol_root / "graphs" / "demo-smol.toml"),
            "--multi-turn", "3", "--concurrency", "1", "--requests", "2", "--prompt-tokens", "32",
            "--output-tokens", "16", "--json", str(report_path),
        ],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "prefix-cache/no-prefix-cache: last turn TTFT" in result.stdout
    assert "no raw baseline" in result.stdout
    report = json.loads(report_path.read_text())
    assert list(report["systems"]) == ["prefix-cache", "no-prefix-cache"]
    assert "enable_prefix_caching = false" in report["systems"]["no-prefix-cache"]["how"]
    assert report["workload"]["turns"] == 3
    (level,) = report["levels"]
    for name, run in level["systems"].items():
        assert (run["completed"], run["failed"]) == (6, 0), (name, run)
        turns = run["turns"]
        assert [(turn["turn"], turn["completed"], turn["failed"]) for turn in turns] == [
            (1, 2, 0),
            (2, 2, 0),
            (3, 2, 0),
        ]
        # Each turn carries the one before it, its answer (16 tokens, re-tokenized) and a new 32-word message.
        prompts = [turn["prompt_tokens"] for turn in turns]
        assert prompts[0] >= 32 and all(later >= earlier + 32 for earlier, later in zip(prompts, prompts[1:])), prompts
        assert all(turn["ttft_ms"]["median"] > 0 for turn in turns)
    assert set(level["prefix_cache_over_none"]) == {"last_turn_ttft_mean", "last_turn_ttft_median"}


@pytest.mark.parametrize("interleave", [(), ("--interleave",)], ids=["in-turns", "interleaved"])
def test_bench_command_on_an_embedding_graph(retrieval_root: Path, tmp_path: Path, interleave: tuple[str, ...]) -> None:
    graph = tmp_path / "demo-embed.toml"
    source = (retrieval_root / "graphs" / "demo-embed.toml").read_text()
    graph.write_text(source.replace('model_path = "../models/', f'model_path = "{retrieval_root.resolve()}/models/'))
    result = subprocess.run(
        [
            sys.executable, "-m", "appliance", "bench", "--graph", str(graph),
            "--concurrency", "1,4", "--requests", "8", "--prompt-tokens", "16", "--repeat", "2", *interleave,
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    progress = [line.split(":")[0] for line in result.stderr.splitlines() if " inputs/s" in line]
    if interleave:  # one pipeline kept loaded; each level on both, the order flipped in round 2
        assert result.stderr.count("raw: loading") == 1
        assert progress == [
            *["served c=1", "raw c=1", "served c=4", "raw c=4"],
            *["raw c=1", "served c=1", "raw c=4", "served c=4"],
        ]
    else:  # each round: the server's levels, then a pipeline loaded for the raw ones
        assert result.stderr.count("raw: loading") == 2
        assert progress == ["served c=1", "served c=4", "raw c=1", "raw c=4"] * 2
    tables = result.stdout.split("| concurrency |")[1:]
    assert len(tables) == 3 and "round 2 of 2" in result.stderr  # a table per round, then the rounds
    rows = [line.split("|")[1:-1] for line in tables[0].splitlines()[2:] if line.startswith("| ")]
    assert len(rows) == 2
    for row in rows:
        concurrency, requests, served, tokens, per_call, client, raw, ratio = (
            cell.strip().replace(",", "") for cell in row
        )
        assert int(requests) == 8 and float(served) > 0 and float(raw) > 0 and float(ratio) > 0, row
        assert 0 <= float(client.rstrip("%")) < 200, row  # the bench's clients' CPU, in % of a core
        assert 1 <= float(per_call) <= int(concurrency), row  # texts per pipeline call: the server's batching
    rounds = [line.split("|")[1:-1] for line in tables[2].splitlines()[2:] if line.startswith("| ")]
    assert [row[0].strip() for row in rounds] == ["1", "4"]
    for _, ratios, median, spread in rounds:
        values = [float(value) for value in ratios.split(",")]
        assert len(values) == 2 and min(values) <= float(median) <= max(values)
        assert float(spread) == pytest.approx(max(values) - min(values), abs=0.011)


def test_bench_interleaved_with_a_peer(demo_root: Path, tmp_path: Path) -> None:
    """--interleave: the appliance, the fake peer and the raw pipeline all up at once, taking turns
    within each level; every round of every system is there, with its ratio to raw."""
    fake = Path(__file__).resolve().parent.parent / "fake_openai_server.py"
    report_path = tmp_path / "bench.json"
    result = subprocess.run(
        [
            sys.executable, "-m", "appliance", "bench", "--graph", str(demo_root / "graphs" / "demo-chat.toml"),
            "--concurrency", "1,2", "--requests", "2", "--prompt-tokens", "16", "--output-tokens", "8",
            "--repeat", "2", "--interleave",
            "--peer-command", f"fake={shlex.quote(sys.executable)} {shlex.quote(str(fake))} {{port}}",
            "--peer-model", "fake=fake-model", "--peer-timeout", "60", "--json", str(report_path),
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    # Levels in turn, systems within them: c=2 starts only after every round of c=1.
    progress = [line for line in result.stderr.splitlines() if ": c=" in line and "requests in" in line]
    assert [line.split(":")[0] for line in progress[:6]] == ["appliance", "fake", "raw", "raw", "fake", "appliance"]
    assert all(": c=1:" in line for line in progress[:6]) and all(": c=2:" in line for line in progress[6:])
    assert "--interleave: every system was up" in result.stdout
    report = json.loads(report_path.read_text())
    assert list(report["systems"]) == ["appliance", "fake", "raw"]
    for level in report["levels"]:
        for name in ("appliance", "fake", "raw"):
            assert len(level["rounds"][name]["output_throughput"]) == 2, (name, level)
        for name in ("appliance", "fake"):
            assert len(level["rounds"][name]["over_raw"]) == 2 and level["rounds"][name]["over_raw_median"] > 0
        assert level["systems"]["appliance"]["completed"] == 2


def test_bench_command_on_a_speech_graph(whisper_root: Path, tmp_path: Path) -> None:
    """demo-whisper served against its raw WhisperPipeline (and faster-whisper int8 on the same
    tiny.en weights, where it is installed): every system heard the sentence, every level has each
    system's figures, and the words of each answer add up to what the recording says."""
    from importlib.util import find_spec

    from tests.e2e.test_whisper_model import MAX_WORD_ERROR_RATE, SAID

    graph = tmp_path / "demo-whisper.toml"
    source = (whisper_root / "graphs" / "demo-whisper.toml").read_text()
    graph.write_text(source.replace('"../models/', f'"{whisper_root.resolve()}/models/'))
    report_path = tmp_path / "speech.json"
    result = subprocess.run(
        [
            sys.executable, "-m", "appliance", "bench", "--graph", str(graph),
            "--concurrency", "1,2", "--audio-seconds", "5", "--requests", "2",
            "--faster-whisper", "int8", "--json", str(report_path),
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    peer = find_spec("faster_whisper") is not None
    systems = ["served", "raw", *(["faster-whisper int8"] if peer else [])]
    report = json.loads(report_path.read_text())
    assert report["systems"] == systems and report["machine"]["cpu_model"] in result.stdout
    if not peer:
        assert "faster-whisper is not installed" in report["skipped"]["faster-whisper"]
    # The 2.1 s sentence twice with a 0.5 s gap: 5 s asked, 4.8 s sent.
    assert report["recording"]["repeats"] == 2 and report["recording"]["seconds"] == pytest.approx(4.796, abs=0.01)
    for name in systems:
        heard = report["heard"][name]
        assert heard["word_error_rate"] <= MAX_WORD_ERROR_RATE, (name, heard)
        assert f"| {name} | " in result.stdout
    assert SAID in result.stdout
    assert [level["concurrency"] for level in report["levels"]] == [1, 2]
    for level in report["levels"]:
        assert list(level["systems"]) == systems
        for name, entry in level["systems"].items():
            (figures,) = entry["rounds"]
            assert figures["requests"] == 2 and figures["audio_seconds_per_second"] > 0, (name, figures)
            assert 0 < figures["latency_p50_s"] <= figures["latency_p95_s"], (name, figures)
            # Each answer is the sentence twice over (12 words; a slip of a word or two allowed).
            assert 2 * 10 <= figures["words"] <= 2 * 14, (name, figures)
            if name != "served":
                assert entry["served_over_this_median"] > 0
    rows = [line for line in result.stdout.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
    assert len(rows) == 2 * len(systems)
