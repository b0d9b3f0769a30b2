"""`appliance bench`: the appliance over HTTP, then each peer, then the raw baseline, then the report.

Systems run one after the other, never at once: two servers computing together on a small CPU
would slow each other and make every number wrong. A server the bench starts (the appliance, a
peer's command) is up only for its own turn; with `--interleave` every system is up (idle) for the
whole run and they take turns level by level, round by round, because a shared host drifts by
20-25% within a minute and a ratio of runs minutes apart measures the drift too. All systems get
the same prompts (as token ids for the raw pipeline), the same lengths, the same arrival schedule
in an open loop, and one warm-up round that is not measured (a fresh pipeline's first steps
include one-off allocations).

A multi-turn run (`turns` > 1) measures what the scheduler's prefix cache buys: the bench starts
the appliance twice, with `[scheduler] enable_prefix_caching` on and off, and drives each (and any
peer) with the same conversations. It has no raw baseline: the pipeline in process would be handed
token ids, not a chat history to template.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
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
from appliance.tools.bench.client import loop_lag, run_conversations, run_level
from appliance.tools.bench.local_server import LocalServer
from appliance.tools.bench.machine import describe_machine
from appliance.tools.bench.metrics import RequestResult, Slo, TurnMetrics, summarize, summarize_turns
from appliance.tools.bench.peers import Peer, PeerProcess, peer_ready
from appliance.tools.bench.report import NO_PREFIX_CACHE, PREFIX_CACHE, RAW, Level, Report, System, SystemRun
from appliance.tools.bench.workload import Load, Prompt, Workload, build_prompts, default_requests, prompt_words

__all__ = ["BenchOptions", "run_bench", "with_systems"]

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
    turns: int = 1
    """Above 1: multi-turn conversations of this many turns (closed loop, no raw baseline)."""
    system_tokens: int = 0
    """Multi-turn: a system message of this many tokens opens each conversation (an agent's prompt)."""
    repeat: int = 1
    """Rounds: every system measured this many times, taking turns each round (drift shows)."""
    interleave: bool = False
    """Every system up at once, taking turns level by level and round by round (`_interleaved`)."""


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
    raw = options.raw and options.turns == 1
    if not (options.url or options.appliance or options.peers or raw):
        raise ValueError("nothing to measure: no appliance, no peer and no raw pipeline")
    for peer in options.peers:  # a wrong URL should fail now, not after the appliance's turn
        if peer.command is None and peer.url and (why := peer_ready(peer.url)):
            raise RuntimeError(f"peer {peer.name!r}: {peer.url}: not ready ({why})")
    from appliance.tools.bench.raw import Tokenizer  # openvino_genai: imported only when running

    workload = _workload(options)
    tokenizer = Tokenizer(graph.model_dir)
    words = prompt_words(tokenizer.vocab(), tokenizer.encode)
    # Each level (and each round) gets prompts of its own: a level re-sending the last one's would
    # be served from prefix caches (the appliance's, llama-server's slots) and measure the cache,
    # not the model. A multi-turn level's requests are conversations, each with a user message per
    # turn.
    sizes = [load.requests * workload.turns for load in workload.loads] * options.repeat
    every = build_prompts(sum(sizes), workload.prompt_tokens, words=words, encode=tokenizer.encode, seed=options.seed)
    slices = [every[sum(sizes[:index]) : sum(sizes[: index + 1])] for index in range(len(sizes))]
    warmup = build_prompts(2, workload.prompt_tokens, words=words, encode=tokenizer.encode, seed=options.seed + 1)
    if workload.system_tokens:
        # Each conversation's system message goes first in its slice (`with_systems`); the warm-up's
        # one-turn conversations get theirs too, so the long prefill's one-off costs are paid there.
        def systems(count: int, seed: int) -> list[Prompt]:
            return build_prompts(count, workload.system_tokens, words=words, encode=tokenizer.encode, seed=seed)

        slices = [with_systems(part, systems(len(part) // workload.turns, options.seed + 2 + n), workload.turns)
                  for n, part in enumerate(slices)]  # fmt: skip
        warmup = with_systems(warmup, systems(len(warmup), options.seed + 1_000_003), 1)
    model = options.model or graph.name
    levels = [Level(load) for load in workload.loads]
    systems: list[System] = []
    count = len(workload.loads)
    players = functools.partial(_players, graph, options, workload, warmup, model, raw, say)
    if options.interleave:
        systems = _interleaved(players(), workload, slices, levels, options.repeat, say)
    for round_index in range(0 if options.interleave else options.repeat):
        if options.repeat > 1:
            say(f"round {round_index + 1} of {options.repeat}")
        found = _round(players(), workload, slices[round_index * count : (round_index + 1) * count], levels)
        systems = systems or found

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
    if workload.turns > 1 and options.raw:
        report.notes.append("multi-turn: no raw baseline (the pipeline in process has no chat history to template)")
    if workload.turns > 1 and graph.stateful and not options.url and options.appliance:
        report.notes.append("a stateful graph has no scheduler: its prefix caching cannot be switched on or off")
    if options.interleave:
        report.notes.append(
            "--interleave: every system was up (idle) during the others' turns; they took turns level by level, "
            "round by round, the order flipped each round"
        )
    elif external:
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


@dataclass(frozen=True)
class _Player:
    """A system ready to measure (started and warmed up): `measure(load, prompts)` runs one level."""

    system: System
    measure: Callable[[Load, list[Prompt]], SystemRun]


def _players(
    graph: Graph,
    options: BenchOptions,
    workload: Workload,
    warmup: list[Prompt],
    model: str,
    raw: bool,
    say: Callable[[str], None],
) -> Iterator[contextlib.AbstractContextManager[_Player]]:
    """Each system to measure, in order, as a context that starts it (a server the bench runs,
    the raw pipeline loaded in process), warms it up, and stops it on exit."""
    if options.url:
        url = options.url.rstrip("/")
        target = _Target(url, model, options.api_key, appliance=True)
        system = System("served", url, "external", model)
        yield contextlib.nullcontext(_http_player(system, target, workload, warmup, options.slo, say))
    elif options.appliance:
        for name, caching in _appliances(graph, workload):
            yield _appliance_player(name, caching, graph, workload, warmup, model, options.slo, say)
    for peer in options.peers:
        yield _peer_player(peer, options, workload, warmup, model, say)
    if raw:
        yield _raw_player(graph, workload, warmup, options.slo, say)


def _round(
    players: Iterator[contextlib.AbstractContextManager[_Player]],
    workload: Workload,
    prompts: list[list[Prompt]],
    levels: list[Level],
) -> list[System]:
    """One round: each system in turn, up for its own turn only, on every level (`prompts`: each
    level's), its runs added to `levels`; returns the systems in the order they ran."""
    systems: list[System] = []
    for player_context in players:
        with player_context as player:
            systems.append(player.system)
            for level, load, level_prompts in zip(levels, workload.loads, prompts):
                level.add(player.system.name, player.measure(load, level_prompts))
    return systems


def _interleaved(
    players: Iterator[contextlib.AbstractContextManager[_Player]],
    workload: Workload,
    slices: list[list[Prompt]],
    levels: list[Level],
    repeat: int,
    say: Callable[[str], None],
) -> list[System]:
    """--interleave: every system up at once; each level's rounds taken system by system, so the
    runs a ratio compares are seconds apart, not a whole round. The order flips every round, so
    neither side always goes first. Returns the systems in their first round's order."""
    with contextlib.ExitStack() as stack:
        ready = [stack.enter_context(player_context) for player_context in players]
        count = len(levels)
        for index, (level, load) in enumerate(zip(levels, workload.loads)):
            for round_index in range(repeat):
                if repeat > 1:
                    say(f"{load.label}: round {round_index + 1} of {repeat}")
                for player in ready if round_index % 2 == 0 else reversed(ready):
                    level.add(player.system.name, player.measure(load, slices[round_index * count + index]))
        return [player.system for player in ready]


@contextlib.contextmanager
def _appliance_player(
    name: str,
    caching: bool | None,
    graph: Graph,
    workload: Workload,
    warmup: list[Prompt],
    model: str,
    slo: Slo,
    say: Callable[[str], None],
) -> Iterator[_Player]:
    say(f"{name}: starting appliance serve for {graph.source} ...")
    with LocalServer(graph, prefix_caching=caching) as url:
        how = "appliance serve started by the bench" + (
            f", [scheduler] enable_prefix_caching = {str(caching).lower()}" if caching is not None else ""
        )
        target = _Target(url, model, None, appliance=True)
        yield _http_player(System(name, url, how, model), target, workload, warmup, slo, say)


@contextlib.contextmanager
def _peer_player(
    peer: Peer,
    options: BenchOptions,
    workload: Workload,
    warmup: list[Prompt],
    model: str,
    say: Callable[[str], None],
) -> Iterator[_Player]:
    peer_model = peer.model or model
    with _peer_url(peer, options.peer_timeout, say) as url:
        how = f"started: {peer.command}" if peer.command else "external"
        target = _Target(url, peer_model, None, appliance=False)
        yield _http_player(System(peer.name, url, how, peer_model), target, workload, warmup, options.slo, say)


def _http_player(
    system: System,
    target: _Target,
    workload: Workload,
    warmup: list[Prompt],
    slo: Slo,
    say: Callable[[str], None],
) -> _Player:
    """A server that is up: warmed up, then measured a level at a time."""
    _warm_up(system.name, target, workload, warmup, say)
    return _Player(system, lambda load, prompts: _http_level(system.name, target, workload, load, prompts, slo, say))


@contextlib.contextmanager
def _raw_player(
    graph: Graph, workload: Workload, warmup: list[Prompt], slo: Slo, say: Callable[[str], None]
) -> Iterator[_Player]:
    from appliance.tools.bench.raw import raw_pipeline

    say(f"raw: loading {graph.model_dir} on {graph.device} ({graph.pipeline_kind}) ...")
    loaded = [raw_pipeline(graph)]  # emptied on exit: the model's memory goes back before the next turn
    loaded[0].run_level(warmup, concurrency=len(warmup), output_tokens=_WARMUP_OUTPUT_TOKENS)
    kind = "stateful LLMPipeline, one generate() at a time" if graph.stateful else "ContinuousBatchingPipeline"
    system = System(RAW, None, f"in-process {kind}, same prompt ids, same GenerationConfig")

    def measure(load: Load, prompts: list[Prompt]) -> SystemRun:
        results, duration = loaded[0].run_level(
            prompts,
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
        say(f"raw: {load.label}: {load.requests} requests in {duration:.2f} s")
        return SystemRun(metrics)

    try:
        yield _Player(system, measure)
    finally:
        loaded.clear()


def _workload(options: BenchOptions) -> Workload:
    if options.rates:
        loads = tuple(Load(requests=options.requests or default_requests(rate=r), rate=r) for r in options.rates)
    else:
        loads = tuple(
            Load(requests=options.requests or default_requests(c), concurrency=c) for c in options.concurrency
        )
    return Workload(
        loads,
        options.prompt_tokens,
        options.output_tokens,
        seed=options.seed,
        turns=options.turns,
        system_tokens=options.system_tokens,
    )


def _appliances(graph: Graph, workload: Workload) -> tuple[tuple[str, bool | None], ...]:
    """The appliance servers to start, by name, with the prefix caching each gets (None: the graph's)."""
    if workload.turns > 1 and not graph.stateful:
        return ((PREFIX_CACHE, True), (NO_PREFIX_CACHE, False))
    return (("appliance", None),)


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


def _warm_up(name: str, target: _Target, workload: Workload, warmup: list[Prompt], say: Callable[[str], None]) -> None:
    """Requests that are not measured (a fresh pipeline's first steps include one-off allocations);
    a system that fails them all is refused now, with the reason."""
    say(f"{name}: warming up {target.url} ...")
    # A multi-turn run warms up the chat endpoint, with one-turn conversations.
    chat_turns = 1 if workload.turns > 1 else None
    concurrency = len(warmup) // (2 if workload.system_tokens else 1)
    results, _, _ = _drive(
        target, warmup, concurrency, _WARMUP_OUTPUT_TOKENS, None, chat_turns, bool(workload.system_tokens)
    )
    if not any(result.ok or result.output_tokens for result in results):
        # Nothing will work (wrong URL or model, a server refusing ignore_eos...): say why now. A
        # server that answers with other token counts is measured: the report says what it did.
        raise RuntimeError(f"{name}: {target.url}: the warm-up requests failed: {results[0].error}")


def _http_level(
    name: str,
    target: _Target,
    workload: Workload,
    load: Load,
    prompts: list[Prompt],
    slo: Slo,
    say: Callable[[str], None],
) -> SystemRun:
    """One level against one HTTP system: metrics, the appliance's loop lag, the client's CPU."""
    chat_turns = workload.turns if workload.turns > 1 else None
    since, cpu_before = time.time(), time.process_time()
    results, duration, turns = _drive(
        target,
        prompts,
        load.concurrency,
        workload.output_tokens,
        workload.arrivals(load),
        chat_turns,
        bool(workload.system_tokens),
    )
    client_cpu = (time.process_time() - cpu_before) / duration if duration > 0 else 0.0
    metrics = summarize(
        results,
        concurrency=load.concurrency,
        duration_s=duration,
        prompt_tokens=None if chat_turns else workload.prompt_tokens,
        output_tokens=workload.output_tokens,
        slo=slo,
    )
    lag = loop_lag(target.url, since, api_key=target.api_key) if target.appliance else None
    say(f"{name}: {load.label}: {len(results)} requests in {duration:.2f} s ({metrics.failed} failed)")
    return SystemRun(metrics, lag, client_cpu, turns)


def _drive(
    target: _Target,
    prompts: list[Prompt],
    concurrency: int | None,
    output_tokens: int,
    arrivals: list[float] | None,
    chat_turns: int | None,
    system: bool = False,
) -> tuple[list[RequestResult], float, tuple[TurnMetrics, ...]]:
    """One level's requests against `target`: single completions (`chat_turns` None), or chat
    conversations of `chat_turns` consecutive prompts each (after their system message with
    `system`, as `with_systems` lays them out); every result, the wall time, and the per-turn
    summary."""
    url, model, key = target.url, target.model, target.api_key
    if chat_turns is None:
        sent = run_level(
            url, model, prompts, concurrency=concurrency, output_tokens=output_tokens, arrivals=arrivals, api_key=key
        )
        results, duration = asyncio.run(sent)
        return results, duration, ()
    size = chat_turns + system
    groups = [prompts[start : start + size] for start in range(0, len(prompts), size)]
    talks = run_conversations(
        url,
        model,
        [group[system:] for group in groups],
        concurrency=concurrency,
        output_tokens=output_tokens,
        api_key=key,
        systems=[group[0] for group in groups] if system else None,
    )
    per_turn, duration = asyncio.run(talks)
    return [result for conversation in per_turn for result in conversation], duration, summarize_turns(per_turn)


def with_systems(users: list[Prompt], systems: list[Prompt], turns: int) -> list[Prompt]:
    """Conversations of `turns` user messages each, every one led by its system message:
    [system 1, user 1.1, ..., user 1.turns, system 2, ...]."""
    if len(users) != len(systems) * turns:
        raise ValueError(f"{len(users)} user messages for {len(systems)} conversations of {turns} turns")
    out: list[Prompt] = []
    for index, system in enumerate(systems):
        out += [system, *users[index * turns : (index + 1) * turns]]
    return out


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
        "machine": describe_machine(graph.device),
        "appliance": __version__,
        "openvino_genai": metadata.version("openvino-genai"),
        "device": graph.device,
        "pipeline": graph.pipeline_kind,
        "cpu_count": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(),
        "python": platform.python_version(),
    }
