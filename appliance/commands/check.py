"""`appliance check`: load every graph file as `serve` would, print what would be served, exit."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["register", "run"]


def register(subcommands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `check` to the parser."""
    parser = subcommands.add_parser(
        "check",
        help="validate graph files, models and devices without serving",
        description="Validate every graph file in DIR as `serve` would (fields, model folders, devices) "
        "and print one line per model; a mistake exits 2 naming the file and the field or device.",
    )
    parser.add_argument("--graphs", type=Path, required=True, metavar="DIR", help="directory of graph files (*.toml)")
    return parser


def run(args: argparse.Namespace) -> int:
    """Print one `ok` line per graph (ConfigError, exit 2, on the first bad one)."""
    from appliance.engine.devices import available_devices
    from appliance.graphfiles.checks import prepare_graphs

    for graph in prepare_graphs(args.graphs, available_devices()):
        print(f"ok  {graph.name:<24} {graph.device:<8} {graph.pipeline_kind:<6} {graph.model_dir}  ({graph.source})")
    return 0
