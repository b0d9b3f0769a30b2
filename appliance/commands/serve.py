"""`appliance serve`: its flags are generated from `Settings`, so names, defaults and help agree.

Each field of `appliance.settings.Settings` becomes `--field-name`, with the field's description as
help and its default appended; a numeric one reads its value within the field's bounds
(`numbers.of_meta`). Every flag defaults to None ("not given"), which leaves the value to
`load_settings`: flags > environment > settings file > defaults.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import msgspec

from appliance.commands.numbers import of_meta
from appliance.errors import ConfigError
from appliance.logs import configure_logging
from appliance.settings import DEFAULT_CONFIG, Settings, comma_list, resolve_settings

__all__ = ["add_settings_arguments", "register", "resolved_settings", "run", "settings_from"]

_MIB = 1024 * 1024

CANNOT_LISTEN = 3
"""`serve`'s exit code when it cannot listen (port in use, not this machine's address, no permission)."""

# Flag groups of `serve --help`: title -> (text under the title, fields); other fields are "options".
_GROUPS: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "LMI / SageMaker /invocations": (None, ("invocations_model", "lmi_output_formatter", "tgi_compat")),
    "chat images": (
        "Vision graphs take images as base64 data URLs always; as http(s) URLs and local paths only when enabled here.",
        (
            "allowed_media_domains",
            "allowed_media_networks",
            "allowed_local_media_path",
            "max_image_bytes",
            "media_fetch_timeout",
        ),
    ),
}


def register(subcommands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `serve` with a flag for each settings field."""
    parser = subcommands.add_parser(
        "serve",
        help="serve every graph file in a directory (default graphs/), or one graph file",
        description="Serve GRAPHS: one graph file, or every graph file in a directory (default graphs/; when "
        "it does not exist, exit 2 saying how to make one; an empty directory serves no models until graph "
        "files are added and the server reloaded). Each setting can also come from APPLIANCE_<NAME> "
        "environment variables or a TOML settings file (flags win; `appliance config` shows the result).",
    )
    add_settings_arguments(parser)
    return parser


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    """GRAPHS, --config and a flag per settings field: `serve`'s arguments, which `config` shares."""
    parser.add_argument(
        "target", nargs="?", metavar="GRAPHS", help="a graph file or a directory of them: the same as --graphs"
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help=f"TOML settings file (default {DEFAULT_CONFIG} when it exists)",
    )
    group_of: dict[str, argparse._ActionsContainer] = {}
    for title, (description, names) in _GROUPS.items():
        group = parser.add_argument_group(title, description)
        group_of.update(dict.fromkeys(names, group))
    unknown = set(group_of) - set(Settings.__struct_fields__)
    if unknown:
        raise TypeError(f"serve flag groups name fields Settings does not have: {', '.join(sorted(unknown))}")
    for field in msgspec.structs.fields(Settings):
        _add_flag(group_of.get(field.name, parser), field)


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM; the server's exit code (ConfigError, exit 2, when the graphs do not
    exist; 3 when it cannot listen)."""
    settings = settings_from(args)
    configure_logging(settings.log_level, settings.log_format)
    _check_something_to_serve(Path(settings.graphs))
    from appliance.server import CannotListen, serve

    try:
        return serve(settings)
    except CannotListen as exc:
        print(f"appliance: {exc}", file=sys.stderr)
        return CANNOT_LISTEN


def settings_from(args: argparse.Namespace) -> Settings:
    """The settings `serve` runs with: the flags given over the environment, file and defaults."""
    return resolved_settings(args)[0]


def resolved_settings(args: argparse.Namespace) -> tuple[Settings, dict[str, str]]:
    """`settings_from`, and where each value came from (`resolve_settings`)."""
    flags = {name: getattr(args, name) for name in Settings.__struct_fields__}
    if args.target is not None:
        if args.graphs is not None:
            raise ConfigError(f"give the graphs once: {args.target} and --graphs {args.graphs}")
        flags["graphs"] = args.target
    settings, sources = resolve_settings(flags, config=args.config)
    if args.target is not None:
        sources["graphs"] = "argument GRAPHS"
    return settings, sources


def _check_something_to_serve(graphs: Path) -> None:
    """ConfigError saying how to get graph files when `graphs` does not exist: checked before the
    server (and OpenVINO) is imported, so a first `appliance serve` in the wrong place answers at
    once. An empty directory is served (no models until a reload)."""
    if graphs.exists():
        return
    demo = f"appliance demo {graphs.parent}" if graphs.name == "graphs" else "appliance demo DIR"
    raise ConfigError(
        f"nothing to serve: {graphs}/ does not exist. Build the demo models with `{demo}` (it writes graphs/ "
        "and models/ there), or write a graph file for your model (docs/models.md) and pass it or its "
        "directory: appliance serve GRAPHS"
    )


def _add_flag(container: argparse._ActionsContainer, field: msgspec.structs.FieldInfo) -> None:
    kind, metas = _unwrap(field.type)
    # argparse formats help with %: a literal one ("80%") is written %%.
    description = " ".join(meta.description for meta in metas if meta.description).replace("%", "%%")
    metavar = next((meta.extra["metavar"] for meta in metas if meta.extra and "metavar" in meta.extra), None)
    options: dict[str, Any] = {"default": None}
    if kind is bool:
        options["action"] = "store_true"
    elif get_origin(kind) is Literal:
        options["choices"] = list(get_args(kind))
    elif get_origin(kind) is tuple:
        options.update(type=comma_list, metavar=metavar)
        description = f"comma-separated {description}"
    elif kind in (int, float):
        bounds = {
            name: value
            for meta in metas
            for name in ("ge", "gt", "le", "lt")
            if (value := getattr(meta, name)) is not None
        }
        try:
            options.update(type=of_meta(kind, **bounds), metavar=metavar)
        except ValueError as exc:
            raise TypeError(f"Settings.{field.name}: {exc}") from None
    elif kind is str:
        options.update(type=kind, metavar=metavar)
    else:
        raise TypeError(f"Settings.{field.name}: no command-line flag for type {kind!r}")
    shown = _shown_default(field.default, metavar)
    options["help"] = f"{description} (default {shown})" if shown else description
    container.add_argument(f"--{field.name.replace('_', '-')}", **options)


def _unwrap(annotation: Any) -> tuple[Any, list[msgspec.Meta]]:
    if get_origin(annotation) is Annotated:
        base, *extras = get_args(annotation)
        return base, [extra for extra in extras if isinstance(extra, msgspec.Meta)]
    return annotation, []


def _shown_default(value: Any, metavar: str | None) -> str | None:
    """The default as help shows it; None for an empty one (the description says what it means)."""
    if isinstance(value, bool) or value in ("", ()):
        return None
    if metavar == "BYTES" and value % _MIB == 0:
        return f"{value // _MIB} MiB"
    return f"{value:g}" if isinstance(value, float) else str(value)
