"""`appliance export SOURCE --name NAME`: its flags, and which export a source gets (`ir` for a
Hugging Face model, `gguf` for a `.gguf` file)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from appliance.commands.numbers import Number
from appliance.graphfiles import DEFAULT_MAX_PROMPT_LEN, GGUF_SUFFIX
from appliance.tools.export import ir
from appliance.tools.export.ir import WEIGHT_FORMATS, ExportError

__all__ = ["register", "run"]


def register(subcommands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `export` to the parser."""
    parser = subcommands.add_parser(
        "export",
        help="export a Hugging Face model to OpenVINO IR and write its graph file",
        description="Export SOURCE (a Hugging Face model id or a local folder) with optimum-intel into "
        "MODELS/NAME, check that it loads and renders its chat template, and write GRAPHS/NAME.toml. "
        "A .gguf file is served as it is: it is checked and loaded, and the graph points at it.",
    )
    parser.add_argument("source", metavar="SOURCE", help="Hugging Face model id, local model folder or .gguf file")
    parser.add_argument("--name", required=True, help="served model name (and folder name)")
    parser.add_argument("--weight-format", choices=WEIGHT_FORMATS, help="default int8 (not for a .gguf file)")
    parser.add_argument("--models-dir", type=Path, metavar="DIR", help="default ./models (not for a .gguf file)")
    parser.add_argument("--graphs-dir", type=Path, default=Path("graphs"), metavar="DIR", help="default ./graphs")
    parser.add_argument(
        "--device",
        default="CPU",
        help="device written to the graph file (default CPU); NPU also means symmetric int4 weights with "
        "--weight-format int4 and a stateful-pipeline graph",
    )
    parser.add_argument(
        "--max-prompt-len",
        type=Number(int, 1, 1 << 20),
        default=DEFAULT_MAX_PROMPT_LEN,
        metavar="N",
        help=f"NPU graphs: longest prompt in tokens (MAX_PROMPT_LEN, default {DEFAULT_MAX_PROMPT_LEN})",
    )
    parser.add_argument("--task", help="optimum task, when it cannot be inferred (e.g. image-text-to-text)")
    parser.add_argument(
        "--trust-remote-code", action="store_true", help="allow the model's own code (trusted repos only)"
    )
    parser.add_argument("--force", action="store_true", help="replace an existing model folder and graph file")
    return parser


def run(args: argparse.Namespace) -> int:
    """Export; 1 with the failed step's reason on stderr."""
    try:
        if args.source.endswith(GGUF_SUFFIX):
            _export_gguf(args)
            return 0
        ir.export_model(
            args.source,
            args.name,
            weight_format=args.weight_format or "int8",
            models_dir=args.models_dir or Path("models"),
            graphs_dir=args.graphs_dir,
            device=args.device,
            task=args.task,
            trust_remote_code=args.trust_remote_code,
            force=args.force,
            max_prompt_len=args.max_prompt_len,
        )
    except ExportError as exc:
        print(f"appliance export: {exc}", file=sys.stderr)
        return 1
    return 0


def _export_gguf(args: argparse.Namespace) -> None:
    from appliance.tools.export.gguf import export_gguf

    flags = {"--weight-format": args.weight_format, "--models-dir": args.models_dir, "--task": args.task}
    flags["--trust-remote-code"] = args.trust_remote_code or None
    given = [flag for flag, value in flags.items() if value is not None]
    if given:
        raise ExportError(
            f"{given[0]} does not apply to a GGUF file: it is served as it is (its own quantization), from where it is"
        )
    if not ir.NAME.match(args.name):
        raise ExportError(f"--name {args.name!r}: use letters, digits, '.', '_' and '-' (up to 128)")
    export_gguf(
        Path(args.source),
        args.name,
        graphs_dir=args.graphs_dir,
        device=args.device,
        force=args.force,
        max_prompt_len=args.max_prompt_len,
    )
