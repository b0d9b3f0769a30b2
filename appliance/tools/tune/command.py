"""`appliance tune GRAPH...` on the command line: measure, choose, write the winner into the file."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import os
from pathlib import Path

from appliance.commands.numbers import Number

__all__ = ["register", "run"]

_TUNABLE = ("LM_CB", "VLM_CB")
_DEFAULT_WEIGHTS = "int8_sym,int8_asym,int4_sym_g64,int4_sym_g32,int4_sym_channel_all"
_TOKENS = Number(int, 1, 1_000_000)


def register(subcommands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `tune` to the parser."""
    parser = subcommands.add_parser(
        "tune",
        help="find each graph's fastest OpenVINO CPU settings on this box and write them into the graph file",
        description="For each graph file: measure its raw pipeline as it is, then each lever (the weights' "
        "format, KV cache precision, dynamic quantization group size, inference precision, CPU pinning) on top of the best "
        "so far, each form in a fresh process, within a time budget; keep a form that is faster at one "
        "stream without losing throughput at --busy streams and writes the same greedy tokens; measure "
        "the winner against the graph as it was again, then write it into the graph's [plugin_config] "
        "as a marked, reversible block naming the CPU, the date and the measured ratios.",
    )
    parser.add_argument("graphs", nargs="+", type=Path, metavar="GRAPH", help="graph files to tune")
    parser.add_argument(
        "--budget",
        type=Number(float, 0, 7 * 86400, low_open=True),
        default=600.0,
        metavar="SECONDS",
        help="time for each graph's search (default 600)",
    )
    parser.add_argument("--prompt-tokens", type=_TOKENS, default=128, metavar="N", help="default 128")
    parser.add_argument("--output-tokens", type=_TOKENS, default=64, metavar="N", help="default 64")
    parser.add_argument(
        "--busy", type=Number(int, 2, 1024), default=4, metavar="N", help="streams of the busy level (default 4)"
    )
    parser.add_argument(
        "--level-seconds",
        type=Number(float, 0, 3600),
        default=3.0,
        metavar="S",
        help="each level of each form runs at least this long (default 3; longer: steadier figures)",
    )
    parser.add_argument(
        "--weights",
        default=_DEFAULT_WEIGHTS,
        metavar="FORMATS",
        help="weight formats to try first, comma-separated, or none (default "
        f"{_DEFAULT_WEIGHTS}; also int4_sym_g128, int4_asym_g64, int4_sym_channel): the text model written again as an "
        "OpenVINO IR in each; the winner's folder is kept and the graph's model_path points at it",
    )
    parser.add_argument(
        "--weights-dir",
        type=Path,
        metavar="DIR",
        help="where the weight candidates are written (default: beside the model)",
    )
    parser.add_argument(
        "--max-perplexity-loss",
        type=Number(float, 0, 100, high_open=True),
        default=0.0,
        metavar="PERCENT",
        help="let a weight format that writes other greedy tokens win when its perplexity on tune's text "
        "is at most this many per cent above the model's as it is (default 0: the same greedy tokens "
        "only); the loss is written into the graph's tune block",
    )
    parser.add_argument("--dry-run", action="store_true", help="measure and report; leave the files alone")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="instead of tuning: where a decoded token's time goes, OpenVINO's per-layer counters for the "
        "model as served and in each --weights format, each under the property sets worth comparing "
        "(a table; nothing is written)",
    )
    parser.add_argument(
        "--reference-ms",
        type=Number(float, 0, 1e6, low_open=True),
        metavar="MS",
        help="with --profile: a peer's time per token (llama.cpp's TPOT on the same file) to print ratios against",
    )
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

    weights = [] if args.weights.strip().lower() == "none" else [f for f in args.weights.split(",") if f.strip()]
    from appliance.tools.tune.weights import SOURCE, WEIGHT_FORMATS, candidate_dir, remove_candidate

    unknown = sorted({f.strip() for f in weights} - set(WEIGHT_FORMATS))
    if unknown:
        print(f"appliance tune: unknown --weights {', '.join(unknown)} (known: {', '.join(WEIGHT_FORMATS)}, none)")
        return 2
    weights = [f.strip() for f in weights]
    machine = describe_machine()
    print(machine_line(machine))
    if args.profile:
        return _profile_graphs(args, weights)
    isa = list(machine["isa"])
    workload = Workload(
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        busy=args.busy,
        min_seconds=args.level_seconds,
        quality=bool(weights),
    )
    unreadable: list[Path] = []
    failed = 0
    for path, graph in _graphs(args.graphs, unreadable):
        if graph.pipeline_kind not in _TUNABLE or graph.device != "CPU":
            print(
                f"{path}: skipped: tune measures continuous-batching graphs on the CPU ({graph.pipeline_kind} on {graph.device})"
            )
            continue
        print(f"{path}: tuning {graph.name} ({graph.model_dir}), budget {args.budget:.0f} s")
        timeout = max(120.0, args.budget)
        try:
            # A vision model is several IRs: only a text model's weights are written again.
            formats = weights if graph.pipeline_kind == "LM_CB" else []
            outcome = search(
                levers_for(isa, graph.plugin_config, weights=formats),
                functools.partial(_measure_form, measure, path, workload, timeout, args.weights_dir, {}),
                budget=args.budget,
                log=lambda line: print("  " + line, flush=True),
                max_perplexity_loss=args.max_perplexity_loss / 100,
            )
        except RuntimeError as exc:
            print(f"{path}: {exc}")
            failed += 1
            continue
        summary = _summary(outcome, machine, workload)
        print(f"{path}: " + " ".join(summary))
        chosen = outcome.best.form.weights
        model_path = None
        # The candidates not chosen give their disk back, and so does a GGUF's own IR (made to
        # build them and to measure its perplexity).
        for fmt in {measured.form.weights for measured in outcome.tried} | {SOURCE}:
            if fmt is not None and (fmt != chosen or args.dry_run):
                remove_candidate(candidate_dir(graph.model_dir, fmt, args.weights_dir))
        if args.dry_run:
            continue
        if chosen is not None:
            folder = candidate_dir(graph.model_dir, chosen, args.weights_dir).resolve()
            model_path = os.path.relpath(folder, path.parent.resolve())
            print(f"{path}: the model in {chosen}: {folder}")
        text = path.read_text(encoding="utf-8")
        changes = outcome.best.form.plugin_changes()
        path.write_text(tuned_text(text, changes, summary, isa, model_path), encoding="utf-8")
        try:
            load_graph(path)
        except ConfigError as exc:  # never leave a graph the server would refuse
            path.write_text(text, encoding="utf-8")
            print(f"{path}: the tuned file did not load ({exc}); left as it was")
            failed += 1
            continue
        print(f"{path}: written")
    return 1 if failed or unreadable else 0


def _profile_graphs(args: argparse.Namespace, weights: list[str]) -> int:
    """`--profile`: each graph's model, as served and in each weight format, under each of
    `profile.FORMS`; 1 when a graph could not be read."""
    import tempfile

    from appliance.tools.tune.profile import FORMS, pipeline_tpot, profile, render

    unreadable: list[Path] = []
    for path, graph in _graphs(args.graphs, unreadable):
        print(f"{path}: profiling {graph.model_dir}: {args.prompt_tokens} tokens in, then single-token steps")
        with tempfile.TemporaryDirectory(dir=args.weights_dir) as scratch:
            work = args.weights_dir or Path(scratch)
            rows = [
                pipeline_tpot(graph.model_dir, graph.plugin_config, stateful=stateful) for stateful in (False, True)
            ]
            print("\n".join("  " + line for line in render(rows, args.reference_ms)[2:]), flush=True)
            for fmt in [None, *weights]:
                # Every property set on the weights as served; the compute-type and dynamic
                # quantization ones (those that change how the weights are read) on the others.
                for _label, properties in FORMS if fmt is None else FORMS[:4]:
                    rows.append(
                        profile(
                            graph.model_dir,
                            fmt,
                            {**graph.plugin_config, **properties},
                            work_dir=work,
                            prompt_tokens=args.prompt_tokens,
                        )
                    )
                    print("  " + render(rows[-1:], args.reference_ms)[-1], flush=True)
        print("\n".join(render(rows, args.reference_ms)))
    return 1 if unreadable else 0


def _graphs(paths: list[Path], unreadable: list[Path]):
    """Each graph file that loads, with its Graph; one that does not is printed and added to `unreadable`."""
    from appliance.errors import ConfigError
    from appliance.graphfiles import load_graph

    for path in paths:
        try:
            yield path, load_graph(path)
        except ConfigError as exc:
            print(f"{path}: {exc}")
            unreadable.append(path)


def _measure_form(measure, path: Path, workload, timeout: float, weights_dir: Path | None, perplexities: dict, form):
    """`form` measured; its perplexity depends on its weights alone, so it is measured once per
    weight format (None: the graph's own) and given to every later form with the same weights."""
    known = perplexities.get(form.weights)
    quality = workload.quality and known is None
    measured = measure(path, form, dataclasses.replace(workload, quality=quality), timeout, weights_dir)
    if measured.perplexity is not None:
        perplexities[form.weights] = measured.perplexity
    elif known is not None and not measured.error:
        measured = dataclasses.replace(measured, perplexity=known)
    return measured


def _summary(outcome, machine: dict, workload) -> list[str]:
    """The tune block's lines: what was measured, where, when, and how to undo it."""
    today = datetime.date.today().isoformat()
    where = f"{machine.get('cpu_model') or 'an unknown CPU'}, {machine.get('cores')} cores"
    reference, best = outcome.reference, outcome.best
    if not outcome.changed:
        found = f"no lever beat the graph as it was ({reference.one_stream:.1f} output tokens/s at one stream)"
        return [f"{today} on {where}: {found}.", f"Tried {len(outcome.tried)} forms."]
    return [
        f"{today} on {where}: {best.form.describe()}: {outcome.one_stream_ratio:.2f}x output tokens/s",
        f"at one stream ({reference.one_stream:.1f} -> {best.one_stream:.1f}), {outcome.busy_ratio:.2f}x at {workload.busy} streams,",
        f"{_quality(best, reference)} ({workload.prompt_tokens} tokens in, {workload.output_tokens} out; {len(outcome.tried)} forms tried).",
        'Undo: delete the lines marked "appliance tune" and put back the ones marked "was".',
    ]


def _quality(best, reference) -> str:
    from appliance.tools.tune.levers import perplexity_loss

    if best.tokens == reference.tokens:
        return "the same greedy tokens"
    loss = perplexity_loss(best, reference)
    return f"other greedy tokens, perplexity {best.perplexity:.2f} against {reference.perplexity:.2f} ({loss:+.1%})"
