"""The benchmark's results: one `Level` per concurrency, printed as a table or written as JSON."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from appliance.tools.bench.metrics import Distribution, LevelMetrics

__all__ = ["Level", "Report", "ratio"]


@dataclass
class Level:
    """One concurrency level: the served run, the raw run (unless skipped) and the server's loop lag."""

    concurrency: int
    served: LevelMetrics
    raw: LevelMetrics | None = None
    loop_lag_ms: dict[str, float] | None = None
    """{samples, p50, p99, max} from the appliance's /stats; None from other servers."""
    client_cpu: float = 0.0
    """CPU the bench's own HTTP client used during the served run, in cores (it shares the machine)."""

    def ratios(self) -> dict[str, float | None]:
        """served / raw: above 1 is better for throughputs, below 1 is better for latencies."""
        if self.raw is None:
            return {}
        return {
            "output_throughput": ratio(self.served.output_throughput, self.raw.output_throughput),
            "request_throughput": ratio(self.served.request_throughput, self.raw.request_throughput),
            "ttft_median": ratio(self.served.ttft_ms.median, self.raw.ttft_ms.median),
            "tpot_median": ratio(self.served.tpot_ms.median, self.raw.tpot_ms.median),
            "itl_median": ratio(self.served.itl_ms.median, self.raw.itl_ms.median),
        }


def ratio(served: float, raw: float) -> float | None:
    """served / raw, or None when either side has nothing to compare."""
    if math.isnan(served) or math.isnan(raw) or raw == 0:
        return None
    return round(served / raw, 3)


@dataclass
class Report:
    """A whole run: what was measured, where, and the levels."""

    model: str
    graph: str
    url: str
    server: str
    """'started by the bench' or 'external'."""
    workload: dict[str, object]
    environment: dict[str, object]
    levels: list[Level] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "model": self.model,
            "graph": self.graph,
            "url": self.url,
            "server": self.server,
            "workload": self.workload,
            "environment": self.environment,
            "levels": [
                {
                    "concurrency": level.concurrency,
                    "served": level.served.as_dict(),
                    "raw": level.raw.as_dict() if level.raw else None,
                    "served_over_raw": level.ratios() or None,
                    "event_loop_lag_ms": level.loop_lag_ms,
                    "bench_client_cpu_cores": round(level.client_cpu, 3),
                }
                for level in self.levels
            ],
            "notes": self.notes,
        }

    def write_json(self, path: Path) -> None:
        path.write_text(json.dumps(self.as_dict(), indent=2) + "\n", encoding="utf-8")

    def table(self) -> str:
        """The terminal table: served and raw rows per level, their ratios, then the loop lag."""
        w = self.workload
        stateful = self.environment.get("pipeline") in ("LM", "VLM")
        baseline = "stateful LLMPipeline, one generate() at a time" if stateful else "ContinuousBatchingPipeline"
        lines = [
            f"model {self.model}  graph {self.graph}",
            f"served: {self.url} ({self.server}), streaming /v1/completions;  raw: in-process "
            f"{baseline}, same prompt ids, same GenerationConfig",
            f"workload: prompt {w['prompt_tokens']} tokens, output {w['output_tokens']} tokens "
            "(ignore_eos), greedy; times in ms, TTFT/TPOT/ITL as mean / median / p99",
            "",
            f"{'conc':>4}  {'run':<10} {'ok/fail':>7} {'time s':>7} {'req/s':>7} {'out tok/s':>9}  "
            f"{'TTFT mean/med/p99':>23}  {'TPOT mean/med/p99':>20}  {'ITL mean/med/p99':>20}",
        ]
        for level in self.levels:
            rows = [("served", level.served)] + ([("raw", level.raw)] if level.raw else [])
            for name, m in rows:
                lines.append(
                    f"{level.concurrency:>4}  {name:<10} {f'{m.completed}/{m.failed}':>7} {m.duration_s:>7.2f} "
                    f"{m.request_throughput:>7.2f} {m.output_throughput:>9.1f}  {_dist(m.ttft_ms):>23}  "
                    f"{_dist(m.tpot_ms):>20}  {_dist(m.itl_ms):>20}"
                )
            if level.raw:
                r = level.ratios()
                lines.append(
                    f"{'':>4}  {'served/raw':<10} {'':>7} {'':>7} {_x(r['request_throughput']):>7} "
                    f"{_x(r['output_throughput']):>9}  {'med ' + _x(r['ttft_median']):>23}  "
                    f"{'med ' + _x(r['tpot_median']):>20}  {'med ' + _x(r['itl_median']):>20}"
                )
        lines += [
            "",
            "during each served level: the server's event-loop lag (ms) and the CPU the bench's own client used",
            f"{'conc':>4}  {'samples':>7} {'lag p50':>7} {'lag p99':>7} {'lag max':>7}  {'client CPU':>10}",
        ]
        for level in self.levels:
            lag = level.loop_lag_ms
            lag_text = (
                f"{lag['samples']:>7} {lag['p50']:>7.2f} {lag['p99']:>7.2f} {lag['max']:>7.2f}"
                if lag
                else f"{'-':>7} {'-':>7} {'-':>7} {'-':>7}"
            )
            lines.append(f"{level.concurrency:>4}  {lag_text}  {level.client_cpu:>9.0%}")
        problems = [
            f"concurrency {level.concurrency} {name}: {m.failed} failed ({'; '.join(m.errors)})"
            for level in self.levels
            for name, m in (("served", level.served), ("raw", level.raw))
            if m is not None and m.failed
        ] + [
            f"concurrency {level.concurrency}: {level.served.prompt_token_mismatches} requests reported a prompt "
            f"length other than {w['prompt_tokens']} tokens (the server tokenizes differently)"
            for level in self.levels
            if level.served.prompt_token_mismatches
        ]
        lines += [""] * bool(problems + self.notes) + [f"note: {text}" for text in problems + self.notes]
        return "\n".join(lines)


def _num(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _dist(d: Distribution) -> str:
    return f"{_num(d.mean)} / {_num(d.median)} / {_num(d.p99)}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"
