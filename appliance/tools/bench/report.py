"""The benchmark's results: one `Level` per concurrency or arrival rate, each holding a `SystemRun`
per system measured (the appliance, its peers, the raw pipeline), printed as a table or written as
JSON. Every system is compared with the raw pipeline of the same run; in a multi-turn run (no raw
pipeline) each system also has TTFT per turn, and the appliance with prefix caching is compared with
the appliance without it on the last turn's TTFT."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from appliance.tools.bench.machine import machine_line
from appliance.tools.bench.metrics import Distribution, LevelMetrics, TurnMetrics
from appliance.tools.bench.workload import Load

__all__ = ["NO_PREFIX_CACHE", "PREFIX_CACHE", "RAW", "Level", "Report", "System", "SystemRun", "ratio"]

RAW = "raw"
PREFIX_CACHE, NO_PREFIX_CACHE = "prefix-cache", "no-prefix-cache"
"""The appliance with and without `[scheduler] enable_prefix_caching`, in a multi-turn run."""
_LATE_SEND_MS = 10.0  # an open-loop send later than this after its arrival is the client's doing


@dataclass(frozen=True)
class System:
    """One system measured: where it was and how it got there."""

    name: str
    url: str | None
    """None for the in-process raw pipeline."""
    how: str
    """'appliance serve started by the bench', 'external', 'started: COMMAND', 'in-process ...'."""
    model: str | None = None
    """The model name sent to it (HTTP systems)."""

    def as_dict(self) -> dict[str, object]:
        return {"url": self.url, "how": self.how, "model": self.model}


@dataclass
class SystemRun:
    """One system at one level."""

    metrics: LevelMetrics
    loop_lag_ms: dict[str, float] | None = None
    """{samples, p50, p99, max} from the appliance's /stats; None from other servers."""
    client_cpu: float | None = None
    """CPU the bench's own HTTP client used meanwhile, in cores (it shares the machine); None: raw."""
    turns: tuple[TurnMetrics, ...] = ()
    """Multi-turn: the requests of each turn number; empty otherwise."""

    def as_dict(self) -> dict[str, object]:
        return {
            **self.metrics.as_dict(),
            "event_loop_lag_ms": self.loop_lag_ms,
            "bench_client_cpu_cores": None if self.client_cpu is None else round(self.client_cpu, 3),
            **({"turns": [turn.as_dict() for turn in self.turns]} if self.turns else {}),
        }


@dataclass
class Level:
    """One concurrency level or arrival rate: a run per system, in the order they ran."""

    load: Load
    runs: dict[str, SystemRun] = field(default_factory=dict)
    """Per system, its run of median output throughput (the only run without `--repeat`)."""
    rounds: dict[str, list[SystemRun]] = field(default_factory=dict)
    """Per system, its run in each round, in order (`--repeat`: the systems take turns each round)."""

    def add(self, name: str, run: SystemRun) -> None:
        """`name`'s run of the next round."""
        runs = self.rounds.setdefault(name, [])
        runs.append(run)
        ranked = sorted(runs, key=lambda each: _sortable(each.metrics.output_throughput))
        self.runs[name] = ranked[(len(ranked) - 1) // 2]

    def round_ratios(self, name: str) -> list[float | None]:
        """`name`'s output throughput over raw's in each round (the raw run of the same round)."""
        return [
            ratio(run.metrics.output_throughput, raw.metrics.output_throughput)
            for run, raw in zip(self.rounds.get(name, ()), self.rounds.get(RAW, ()))
        ]

    def ratios(self, name: str) -> dict[str, float | None]:
        """`name` / raw: above 1 is better for throughputs, below 1 is better for latencies."""
        raw, run = self.runs.get(RAW), self.runs[name]
        if raw is None or name == RAW:
            return {}
        this, base = run.metrics, raw.metrics
        return {
            "output_throughput": ratio(this.output_throughput, base.output_throughput),
            "request_throughput": ratio(this.request_throughput, base.request_throughput),
            "goodput": ratio(this.goodput, base.goodput),
            "ttft_median": ratio(this.ttft_ms.median, base.ttft_ms.median),
            "tpot_median": ratio(this.tpot_ms.median, base.tpot_ms.median),
            "itl_median": ratio(this.itl_ms.median, base.itl_ms.median),
        }

    def prefix_cache_ratios(self) -> dict[str, float | None]:
        """Last-turn TTFT with prefix caching over without (below 1: the cache helps); {} unless both ran."""
        on, off = self.runs.get(PREFIX_CACHE), self.runs.get(NO_PREFIX_CACHE)
        if on is None or off is None or not on.turns or not off.turns:
            return {}
        return {
            "last_turn_ttft_mean": ratio(on.turns[-1].ttft_ms.mean, off.turns[-1].ttft_ms.mean),
            "last_turn_ttft_median": ratio(on.turns[-1].ttft_ms.median, off.turns[-1].ttft_ms.median),
        }


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def _sortable(value: float) -> float:
    return -math.inf if math.isnan(value) else value


def ratio(value: float, raw: float) -> float | None:
    """value / raw, or None when either side has nothing to compare."""
    if math.isnan(value) or math.isnan(raw) or raw == 0:
        return None
    return round(value / raw, 3)


@dataclass
class Report:
    """A whole run: what was measured, where, and the levels."""

    model: str
    graph: str
    systems: list[System]
    workload: dict[str, object]
    environment: dict[str, object]
    slo: dict[str, float]
    """The goodput targets: {ttft_ms, tpot_ms}."""
    levels: list[Level] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "model": self.model,
            "graph": self.graph,
            "systems": {system.name: system.as_dict() for system in self.systems},
            "workload": self.workload,
            "goodput_slo_ms": self.slo,
            "environment": self.environment,
            "levels": [
                {
                    **level.load.as_dict(),
                    "systems": {name: run.as_dict() for name, run in level.runs.items()},
                    "over_raw": {name: level.ratios(name) for name in level.runs if name != RAW and RAW in level.runs},
                    **({"prefix_cache_over_none": r} if (r := level.prefix_cache_ratios()) else {}),
                    **({"rounds": self._rounds(level)} if self._repeated() else {}),
                }
                for level in self.levels
            ],
            "notes": self.notes,
        }

    def _repeated(self) -> bool:
        return any(len(runs) > 1 for level in self.levels for runs in level.rounds.values())

    def _rounds(self, level: Level) -> dict[str, object]:
        return {
            name: {
                "output_throughput": [round(run.metrics.output_throughput, 3) for run in runs],
                **(
                    {"over_raw": ratios, "over_raw_median": _median([r for r in ratios if r is not None])}
                    if name != RAW and RAW in level.rounds and (ratios := level.round_ratios(name))
                    else {}
                ),
            }
            for name, runs in level.rounds.items()
        }

    def write_json(self, path: Path) -> None:
        path.write_text(json.dumps(self.as_dict(), indent=2) + "\n", encoding="utf-8")

    def table(self) -> str:
        """The terminal table: a row per system and level, ratios to raw, then the loop lag."""
        w = self.workload
        names = [system.name for system in self.systems]
        width = max(10, *(len(name) + 4 for name in names))
        lines = [f"model {self.model}  graph {self.graph}"]
        machine = self.environment.get("machine")
        if isinstance(machine, dict):
            lines.append(machine_line(machine))
        lines += [
            f"  {system.name}: "
            + (f"{system.url} ({system.how}), model {system.model!r}" if system.url else system.how)
            for system in self.systems
        ]
        prompt = (
            f"each turn a new user message of {w['prompt_tokens']} words after the history, streamed "
            "/v1/chat/completions"
            if w.get("turns", 1) > 1
            else f"prompt {w['prompt_tokens']} tokens, streamed /v1/completions"
        )
        lines += [
            f"workload: {w.get('mode', 'closed loop')}, {prompt}, output {w['output_tokens']} tokens (ignore_eos), "
            "greedy; times in ms, TTFT/TPOT/ITL as mean / median / p99",
            f"good/s: requests per second with TTFT <= {self.slo['ttft_ms']:g} ms and TPOT <= "
            f"{self.slo['tpot_ms']:g} ms",
            "",
            f"{'level':>6}  {'system':<{width}} {'ok/fail':>7} {'time s':>7} {'req/s':>7} {'good/s':>7} "
            f"{'out tok/s':>9}  {'TTFT mean/med/p99':>23}  {'TPOT mean/med/p99':>20}  {'ITL mean/med/p99':>20}",
        ]
        for level in self.levels:
            label = level.load.label
            for name, run in level.runs.items():
                m = run.metrics
                lines.append(
                    f"{label:>6}  {name:<{width}} {f'{m.completed}/{m.failed}':>7} {m.duration_s:>7.2f} "
                    f"{m.request_throughput:>7.2f} {m.goodput:>7.2f} {m.output_throughput:>9.1f}  "
                    f"{_dist(m.ttft_ms):>23}  {_dist(m.tpot_ms):>20}  {_dist(m.itl_ms):>20}"
                )
                label = ""
            for name in level.runs:
                r = level.ratios(name)
                if r:
                    lines.append(
                        f"{'':>6}  {name + '/raw':<{width}} {'':>7} {'':>7} {_x(r['request_throughput']):>7} "
                        f"{_x(r['goodput']):>7} {_x(r['output_throughput']):>9}  {'med ' + _x(r['ttft_median']):>23}  "
                        f"{'med ' + _x(r['tpot_median']):>20}  {'med ' + _x(r['itl_median']):>20}"
                    )
        lines += [
            "",
            "during each HTTP run: the server's event-loop lag (ms; the appliance's /stats, '-' elsewhere) "
            "and the CPU the bench's own client used",
            f"{'level':>6}  {'system':<{width}} {'samples':>7} {'lag p50':>7} {'lag p99':>7} {'lag max':>7}  "
            f"{'client CPU':>10}",
        ]
        for level in self.levels:
            for name, run in level.runs.items():
                if run.client_cpu is None:
                    continue
                lag = run.loop_lag_ms
                lag_text = (
                    f"{lag['samples']:>7} {lag['p50']:>7.2f} {lag['p99']:>7.2f} {lag['max']:>7.2f}"
                    if lag
                    else f"{'-':>7} {'-':>7} {'-':>7} {'-':>7}"
                )
                lines.append(f"{level.load.label:>6}  {name:<{width}} {lag_text}  {run.client_cpu:>9.0%}")
        lines += self._turn_lines(width)
        lines += self._round_lines(width)
        problems = self._problems()
        lines += [""] * bool(problems + self.notes) + [f"note: {text}" for text in problems + self.notes]
        return "\n".join(lines)

    def _turn_lines(self, width: int) -> list[str]:
        """Multi-turn: a row per level, system and turn, then prefix caching's last-turn ratio."""
        if not any(run.turns for level in self.levels for run in level.runs.values()):
            return []
        lines = [
            "",
            "per turn: prompt tokens as the server counted them and those it reported cached (usage, mean; "
            "'-': not reported), TTFT mean / median / p99 (ms)",
            f"{'level':>6}  {'system':<{width}} {'turn':>4} {'ok/fail':>7} {'prompt':>7} {'cached':>7}  "
            f"{'TTFT mean/med/p99':>23}",
        ]
        for level in self.levels:
            label = level.load.label
            for name, run in level.runs.items():
                for turn in run.turns:
                    prompt = "-" if math.isnan(turn.prompt_tokens) else f"{turn.prompt_tokens:.0f}"
                    cached = "-" if math.isnan(turn.cached_tokens) else f"{turn.cached_tokens:.0f}"
                    lines.append(
                        f"{label:>6}  {name if turn.turn == 1 else '':<{width}} {turn.turn:>4} "
                        f"{f'{turn.completed}/{turn.failed}':>7} {prompt:>7} {cached:>7}  {_dist(turn.ttft_ms):>23}"
                    )
                    label = ""
            if r := level.prefix_cache_ratios():
                lines.append(
                    f"{'':>6}  {PREFIX_CACHE}/{NO_PREFIX_CACHE}: last turn TTFT mean {_x(r['last_turn_ttft_mean'])}, "
                    f"median {_x(r['last_turn_ttft_median'])}"
                )
        return lines

    def _round_lines(self, width: int) -> list[str]:
        """--repeat: each system's output throughput across rounds and its ratio to raw per round:
        the spread shows how far a shared machine drifted (the table above gives the median run)."""
        if not self._repeated():
            return []
        lines = [
            "",
            "rounds (systems interleaved each round): out tok/s min / median / max, spread (max - min) / "
            "median; over raw per round",
            f"{'level':>6}  {'system':<{width}} {'min/med/max out tok/s':>23} {'spread':>7}  over raw",
        ]
        for level in self.levels:
            label = level.load.label
            for name, runs in level.rounds.items():
                values = sorted(run.metrics.output_throughput for run in runs)
                middle = values[(len(values) - 1) // 2]
                spread = (values[-1] - values[0]) / middle if middle else math.nan
                ratios = level.round_ratios(name) if name != RAW else []
                median = _median([r for r in ratios if r is not None])
                over = " ".join(_x(r) for r in ratios) + (f"  (median {_x(median)})" if median else "")
                lines.append(
                    f"{label:>6}  {name:<{width}} {f'{_num(values[0])} / {_num(middle)} / {_num(values[-1])}':>23} "
                    f"{'-' if math.isnan(spread) else f'{spread:.1%}':>7}  {over}"
                )
                label = ""
        return lines

    def _problems(self) -> list[str]:
        w = self.workload
        problems = []
        for level in self.levels:
            for name, run in level.runs.items():
                m = run.metrics
                if m.output_token_mismatches:
                    problems.append(
                        f"{level.load.label} {name}: {m.output_token_mismatches} requests generated a number of "
                        f"tokens other than {w['output_tokens']} (ignore_eos or max_tokens not honoured?): "
                        f"counted as failed, so unlike work is not compared ({'; '.join(m.errors)})"
                    )
                if m.failed > m.output_token_mismatches:
                    problems.append(f"{level.load.label} {name}: {m.failed} failed ({'; '.join(m.errors)})")
                if name != RAW and m.max_send_delay_ms > _LATE_SEND_MS:
                    problems.append(
                        f"{level.load.label} {name}: the bench's client sent requests up to "
                        f"{m.max_send_delay_ms:.0f} ms after their scheduled arrival (counted in their times): "
                        "it was short of CPU"
                    )
                if name != RAW and m.prompt_token_mismatches:
                    problems.append(
                        f"{level.load.label} {name}: {m.prompt_token_mismatches} requests reported a prompt length "
                        f"other than {w['prompt_tokens']} tokens (the server tokenizes differently, e.g. adds BOS)"
                    )
        return problems


def _num(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _dist(d: Distribution) -> str:
    return f"{_num(d.mean)} / {_num(d.median)} / {_num(d.p99)}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"
