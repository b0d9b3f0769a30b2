"""`appliance bench` metric math, prompts and report, on synthetic timings (no model, no server)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from appliance.tools.bench.metrics import LevelMetrics, RequestResult, Slo, distribution, percentile, summarize
from appliance.tools.bench.report import RAW, Level, Report, System, SystemRun, ratio
from appliance.tools.bench.workload import (
    Load,
    Prompt,
    Workload,
    arrival_times,
    build_prompts,
    default_requests,
    prompt_words,
)


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


def _metrics(ttft: float, seconds: float, concurrency: int | None = 1) -> LevelMetrics:
    result = RequestResult(
        ok=True, prompt_tokens=8, output_tokens=2, chunk_times=[ttft, ttft + 0.1], latency=ttft + 0.1
    )
    return summarize([result], concurrency=concurrency, duration_s=seconds, prompt_tokens=8, output_tokens=2)


def test_report_table_and_json_with_every_system(tmp_path: Path) -> None:
    lag = {"samples": 10, "p50": 0.1, "p99": 0.5, "max": 0.9}
    level = Level(
        Load(requests=1, concurrency=1),
        {
            "appliance": SystemRun(_metrics(0.2, 0.5), lag, client_cpu=0.2),
            "llama": SystemRun(_metrics(0.4, 1.0), None, client_cpu=0.1),
            RAW: SystemRun(_metrics(0.1, 0.25)),
        },
    )
    assert level.ratios("appliance")["output_throughput"] == 0.5
    assert level.ratios("appliance")["ttft_median"] == 2.0
    assert level.ratios("llama")["output_throughput"] == 0.25
    assert level.ratios(RAW) == {}
    report = Report(
        model="m", graph="g.toml",
        systems=[System("appliance", "http://a", "started"), System("llama", "http://l", "external", "smol"),
                 System(RAW, None, "in-process")],
        workload={"prompt_tokens": 8, "output_tokens": 2}, environment={}, slo={"ttft_ms": 1000, "tpot_ms": 100},
        levels=[level],
    )  # fmt: skip
    table = report.table()
    assert "appliance/raw" in table and "llama/raw" in table and "0.50x" in table and "0.25x" in table
    assert "TTFT <= 1000 ms and TPOT <= 100 ms" in table
    report.write_json(tmp_path / "out.json")
    data = json.loads((tmp_path / "out.json").read_text())
    (level_data,) = data["levels"]
    assert list(level_data["systems"]) == ["appliance", "llama", RAW]
    assert level_data["over_raw"]["llama"]["output_throughput"] == 0.25
    assert level_data["systems"]["appliance"]["event_loop_lag_ms"]["p99"] == 0.5
    assert level_data["systems"][RAW]["bench_client_cpu_cores"] is None
    assert data["systems"]["llama"] == {"url": "http://l", "how": "external", "model": "smol"}


def test_repeated_rounds_report_the_median_run_and_the_spread(tmp_path: Path) -> None:
    """--repeat: each system's median round stands in the table; the rounds, their spread and the
    ratio to raw within each round are listed, so drift on a shared machine shows."""
    level = Level(Load(requests=1, concurrency=1))
    for appliance_seconds, raw_seconds in ((1.0, 0.5), (0.5, 0.5), (0.8, 0.4)):
        level.add("appliance", SystemRun(_metrics(0.1, appliance_seconds), None, client_cpu=0.1))
        level.add(RAW, SystemRun(_metrics(0.1, raw_seconds)))
    # 2 tokens per run: 2.0, 4.0, 2.5 tok/s for the appliance; the median round is the third.
    assert level.runs["appliance"].metrics.output_throughput == pytest.approx(2.5)
    assert level.round_ratios("appliance") == [0.5, 1.0, 0.5]
    machine = {"cpu_model": "Test CPU", "cores": 2, "isa": ["avx2"], "openvino": {"error": "absent"}}
    report = Report(
        model="m", graph="g.toml", systems=[System("appliance", "http://a", "started"), System(RAW, None, "in")],
        workload={"prompt_tokens": 8, "output_tokens": 2}, environment={"machine": machine},
        slo={"ttft_ms": 1000, "tpot_ms": 100}, levels=[level],
    )  # fmt: skip
    table = report.table()
    assert "machine: Test CPU, 2 cores; ISA avx2; OpenVINO could not describe the device (absent)" in table
    assert "2.00 / 2.50 / 4.00" in table and "80.0%" in table and "0.50x 1.00x 0.50x  (median 0.50x)" in table
    report.write_json(tmp_path / "out.json")
    rounds = json.loads((tmp_path / "out.json").read_text())["levels"][0]["rounds"]
    assert rounds["appliance"] == {
        "output_throughput": [2.0, 4.0, 2.5],
        "over_raw": [0.5, 1.0, 0.5],
        "over_raw_median": 0.5,
    }


def test_machine_description_reads_cpuinfo(tmp_path: Path) -> None:
    from appliance.tools.bench.machine import describe_machine

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Xeon X\nflags\t\t: fpu avx2 amx_tile avx512_vnni sse\n")
    machine = describe_machine("NO_SUCH_DEVICE", cpuinfo)
    assert (machine["cpu_model"], machine["isa"]) == ("Xeon X", ["avx2", "avx512_vnni", "amx_tile"])
    assert "error" in machine["openvino"]


def test_report_notes_a_system_generating_other_token_counts() -> None:
    wrong = RequestResult(ok=False, output_tokens=5, error="5 completion tokens instead of 2")
    metrics = summarize([wrong], concurrency=1, duration_s=1.0, prompt_tokens=8, output_tokens=2)
    level = Level(Load(requests=1, concurrency=1), {"peer": SystemRun(metrics, None, 0.1)})
    report = Report(
        model="m", graph="g", systems=[System("peer", "http://p", "external")],
        workload={"prompt_tokens": 8, "output_tokens": 2}, environment={}, slo={"ttft_ms": 1, "tpot_ms": 1},
        levels=[level],
    )  # fmt: skip
    assert "c=1 peer: 1 requests generated a number of tokens other than 2" in report.table()


def test_plot_writes_a_png(tmp_path: Path) -> None:
    from appliance.tools.bench.plot import write_plot

    def level(rate: float, seconds: float) -> Level:
        runs = {name: SystemRun(_metrics(0.1, seconds, None)) for name in ("appliance", "llama", RAW)}
        return Level(Load(requests=1, rate=rate), runs)

    report = Report(
        model="m", graph="g.toml", systems=[], workload={}, environment={}, slo={},
        levels=[level(0.5, 1.0), level(2, 0.5), level(8, 0.4)],
    )  # fmt: skip
    write_plot(report, tmp_path / "plot.png")
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- open loop: the arrival schedule, and goodput ------------------------------------------------


def test_arrival_schedule_is_seeded_and_has_the_rate() -> None:
    schedule = arrival_times(2000, 4.0, seed=7)
    assert schedule == arrival_times(2000, 4.0, seed=7)  # the same for every system and run
    assert schedule != arrival_times(2000, 4.0, seed=8)
    assert schedule[0] == 0.0 and schedule == sorted(schedule)
    gaps = [later - earlier for earlier, later in zip(schedule, schedule[1:])]
    assert sum(gaps) / len(gaps) == pytest.approx(0.25, rel=0.1)  # mean gap 1/rate
    # Exponential gaps: their standard deviation equals their mean (Poisson arrivals, not a metronome).
    mean = sum(gaps) / len(gaps)
    assert math.sqrt(sum((gap - mean) ** 2 for gap in gaps) / len(gaps)) == pytest.approx(mean, rel=0.15)
    with pytest.raises(ValueError):
        arrival_times(3, 0.0)


def test_workload_gives_each_open_level_its_schedule() -> None:
    loads = (Load(requests=5, rate=2.0), Load(requests=9, rate=8.0))
    workload = Workload(loads, prompt_tokens=8, output_tokens=4, seed=1)
    assert workload.arrivals(loads[0]) == arrival_times(5, 2.0, seed=1)
    assert workload.arrivals(loads[1]) == arrival_times(9, 8.0, seed=2)
    assert Workload((Load(requests=4, concurrency=2),), 8, 4).arrivals(Load(requests=4, concurrency=2)) is None
    assert workload.as_dict()["mode"] == "open loop (Poisson arrivals)"
    assert (loads[0].label, Load(requests=4, concurrency=16).label) == ("2/s", "c=16")
    assert default_requests(rate=0.5) == 16 and default_requests(rate=4.0) == 40 and default_requests(4) == 16


def test_goodput_counts_requests_meeting_both_targets() -> None:
    def request(ttft: float, tpot: float, tokens: int = 5) -> RequestResult:
        times = [ttft + i * tpot for i in range(tokens)]
        return RequestResult(ok=True, prompt_tokens=8, output_tokens=tokens, chunk_times=times, latency=times[-1])

    results = [
        request(0.5, 0.05),  # meets both
        request(1.5, 0.05),  # TTFT too slow
        request(0.5, 0.20),  # TPOT too slow
        request(0.9, 0.10),  # on the targets: meets them
        request(0.2, 9.99, tokens=1),  # one token: no TPOT, TTFT decides
        RequestResult(ok=False, error="HTTP 503"),
    ]
    slo = Slo(ttft_ms=1000, tpot_ms=100)
    metrics = summarize(results, concurrency=None, duration_s=2.0, prompt_tokens=8, slo=slo)
    assert metrics.slo_met == 3
    assert metrics.goodput == pytest.approx(1.5)
    assert metrics.request_throughput == pytest.approx(2.5)
    strict = summarize(results, concurrency=None, duration_s=2.0, prompt_tokens=8, slo=Slo(ttft_ms=100, tpot_ms=1))
    assert strict.goodput == 0.0


def test_served_graph_copy_points_at_the_same_model(tmp_path: Path) -> None:
    from appliance.tools.bench.local_server import _absolute_paths

    (tmp_path / "graphs").mkdir()
    graph = tmp_path / "graphs" / "m.toml"
    graph.write_text('# comment kept\nname = "m"\nmodel_path = "../models/m"\n\n[limits]\nmax_tokens_limit = 8\n')
    text = _absolute_paths(graph)
    assert f'model_path = "{(tmp_path / "models" / "m").resolve()}"' in text
    assert text.startswith("# comment kept\n") and "max_tokens_limit = 8" in text
    # A speech graph's voice-activity model too, inside its table (and nothing else there).
    graph.write_text(
        'name = "w"\nmodel_path = "../models/w"\n\n[speech]\nword_timestamps = true\n'
        'vad_model = "../models/w/vad.onnx"   # silero\n\n[limits]\nvad_model = 3\n'
    )
    text = _absolute_paths(graph)
    assert f'vad_model = "{(tmp_path / "models" / "w" / "vad.onnx").resolve()}"\n' in text
    assert text.endswith("[limits]\nvad_model = 3\n") and "word_timestamps = true" in text


class _FakeHandle:
    """One request in `_FakePipe`: a token per step until it has `tokens`."""

    def __init__(self, tokens: int) -> None:
        self.left, self.new = tokens, 0

    def can_read(self) -> bool:
        return self.new > 0

    def read(self) -> dict:
        new, self.new = self.new, 0
        return {0: type("Output", (), {"generated_ids": [7] * new})()}

    def get_status(self):
        import openvino_genai

        status = openvino_genai.GenerationStatus
        return status.RUNNING if self.left or self.new else status.FINISHED


class _FakePipe:
    """The add_request/step surface of a ContinuousBatchingPipeline; records when requests came."""

    def __init__(self, tokens: int) -> None:
        self.tokens, self.handles, self.added, self.steps = tokens, [], [], 0

    def add_request(self, request_id: int, input_ids: object, config: object) -> _FakeHandle:
        import time

        self.added.append(time.perf_counter())
        self.handles.append(_FakeHandle(self.tokens))
        return self.handles[-1]

    def step(self) -> None:
        self.steps += 1
        for handle in self.handles:
            if handle.left:
                handle.left, handle.new = handle.left - 1, handle.new + 1


def test_raw_open_loop_adds_each_request_at_its_arrival_and_times_it_from_there() -> None:
    import time

    from appliance.tools.bench.raw import RawPipeline

    raw = RawPipeline.__new__(RawPipeline)  # the loop only, on a fake pipeline
    raw.pipe, raw._eos_token_id = _FakePipe(tokens=3), 2
    prompts = [Prompt(text="x", ids=(1, 2)) for _ in range(3)]
    arrivals = [0.0, 0.02, 0.15]
    started = time.perf_counter()
    results, duration = raw.run_level(prompts, concurrency=None, output_tokens=3, arrivals=arrivals)
    assert [(r.ok, r.output_tokens) for r in results] == [(True, 3)] * 3
    assert all(added - started >= offset for added, offset in zip(raw.pipe.added, arrivals))
    assert duration >= arrivals[-1]
    # Nothing in flight between the second request's end and the third's arrival: no idle steps.
    assert raw.pipe.steps <= 9
    assert all(0 <= r.ttft <= r.latency for r in results)
