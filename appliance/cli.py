"""The `appliance` command: serve, check, demo."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from appliance import __version__
from appliance.errors import ConfigError
from appliance.settings import DEFAULT_CONFIG, load_settings

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="appliance", description="OpenVINO GenAI edge-serving appliance (OpenAI-compatible API)."
    )
    parser.add_argument("--version", action="version", version=f"appliance {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "serve",
        help="serve every graph file in a directory",
        description="Serve every graph file in a directory. Each setting can also come from "
        "APPLIANCE_<NAME> environment variables or a TOML settings file (flags win).",
    )
    serve.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help=f"TOML settings file (default {DEFAULT_CONFIG} when it exists)",
    )
    serve.add_argument("--graphs", metavar="DIR", help="directory of graph files (*.toml)")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1; 0.0.0.0 for all)")
    serve.add_argument("--port", type=int, help="port to listen on (default 8000)")
    serve.add_argument(
        "--max-body-size",
        type=int,
        metavar="BYTES",
        help="largest request body accepted, larger ones get 413 (default 32 MiB)",
    )
    serve.add_argument("--log-level", choices=["debug", "info", "warning", "error"], help="default info")
    serve.add_argument(
        "--drain-seconds",
        type=float,
        metavar="S",
        help="on SIGTERM, how long in-flight requests may take to finish (default 30)",
    )
    serve.add_argument(
        "--api-key-file",
        metavar="FILE",
        help="require 'Authorization: Bearer <key>' with a key from FILE (one per line); default: "
        "$CREDENTIALS_DIRECTORY/api-keys under systemd, else no keys",
    )
    serve.add_argument(
        "--metrics-open",
        action="store_true",
        default=None,
        help="serve /metrics without an API key",
    )

    check = commands.add_parser("check", help="validate graph files, models and devices without serving")
    check.add_argument("--graphs", type=Path, required=True, metavar="DIR")

    demo = commands.add_parser("demo", help="build the offline demo models into DIR/models and DIR/graphs")
    demo.add_argument("dir", type=Path, metavar="DIR")
    demo.add_argument(
        "--models",
        default="demo-chat",
        help="comma-separated demo models to build (default demo-chat; also: demo-bench)",
    )
    demo.add_argument("--force", action="store_true", help="rebuild even when the output is current")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, (getattr(args, "log_level", None) or "info").upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stdout,
    )
    try:
        if args.command == "serve":
            from appliance.server import serve

            flags = {name: value for name, value in vars(args).items() if name not in ("command", "config")}
            return serve(load_settings(flags, config=args.config))
        if args.command == "check":
            from appliance.server import prepare

            for graph in prepare(args.graphs):
                print(f"ok  {graph.name:<24} {graph.device:<8} {graph.model_dir}  ({graph.source})")
            return 0
        if args.command == "demo":
            from appliance.demo import build_demo

            names = [name.strip() for name in args.models.split(",") if name.strip()]
            for path in build_demo(args.dir, names, force=args.force):
                print(f"graph: {path}")
            return 0
    except ConfigError as exc:
        print(f"appliance: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"appliance: {exc}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
