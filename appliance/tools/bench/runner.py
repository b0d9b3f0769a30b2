"""`appliance bench`: the served run over HTTP, then the raw baseline, then the report.

The raw baseline runs only after the server has stopped: two pipelines computing at once on a
small CPU would slow each other and make both numbers wrong. Both runs get the same prompts (as
token ids for the raw pipeline), the same lengths, and one warm-up round that is not measured
(a fresh pipeline's first steps include one-off allocations).
"""

from __future__ import annotations

import asyncio
import logging
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from appliance import __version__
from appliance.graphfiles import Graph, load_graph
from appliance.tools.bench.client import loop_lag, run_level
from appliance.tools.bench.local_server import LocalServer
from appliance.tools.bench.metrics import LevelMetrics, summarize
from appliance.tools.bench.report import Level, Report
from appliance.tools.bench.workload import Prompt, Workload, build_prompts, default_requests, prompt_words

__all__ = ["BenchOptions", "run_bench"]

_WARMUP_OUTPUT_TOKENS = 16
_BUSY = 0.15  # share of the CPU in use by others above which the machine is too busy to measure


@dataclass(frozen=True)
class BenchOptions:
    """What `appliance bench` was asked to do (see `appliance bench --help`)."""

    graph: Path
    url: str | None = None
    """An already running OpenAI-compatible server; None: start `appliance serve` for the graph."""
    model: str | None = None
    """The model name to send; None: the graph's name."""
    concurrency: tuple[int, ...] = (1, 4, 16)
    requests: int | None = None
    """Requests per level; None: max(8, 4 x concurrency)."""
    prompt_tokens: int = 128
    output_tokens: int = 128
    raw: bool = True
    api_key: str | None = None
    seed: int = 0


def run_bench(options: BenchOptions, progress: Callable[[str], None] | None = None) -> Report:
    """Run the whole benchmark and return its report (printing and files are the caller's)."""
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    busy_before = _cpu_busy()
    # httpx logs every request at INFO: thousands of lines that would bury the report.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    graph = load_graph(options.graph)
    if options.output_tokens > graph.limits.max_tokens_limit:
        raise ValueError(
            f"--output-tokens {options.output_tokens} is above the graph's max_tokens_limit "
            f"({graph.limits.max_tokens_limit})"
        )
    from appliance.tools.bench.raw import Tokenizer  # openvino_genai: imported only when running

    workload = Workload(
        concurrency=options.concurrency,
        prompt_tokens=options.prompt_tokens,
        output_tokens=options.output_tokens,
        requests=tuple(options.requests or default_requests(c) for c in options.concurrency),
    )
    tokenizer = Tokenizer(graph.model_dir)
    words = prompt_words(tokenizer.vocab(), tokenizer.encode)
    prompts = build_prompts(
        max(workload.requests), workload.prompt_tokens, words=words, encode=tokenizer.encode, seed=options.seed
    )
    warmup = build_prompts(2, workload.prompt_tokens, words=words, encode=tokenizer.encode, seed=options.seed + 1)
    model = options.model or graph.name

    if options.url:
        url, server = options.url.rstrip("/"), "external"
        served = _served(url, model, workload, prompts, warmup, options.api_key, say)
    else:
        say(f"starting appliance serve for {graph.source} ...")
        with LocalServer(graph) as url:
            server = "appliance serve started by the bench"
            served = _served(url, model, workload, prompts, warmup, None, say)
    raw = _raw(graph, workload, prompts, warmup, say) if options.raw else [None] * len(served)

    report = Report(
        model=model,
        graph=str(options.graph),
        url=url,
        server=server,
        workload=workload.as_dict(),
        environment=_environment(graph),
    )
    for concurrency, (metrics, lag, client_cpu), raw_metrics in zip(workload.concurrency, served, raw):
        report.levels.append(Level(concurrency, metrics, raw_metrics, lag, client_cpu))
    if options.url and options.raw:
        report.notes.append("the raw baseline ran while the external server was still up (idle)")
    # Our server and pipeline are gone by now: whatever keeps the CPU busy is someone else's.
    busy_after = _cpu_busy()
    if busy_before is not None and busy_after is not None:
        report.environment["cpu_busy_by_others"] = {"before": round(busy_before, 3), "after": round(busy_after, 3)}
        if max(busy_before, busy_after) >= _BUSY:
            # Served and raw runs take turns, so other work skews their ratio as well.
            report.notes.append(
                f"other work kept {busy_before:.0%} of the CPU busy before the run and {busy_after:.0%} "
                "after it: every number, and the served/raw ratios, are skewed; run on an idle machine"
            )
    return report


def _served(
    url: str,
    model: str,
    workload: Workload,
    prompts: list[Prompt],
    warmup: list[Prompt],
    api_key: str | None,
    say: Callable[[str], None],
) -> list[tuple[LevelMetrics, dict[str, float] | None, float]]:
    """Per level: the metrics, the server's loop lag, and the CPU (cores) this client used."""
    say(f"served: warming up {url} ...")
    results, _ = asyncio.run(
        run_level(url, model, warmup, concurrency=len(warmup), output_tokens=_WARMUP_OUTPUT_TOKENS, api_key=api_key)
    )
    if not any(result.ok for result in results):
        # Nothing will work (wrong URL or model, a server refusing ignore_eos...): say why now.
        raise RuntimeError(f"{url}: the warm-up requests failed: {results[0].error}")
    levels = []
    for concurrency, count in zip(workload.concurrency, workload.requests):
        since, cpu_before = time.time(), time.process_time()
        results, duration = asyncio.run(
            run_level(
                url,
                model,
                prompts[:count],
                concurrency=concurrency,
                output_tokens=workload.output_tokens,
                api_key=api_key,
            )  # fmt: skip
        )
        client_cpu = (time.process_time() - cpu_before) / duration if duration > 0 else 0.0
        metrics = summarize(results, concurrency=concurrency, duration_s=duration, prompt_tokens=workload.prompt_tokens)
        levels.append((metrics, loop_lag(url, since, api_key=api_key), client_cpu))
        say(f"served: concurrency {concurrency}: {count} requests in {duration:.2f} s ({metrics.failed} failed)")
    return levels


def _raw(
    graph: Graph, workload: Workload, prompts: list[Prompt], warmup: list[Prompt], say: Callable[[str], None]
) -> list[LevelMetrics]:
    from appliance.tools.bench.raw import raw_pipeline

    say(f"raw: loading {graph.model_dir} on {graph.device} ({graph.pipeline_kind}) ...")
    pipeline = raw_pipeline(graph)
    pipeline.run_level(warmup, concurrency=len(warmup), output_tokens=_WARMUP_OUTPUT_TOKENS)
    levels = []
    for concurrency, count in zip(workload.concurrency, workload.requests):
        results, duration = pipeline.run_level(
            prompts[:count], concurrency=concurrency, output_tokens=workload.output_tokens
        )
        levels.append(
            summarize(results, concurrency=concurrency, duration_s=duration, prompt_tokens=workload.prompt_tokens)
        )
        say(f"raw: concurrency {concurrency}: {count} requests in {duration:.2f} s")
    return levels


def _cpu_busy(seconds: float = 1.0) -> float | None:
    """Share of all CPUs busy over `seconds` (Linux /proc/stat; None elsewhere)."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as stat:
            # user nice system idle iowait irq softirq steal (guest time is already in user).
            fields = [int(value) for value in stat.readline().split()[1:9]]
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields) - idle, sum(fields)

    try:
        busy_0, total_0 = sample()
        time.sleep(seconds)
        busy_1, total_1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    return (busy_1 - busy_0) / max(1, total_1 - total_0)


def _environment(graph: Graph) -> dict[str, object]:
    return {
        "appliance": __version__,
        "openvino_genai": metadata.version("openvino-genai"),
        "device": graph.device,
        "pipeline": graph.pipeline_kind,
        "cpu_count": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(),
        "python": platform.python_version(),
    }
