"""The `appliance` command: one subcommand per core command and per tool, dispatched here.

The core commands (`appliance.commands`: serve, check, devices) and the tools (`appliance.tools`:
demo, export, bench, soak) each register their subcommand and run it. This module only builds the
parser, sets up logging, and turns configuration mistakes into exit code 2.
"""

from __future__ import annotations

import argparse
import logging
import sys

from appliance import __version__
from appliance.commands import COMMANDS
from appliance.errors import ConfigError
from appliance.tools import TOOLS

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="appliance", description="OpenVINO GenAI edge-serving appliance (OpenAI-compatible API)."
    )
    parser.add_argument("--version", action="version", version=f"appliance {__version__}")
    subcommands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (*COMMANDS, *TOOLS):
        command.register(subcommands).set_defaults(run=command.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run `appliance ARGV`; returns the exit code."""
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, (getattr(args, "log_level", None) or "info").upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stdout,
    )
    # httpx logs every request at INFO (bench and soak send thousands).
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        return args.run(args)
    except (ConfigError, ValueError) as exc:
        print(f"appliance: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
