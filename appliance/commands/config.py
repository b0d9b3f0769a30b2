"""`appliance config`: the settings `serve` would run with, and where each value came from.

It takes `serve`'s arguments, so `appliance config --port 9000` answers "what would `appliance
serve --port 9000` do here?". The output is TOML (a settings file to start from), each line
commented with its source: `default`, `file PATH`, `environment APPLIANCE_NAME`, `flag --name`
or `argument GRAPHS` (a password in `store_url` shown as `***`); then, as a `# WARNING:` comment, the warning `serve` would print when it
listens beyond loopback without API keys.
"""

from __future__ import annotations

import argparse
import json
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from appliance.commands.serve import add_settings_arguments, resolved_settings
from appliance.settings import exposure_warning, key_file

__all__ = ["register", "run", "toml_value", "without_password"]


def register(subcommands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `config` with `serve`'s arguments."""
    parser = subcommands.add_parser(
        "config",
        help="print the settings serve would run with, and where each came from",
        description="Print the effective settings of `appliance serve` given the same arguments, as TOML, "
        "each value commented with where it came from (default, settings file, environment variable, flag). "
        "A mistake in any of them exits 2, as `serve` would.",
    )
    add_settings_arguments(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    """Print one `key = value  # source` line per setting."""
    settings, sources = resolved_settings(args)
    shown = {name: getattr(settings, name) for name in sources}
    shown["store_url"] = without_password(settings.store_url)
    lines = [(f"{name} = {toml_value(value)}", sources[name]) for name, value in shown.items()]
    width = max(len(line) for line, _ in lines)
    for line, source in lines:
        print(f"{line:<{width}}  # {source}")
    if warning := exposure_warning(settings, has_api_keys=key_file(settings.api_key_file, "api-keys") is not None):
        print(f"# WARNING: {warning}")
    return 0


def without_password(url: str) -> str:
    """`postgresql://user:secret@host/db` -> `postgresql://user:***@host/db`: printed settings are
    pasted into tickets and chats."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = f"{parts.username}:***@" if parts.username else ":***@"
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=user + host))


def toml_value(value: Any) -> str:
    """A setting's value as TOML writes it (strings and lists as in JSON, which TOML reads alike)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return json.dumps(list(value))
    return json.dumps(value)
