"""The `appliance` command: one subcommand per core command and per tool, dispatched here.

The core commands (`appliance.commands`: serve, config, check, devices) and the tools
(`appliance.tools`: demo, export, bench, soak) each register their subcommand and run it. This
module only builds the parser, sets up logging, and turns configuration mistakes into exit code 2,
each told in one line (argparse's own refusals too).

No parser accepts abbreviated flags: argparse would otherwise read `serve --model X` as
`--model-cache-dir X` and `serve --api-key secret` as `--api-key-file secret`, silently.
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from typing import Any, NoReturn

from appliance import __version__
from appliance.commands import COMMANDS
from appliance.errors import ConfigError
from appliance.logs import configure_logging
from appliance.tools import TOOLS

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that never accepts a prefix of a flag; `add_subparsers` makes its
    subcommands' parsers of the same class, so the rule holds for every subcommand."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        # One line, as every other mistake gets (`appliance: ...`): serve's usage alone runs to
        # dozens of lines, above the one that says what was wrong.
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _versions() -> str:
    """`appliance X (openvino Y, openvino-genai Z)`, read from the installed packages' metadata
    (importing OpenVINO would take seconds)."""
    installed = []
    for package in ("openvino", "openvino-genai"):
        try:
            installed.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            installed.append(f"{package} not installed")
    return f"appliance {__version__} ({', '.join(installed)})"


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="appliance", description="OpenVINO GenAI edge-serving appliance (OpenAI-compatible API).")
    parser.add_argument("--version", action="version", version=_versions())
    subcommands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (*COMMANDS, *TOOLS):
        command.register(subcommands).set_defaults(run=command.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run `appliance ARGV`; returns the exit code (2, with a one-line message, for a bad flag or
    value: numeric flags are read by `commands.numbers`)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exited:  # argparse's refusal (or --help, --version): its message is out
        return exited.code if isinstance(exited.code, int) else 0
    # `serve` configures logging again once its settings (log_level, log_format) are known.
    configure_logging(getattr(args, "log_level", None) or "info", getattr(args, "log_format", None) or "text")
    try:
        return args.run(args)
    except (ConfigError, ValueError) as exc:
        print(f"appliance: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
