"""`appliance tune GRAPH...` on the command line: measure, choose, write the winner into the file."""

from __future__ import annotations

import argparse
import datetime
import functools
from pathlib import Path

__all__ = ["register", "run"]

_TUNABLE = ("LM_CB", "VLM_CB")


def register(subcommands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `tune` to the parser."""
    parser = subcommands.add_parser(
        "tune",
        help="find each graph's fastest OpenVINO CPU settings on this box and write them into the graph file",
        description="For each graph file: measure its raw pipeline as it is, then each lever (KV cache "
        "precision, dynamic quantization group size, inference precision, CPU pinning) on top of the best "
        "so far, each form in a fresh process, within a time budget; keep a form that is faster at one "
        "stream without losing throughput at --busy streams and writes the same greedy tokens; measure "
        "the winner against the graph as it was again, then write it into the graph's [plugin_config] "
        "as a marked, reversible block naming the CPU, the date and the measured ratios.",
    )
    parser.add_argument("graphs", nargs="+", type=Path, metavar="GRAPH", help="graph files to tune")
    parser.add_argument(
        "--budget", type=float, default=600.0, metavar="SECONDS", help="time for each graph's search (default 600)"
    )
    parser.add_argument("--prompt-tokens", type=int, default=128, metavar="N", help="default 128")
    parser.add_argument("--output-tokens", type=int, default=64, metavar="N", help="default 64")
    parser.add_argument("--busy", type=int, default=4, metavar="N", help="streams of the busy level (default 4)")
    parser.add_argument(
        "--level-seconds",
        type=float,
        default=3.0,
        metavar="S",
        help="each level of each form runs at least this long (default 3; longer: steadier figures)",
    )
    parser.add_argument("--dry-run", action="store_true", help="measure and report; leave the files alone")
    return parser


def run(args: argparse.Namespace) -> int:
    """Tune each graph; 0 when every graph was measured, 1 when one could not be."""
    from appliance.errors import ConfigError
    from appliance.graphfiles import load_graph
    from appliance.tools.bench.machine import describe_machine, machine_line
    from appliance.tools.tune.graph_text import tuned_text
    from appliance.tools.tune.levers import levers_for
    from appliance.tools.tune.measure import Workload, measure
    from appliance.tools.tune.search import search

    for name, value in (("--prompt-tokens", args.prompt_tokens), ("--output-tokens", args.output_tokens)):
        if value < 1:
            print(f"appliance tune: {name} must be at least 1")
            return 2
    if args.busy < 2 or args.budget <= 0 or args.level_seconds < 0:
        print("appliance tune: --busy takes 2 or more streams, --budget and --level-seconds positive seconds")
        return 2
    machine = describe_machine()
    print(machine_line(machine))
    isa = list(machine["isa"])
    workload = Workload(
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        busy=args.busy,
        min_seconds=args.level_seconds,
    )
    failed = 0
    for path in args.graphs:
        try:
            graph = load_graph(path)
        except ConfigError as exc:
            print(f"{path}: {exc}")
            failed += 1
            continue
        if graph.pipeline_kind not in _TUNABLE or graph.device != "CPU":
            print(
                f"{path}: skipped: tune measures continuous-batching graphs on the CPU ({graph.pipeline_kind} on {graph.device})"
            )
            continue
        print(f"{path}: tuning {graph.name} ({graph.model_dir}), budget {args.budget:.0f} s")
        timeout = max(120.0, args.budget)
        try:
            outcome = search(
                levers_for(isa, graph.plugin_config),
                functools.partial(_measure_form, measure, path, workload, timeout),
                budget=args.budget,
                log=lambda line: print("  " + line, flush=True),
            )
        except RuntimeError as exc:
            print(f"{path}: {exc}")
            failed += 1
            continue
        summary = _summary(outcome, machine, workload)
        print(f"{path}: " + " ".join(summary))
        if args.dry_run:
            continue
        text = path.read_text(encoding="utf-8")
        path.write_text(tuned_text(text, dict(outcome.best.form.changes), summary, isa), encoding="utf-8")
        try:
            load_graph(path)
        except ConfigError as exc:  # never leave a graph the server would refuse
            path.write_text(text, encoding="utf-8")
            print(f"{path}: the tuned file did not load ({exc}); left as it was")
            failed += 1
            continue
        print(f"{path}: written")
    return 1 if failed else 0


def _measure_form(measure, path: Path, workload, timeout: float, form):
    return measure(path, form, workload, timeout)


def _summary(outcome, machine: dict, workload) -> list[str]:
    """The tune block's lines: what was measured, where, when, and how to undo it."""
    today = datetime.date.today().isoformat()
    where = f"{machine.get('cpu_model') or 'an unknown CPU'}, {machine.get('cores')} cores"
    reference, best = outcome.reference, outcome.best
    if not outcome.changed:
        found = f"no lever beat the graph as it was ({reference.one_stream:.1f} output tokens/s at one stream)"
        return [f"{today} on {where}: {found}.", f"Tried {len(outcome.tried)} forms."]
    return [
        f"{today} on {where}: {outcome.one_stream_ratio:.2f}x output tokens/s at one stream",
        f"({reference.one_stream:.1f} -> {best.one_stream:.1f}), {outcome.busy_ratio:.2f}x at {workload.busy} streams,",
        f"the same greedy tokens ({workload.prompt_tokens} tokens in, {workload.output_tokens} out; {len(outcome.tried)} forms tried).",
        'Undo: delete the lines marked "appliance tune" and put back the ones marked "was".',
    ]
