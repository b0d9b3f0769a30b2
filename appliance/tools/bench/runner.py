"""`appliance bench`: the appliance over HTTP, then each peer, then the raw baseline, then the report.

Systems run one after the other, never at once: two servers computing together on a small CPU
would slow each other and make every number wrong. A server the bench starts (the appliance, a
peer's command) is up only for its own turn. All systems get the same prompts (as token ids for
the raw pipeline), the same lengths, the same arrival schedule in an open loop, and one warm-up
round that is not measured (a fresh pipeline's first steps include one-off allocations).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from appliance import __version__
from appliance.graphfiles import Graph, load_graph
from appliance.tools.bench.client import loop_lag, run_level
from appliance.tools.bench.local_server import LocalServer
from appliance.tools.bench.metrics import Slo, summarize
from appliance.tools.bench.peers import Peer, PeerProcess, peer_ready
from appliance.tools.bench.report import RAW, Level, Report, System, SystemRun
from appliance.tools.bench.workload import Load, Prompt, Workload, build_prompts, default_requests, prompt_words

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
    rates: tuple[float, ...] = ()
    """Open-loop arrival rates (requests/s), one level each; empty: closed loop at `concurrency`."""
    requests: int | None = None
    """Requests per level; None: `default_requests` of the level."""
    prompt_tokens: int = 128
    output_tokens: int = 128
    raw: bool = True
    appliance: bool = True
    """False: no appliance (and no `url`): only the peers and the raw pipeline."""
    api_key: str | None = None
    seed: int = 0
    peers: tuple[Peer, ...] = ()
    peer_timeout: float = 300.0
    """Seconds a peer's command gets to answer GET /v1/models."""
    slo: Slo = field(default_factory=Slo)


@dataclass(frozen=True)
class _Target:
    """An HTTP system for one turn: where to send, what model name, whether it is the appliance."""

    url: str
    model: str
    api_key: str | None
    appliance: bool


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
    if not (options.url or options.appliance or options.peers or options.raw):
        raise ValueError("nothing to measure: no appliance, no peer and no raw pipeline")
    for peer in options.peers:  # a wrong URL should fail now, not after the appliance's turn
        if peer.command is None and peer.url and (why := peer_ready(peer.url)):
            raise RuntimeError(f"peer {peer.name!r}: {peer.url}: not ready ({why})")
    from appliance.tools.bench.raw import Tokenizer  # openvino_genai: imported only when running

    workload = _workload(options)
    tokenizer = Tokenizer(graph.model_dir)
    words = prompt_words(tokenizer.vocab(), tokenizer.encode)
    # Each level gets prompts of its own: a level re-sending the last one's would be served from
    # prefix caches (the appliance's, llama-server's slots) and measure the cache, not the model.
    every = build_prompts(
        sum(load.requests for load in workload.loads),
        workload.prompt_tokens,
        words=words,
        encode=tokenizer.encode,
        seed=options.seed,
    )
    starts = [sum(load.requests for load in workload.loads[:index]) for index in range(len(workload.loads))]
    prompts = [every[start : start + load.requests] for start, load in zip(starts, workload.loads)]
    warmup = build_prompts(2, workload.prompt_tokens, words=words, encode=tokenizer.encode, seed=options.seed + 1)
    model = options.model or graph.name
    levels = [Level(load) for load in workload.loads]
    systems: list[System] = []

    def measure(name: str, target: _Target) -> None:
        for level, run in zip(levels, _http_runs(name, target, workload, prompts, warmup, options.slo, say)):
            level.runs[name] = run

    if options.url:
        systems.append(System("served", options.url.rstrip("/"), "external", model))
        measure("served", _Target(options.url.rstrip("/"), model, options.api_key, appliance=True))
    elif options.appliance:
        say(f"starting appliance serve for {graph.source} ...")
        with LocalServer(graph) as url:
            systems.append(System("appliance", url, "appliance serve started by the bench", model))
            measure("appliance", _Target(url, model, None, appliance=True))
    for peer in options.peers:
        peer_model = peer.model or model
        with _peer_url(peer, options.peer_timeout, say) as url:
            how = f"started: {peer.command}" if peer.command else "external"
            systems.append(System(peer.name, url, how, peer_model))
            measure(peer.name, _Target(url, peer_model, None, appliance=False))
    if options.raw:
        kind = "stateful LLMPipeline, one generate() at a time" if graph.stateful else "ContinuousBatchingPipeline"
        systems.append(System(RAW, None, f"in-process {kind}, same prompt ids, same GenerationConfig"))
        for level, run in zip(levels, _raw(graph, workload, prompts, warmup, options.slo, say)):
            level.runs[RAW] = run

    report = Report(
        model=model,
        graph=str(options.graph),
        systems=systems,
        workload=workload.as_dict(),
        environment=_environment(graph),
        slo={"ttft_ms": options.slo.ttft_ms, "tpot_ms": options.slo.tpot_ms},
        levels=levels,
    )
    external = [name for name, how in ((s.name, s.how) for s in systems) if how == "external"]
    if external:
        report.notes.append(f"{', '.join(external)}: already running, so up (idle) during the other systems' turns")
    # Our servers and pipeline are gone by now: whatever keeps the CPU busy is someone else's.
    busy_after = _cpu_busy()
    if busy_before is not None and busy_after is not None:
        report.environment["cpu_busy_by_others"] = {"before": round(busy_before, 3), "after": round(busy_after, 3)}
        if max(busy_before, busy_after) >= _BUSY:
            # Systems take turns, so other work skews their ratios as well.
            report.notes.append(
                f"other work kept {busy_before:.0%} of the CPU busy before the run and {busy_after:.0%} "
                "after it: every number, and the ratios to raw, are skewed; run on an idle machine"
            )
    return report


def _workload(options: BenchOptions) -> Workload:
    if options.rates:
        loads = tuple(Load(requests=options.requests or default_requests(rate=r), rate=r) for r in options.rates)
    else:
        loads = tuple(
            Load(requests=options.requests or default_requests(c), concurrency=c) for c in options.concurrency
        )
    return Workload(loads, options.prompt_tokens, options.output_tokens, seed=options.seed)


@contextlib.contextmanager
def _peer_url(peer: Peer, timeout: float, say: Callable[[str], None]) -> Iterator[str]:
    """The peer's URL for its turn: as given, or its command's, started and stopped around the turn."""
    if peer.command is None:
        assert peer.url is not None
        yield peer.url.rstrip("/")
        return
    process = PeerProcess(peer, ready_timeout=timeout)
    say(f"{peer.name}: starting `{process.command}` ...")
    with process as url:
        yield url.rstrip("/")
    say(f"{peer.name}: stopped (exit code {process.process.returncode if process.process else None})")


def _http_runs(
    name: str,
    target: _Target,
    workload: Workload,
    prompts: list[list[Prompt]],
    warmup: list[Prompt],
    slo: Slo,
    say: Callable[[str], None],
) -> list[SystemRun]:
    """Every level (`prompts`: each level's) against one HTTP system: metrics, the appliance's loop lag, the client's CPU."""
    say(f"{name}: warming up {target.url} ...")
    results, _ = asyncio.run(
        run_level(
            target.url,
            target.model,
            warmup,
            concurrency=len(warmup),
            output_tokens=_WARMUP_OUTPUT_TOKENS,
            api_key=target.api_key,
        )  # fmt: skip
    )
    if not any(result.ok or result.output_tokens for result in results):
        # Nothing will work (wrong URL or model, a server refusing ignore_eos...): say why now. A
        # server that answers with other token counts is measured: the report says what it did.
        raise RuntimeError(f"{name}: {target.url}: the warm-up requests failed: {results[0].error}")
    runs = []
    for load, level_prompts in zip(workload.loads, prompts):
        since, cpu_before = time.time(), time.process_time()
        results, duration = asyncio.run(
            run_level(
                target.url,
                target.model,
                level_prompts,
                concurrency=load.concurrency,
                output_tokens=workload.output_tokens,
                arrivals=workload.arrivals(load),
                api_key=target.api_key,
            )
        )
        client_cpu = (time.process_time() - cpu_before) / duration if duration > 0 else 0.0
        metrics = summarize(
            results,
            concurrency=load.concurrency,
            duration_s=duration,
            prompt_tokens=workload.prompt_tokens,
            output_tokens=workload.output_tokens,
            slo=slo,
        )
        lag = loop_lag(target.url, since, api_key=target.api_key) if target.appliance else None
        runs.append(SystemRun(metrics, lag, client_cpu))
        say(f"{name}: {load.label}: {load.requests} requests in {duration:.2f} s ({metrics.failed} failed)")
    return runs


def _raw(
    graph: Graph,
    workload: Workload,
    prompts: list[list[Prompt]],
    warmup: list[Prompt],
    slo: Slo,
    say: Callable[[str], None],
) -> list[SystemRun]:
    from appliance.tools.bench.raw import raw_pipeline

    say(f"raw: loading {graph.model_dir} on {graph.device} ({graph.pipeline_kind}) ...")
    pipeline = raw_pipeline(graph)
    pipeline.run_level(warmup, concurrency=len(warmup), output_tokens=_WARMUP_OUTPUT_TOKENS)
    runs = []
    for load, level_prompts in zip(workload.loads, prompts):
        results, duration = pipeline.run_level(
            level_prompts,
            concurrency=load.concurrency,
            output_tokens=workload.output_tokens,
            arrivals=workload.arrivals(load),
        )
        metrics = summarize(
            results,
            concurrency=load.concurrency,
            duration_s=duration,
            prompt_tokens=workload.prompt_tokens,
            output_tokens=workload.output_tokens,
            slo=slo,
        )
        runs.append(SystemRun(metrics))
        say(f"raw: {load.label}: {load.requests} requests in {duration:.2f} s")
    return runs


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
