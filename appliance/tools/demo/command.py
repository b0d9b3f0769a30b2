"""`appliance demo` on the command line: which demo models to build, and where."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["register", "run"]


def register(subcommands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `demo` to the parser."""
    parser = subcommands.add_parser(
        "demo",
        help="build the offline demo models into DIR/models and DIR/graphs",
        description="Build tiny demo models offline (random weights, a locally trained tokenizer, real "
        "OpenVINO IR) into DIR/models/<name>/ and write DIR/graphs/<name>.toml, to try and test the "
        "appliance without downloading anything (their answers are gibberish). Output that is "
        "already current is left alone.",
    )
    parser.add_argument("dir", type=Path, metavar="DIR")
    parser.add_argument(
        "--models",
        default="demo-chat,demo-vision",
        help="comma-separated demo models to build (default demo-chat,demo-vision; also: demo-bench, demo-spec, demo-lookup)",
    )
    parser.add_argument("--force", action="store_true", help="rebuild even when the output is current")
    return parser


def run(args: argparse.Namespace) -> int:
    """Build and print each graph file written (ValueError, exit 2, for an unknown name)."""
    from appliance.tools.demo.builder import build_demo

    names = [name.strip() for name in args.models.split(",") if name.strip()]
    for path in build_demo(args.dir, names, force=args.force):
        print(f"graph: {path}")
    return 0
