"""`appliance check`: load every graph file as `serve` would, print what would be served, exit."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from appliance.cpu_features import ISA_FEATURES, isa, tuned_isa
from appliance.errors import ConfigError
from appliance.graphfiles.footprint import over_budget
from appliance.graphfiles.tuning import tune_hint
from appliance.memory_budget import resolve_memory_budget
from appliance.settings import DEFAULT_CONFIG, load_settings

if TYPE_CHECKING:
    from appliance.graphfiles.tuning import tune_hint
from appliance.graphfiles import Graph

__all__ = ["register", "run"]


def register(subcommands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `check` to the parser."""
    parser = subcommands.add_parser(
        "check",
        help="validate graph files, models and devices without serving",
        description="Validate the graph files `serve` would serve (the same settings: --graphs, "
        "APPLIANCE_GRAPHS, the settings file, else graphs/), their model folders and devices, and print "
        "each model with the facts its files give (context, chat template, vector size, image size) and its "
        "estimated memory footprint; every mistake is reported, each naming the file and the field or device, "
        "a graph too big for memory_budget too, and any mistake exits 2.",
    )
    parser.add_argument("target", nargs="?", type=Path, metavar="GRAPHS", help="a graph file or a directory of them")
    parser.add_argument("--graphs", type=Path, metavar="DIR", help="the same as GRAPHS (default as for serve)")
    parser.add_argument(
        "--config", type=Path, metavar="FILE", help=f"TOML settings file (default {DEFAULT_CONFIG} when it exists)"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the good graphs as a JSON list (name, pipeline, device, footprint_bytes and its parts) "
        "instead of the text lines; mistakes still go to stderr",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Print an `ok` line per good graph (then its model's facts, read from its files, as `serve`
    bounds requests with them) and an `error` line per mistake; exit 2 on any mistake."""
    from appliance.engine.host.devices import available_devices
    from appliance.engine.host.templates import ToolFormat
    from appliance.graphfiles.checks import review_graphs

    target = graphs_target(args.target, args.graphs, args.config)
    budget = resolve_memory_budget(load_settings({}, config=args.config).memory_budget)
    graphs, errors = review_graphs(target, available_devices())
    errors += [problem for graph in graphs if (problem := over_budget(graph.name, graph.footprint, budget))]
    if args.json:
        print(json.dumps([_summary(graph) for graph in graphs], indent=2))
    here = isa()
    for graph in [] if args.json else graphs:
        print(f"ok     {graph.name:<24} {graph.device:<8} {graph.pipeline_kind:<6} {graph.model_dir}  ({graph.source})")
        print(f"       {graph.facts.describe(graph.max_context)}")
        print(f"       {graph.footprint.describe()}")
        if graph.task == "generate":
            print(f"       tools: {ToolFormat.of(graph, graph.facts.template)}")
        if graph.speech_facts is not None:
            print(f"       {graph.speech_facts.describe()}")
        if graph.tts_facts is not None:
            voices = ", ".join(graph.voices)
            print(f"       {graph.tts_facts.describe()}; voices: {voices} (default {graph.default_voice})")
        warning = _tuned_elsewhere(graph.source, here)
        if warning:
            print(f"warn   {graph.name}: {warning}", file=sys.stderr)
        hint = tune_hint(graph, here)
        if hint:
            print(f"hint   {graph.name}: {hint}", file=sys.stderr)
    for error in errors:
        print(f"error  {error}", file=sys.stderr)
    if errors:
        print(f"appliance: {len(errors)} mistake(s) in the graph files of {target}", file=sys.stderr)
        return 2
    if not graphs and not args.json:
        print(f"{target}: no graph files (*.toml); `serve` would start with no models")
    return 0


def _summary(graph: Graph) -> dict[str, object]:
    """A graph as `check --json` prints it."""
    return {
        "name": graph.name,
        "pipeline": graph.pipeline_kind,
        "device": graph.device,
        "footprint_bytes": graph.footprint_bytes,
        **graph.footprint.parts(),
        "footprint": graph.footprint.describe(),
    }


def _tuned_elsewhere(source: str, here: list[str]) -> str | None:
    """Why a graph's `appliance tune` settings may not suit this CPU (None: tuned here, or never)."""
    try:
        tuned = tuned_isa(Path(source).read_text(encoding="utf-8"))
    except OSError:
        return None
    if tuned is None or tuned == here:
        return None
    return (
        f"tuned on a CPU with {' '.join(tuned) or 'none of ' + ' '.join(ISA_FEATURES)}; this one has "
        f"{' '.join(here) or 'none of them'}: its [plugin_config] may be slower here (run `appliance tune {source}`)"
    )


def graphs_target(positional: Path | None, flag: Path | None, config: Path | None) -> Path:
    """The graph file or directory named on the command line (positional or --graphs, not both),
    else the one the settings name, as `serve` chooses it."""
    if positional is not None and flag is not None:
        raise ConfigError(f"give the graphs once: {positional} and --graphs {flag}")
    chosen = positional if positional is not None else flag
    return Path(load_settings({"graphs": str(chosen) if chosen else None}, config=config).graphs)
