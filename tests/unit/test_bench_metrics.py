"""`appliance bench` metric math, prompts and report, on synthetic timings (no model, no server)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from appliance.tools.bench.metrics import RequestResult, distribution, percentile, summarize
from appliance.tools.bench.report import Level, Report, ratio
from appliance.tools.bench.workload import build_prompts, prompt_words


def test_percentile_interpolates_like_numpy() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile(values, 50) == 2.5
    # numpy.percentile([1, 2, 3, 4], 99) == 3.97
    assert percentile(values, 99) == pytest.approx(3.97)
    assert percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_ttft_tpot_itl_of_one_request() -> None:
    # Chunks at 100 ms, then every 10 ms; 5 tokens; the response ended 5 ms after the last chunk.
    result = RequestResult(ok=True, output_tokens=5, chunk_times=[0.100, 0.110, 0.120, 0.130, 0.140], latency=0.145)
    assert result.ttft == pytest.approx(0.100)
    assert result.tpot == pytest.approx((0.145 - 0.100) / 4)
    assert result.itl == pytest.approx([0.010] * 4)


def test_tpot_undefined_for_a_single_token_and_itl_counts_chunks_not_tokens() -> None:
    assert RequestResult(ok=True, output_tokens=1, chunk_times=[0.05], latency=0.05).tpot is None
    # Two chunks carrying 4 tokens: one gap (vLLM counts a multi-token chunk as one ITL sample).
    merged = RequestResult(ok=True, output_tokens=4, chunk_times=[0.05, 0.08], latency=0.08)
    assert merged.itl == pytest.approx([0.03])
    assert merged.tpot == pytest.approx(0.01)


def test_summarize_throughputs_and_failures() -> None:
    good = [
        RequestResult(ok=True, prompt_tokens=8, output_tokens=3, chunk_times=[0.1, 0.2, 0.3], latency=0.3),
        RequestResult(ok=True, prompt_tokens=8, output_tokens=3, chunk_times=[0.2, 0.3, 0.5], latency=0.5),
    ]
    bad = RequestResult(ok=False, error="HTTP 503: busy")
    metrics = summarize([*good, bad, bad], concurrency=2, duration_s=2.0, prompt_tokens=8)
    assert (metrics.requests, metrics.completed, metrics.failed) == (4, 2, 2)
    assert metrics.errors == ("HTTP 503: busy",)
    assert metrics.request_throughput == pytest.approx(1.0)
    assert metrics.output_throughput == pytest.approx(3.0)
    assert metrics.total_token_throughput == pytest.approx(11.0)
    assert metrics.ttft_ms.mean == pytest.approx(150.0)
    assert metrics.ttft_ms.median == pytest.approx(150.0)
    # TPOT per request: (0.3-0.1)/2 = 100 ms and (0.5-0.2)/2 = 150 ms.
    assert metrics.tpot_ms.mean == pytest.approx(125.0)
    # ITL pooled over requests: 100, 100, 100, 200 ms.
    assert metrics.itl_ms.median == pytest.approx(100.0)
    assert metrics.itl_ms.mean == pytest.approx(125.0)
    assert metrics.e2el_ms.p99 == pytest.approx(498.0)
    assert metrics.prompt_token_mismatches == 0


def test_prompt_length_mismatch_is_counted_not_failed() -> None:
    result = RequestResult(ok=True, prompt_tokens=9, output_tokens=2, chunk_times=[0.1, 0.2], latency=0.2)
    metrics = summarize([result], concurrency=1, duration_s=1.0, prompt_tokens=8)
    assert (metrics.completed, metrics.prompt_token_mismatches) == (1, 1)


def test_empty_distribution_is_nan_and_json_null() -> None:
    empty = distribution([])
    assert math.isnan(empty.median)
    assert empty.as_dict() == {"mean": None, "median": None, "p99": None}
    metrics = summarize([RequestResult(ok=False, error="x")], concurrency=1, duration_s=1.0, prompt_tokens=8)
    assert metrics.ttft_ms.as_dict()["p99"] is None
    assert ratio(math.nan, 1.0) is None
    assert ratio(2.0, 4.0) == 0.5


# -- prompts: a whitespace tokenizer stands in for a byte-level BPE -----------------------------

VOCAB = {" alpha": 10, " beta": 11, "gamma": 12, " x": 13, " delta": 14, "?!": 15} | {
    f" w{chr(97 + i)}{chr(97 + j)}": 100 + 26 * i + j for i in range(2) for j in range(26)
}


def encode(text: str) -> list[int]:
    return [VOCAB[" " + word] for word in text.split(" ") if word]


def test_prompt_words_keep_single_token_words_only() -> None:
    words = prompt_words(VOCAB, encode)
    assert " alpha" in words and " delta" in words
    assert "gamma" not in words  # no leading space
    assert " x" not in words  # too short to be a word
    with pytest.raises(ValueError, match="single-token words"):
        prompt_words({" alpha": 10}, encode)


def test_prompts_have_exact_length_and_differ() -> None:
    words = prompt_words(VOCAB, encode)
    prompts = build_prompts(3, 16, words=words, encode=encode, seed=1)
    assert all(len(prompt.ids) == 16 and list(prompt.ids) == encode(prompt.text) for prompt in prompts)
    assert len({prompt.text for prompt in prompts}) == 3
    assert build_prompts(3, 16, words=words, encode=encode, seed=1) == prompts


def test_report_table_and_json(tmp_path: Path) -> None:
    served = summarize(
        [RequestResult(ok=True, prompt_tokens=8, output_tokens=2, chunk_times=[0.2, 0.3], latency=0.3)],
        concurrency=1,
        duration_s=0.5,
        prompt_tokens=8,
    )
    raw = summarize(
        [RequestResult(ok=True, prompt_tokens=8, output_tokens=2, chunk_times=[0.1, 0.2], latency=0.2)],
        concurrency=1,
        duration_s=0.25,
        prompt_tokens=8,
    )
    level = Level(1, served, raw, {"samples": 10, "p50": 0.1, "p99": 0.5, "max": 0.9}, client_cpu=0.2)
    assert level.ratios()["output_throughput"] == 0.5
    assert level.ratios()["ttft_median"] == 2.0
    report = Report(
        model="m", graph="g.toml", url="http://x", server="external",
        workload={"prompt_tokens": 8, "output_tokens": 2}, environment={}, levels=[level],
    )  # fmt: skip
    table = report.table()
    assert "served/raw" in table and "0.50x" in table and "2.00x" in table
    report.write_json(tmp_path / "out.json")
    data = json.loads((tmp_path / "out.json").read_text())
    assert data["levels"][0]["served_over_raw"]["output_throughput"] == 0.5
    assert data["levels"][0]["event_loop_lag_ms"]["p99"] == 0.5


def test_plot_writes_a_png(tmp_path: Path) -> None:
    from appliance.tools.bench.plot import write_plot

    def level(concurrency: int, seconds: float) -> Level:
        result = RequestResult(ok=True, prompt_tokens=8, output_tokens=2, chunk_times=[0.1, 0.2], latency=0.2)
        metrics = summarize([result], concurrency=concurrency, duration_s=seconds, prompt_tokens=8)
        return Level(concurrency, metrics, metrics)

    report = Report(
        model="m", graph="g.toml", url="http://x", server="external", workload={}, environment={},
        levels=[level(1, 1.0), level(4, 0.5), level(16, 0.4)],
    )  # fmt: skip
    write_plot(report, tmp_path / "plot.png")
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_served_graph_copy_points_at_the_same_model(tmp_path: Path) -> None:
    from appliance.tools.bench.local_server import _absolute_paths

    (tmp_path / "graphs").mkdir()
    graph = tmp_path / "graphs" / "m.toml"
    graph.write_text('# comment kept\nname = "m"\nmodel_path = "../models/m"\n\n[limits]\nmax_tokens_limit = 8\n')
    text = _absolute_paths(graph)
    assert f'model_path = "{(tmp_path / "models" / "m").resolve()}"' in text
    assert text.startswith("# comment kept\n") and "max_tokens_limit = 8" in text
