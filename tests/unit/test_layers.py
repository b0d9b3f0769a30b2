"""The import direction docs/architecture.md draws, checked with `ast` over every module:

    cli -> commands/tools -> server -> api -> service -> runtime -> engine -> graphfiles -> errors
                                        \\-> protocol, media, grammar (beside service)

No module imports a package to its left. Modules in the same place may import each other, except
that the core never imports the tools.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "appliance"

# Each top-level package or module of `appliance`, by its place in the chain (a module may import
# only what has the same or a larger number). The small modules the drawing leaves out sit where
# their users need them: `connections` under `server` (its only user), `logs`, `metrics` and
# `settings` just above `errors` (the engine logs and counts; they import `errors` at most), and
# the package root (`__version__`) with `errors`. Protocol, media and grammar are used by the
# service and use none of it, hence between it and the runtime.
PLACE = {
    "__main__": 0,
    "cli": 0,
    "commands": 1,
    "tools": 1,
    "server": 2,
    "connections": 2.5,
    "api": 3,
    "playground": 3,  # the api's static files
    "service": 4,
    "protocol": 4.5,
    "media": 4.5,
    "grammar": 4.5,
    "runtime": 5,
    "engine": 6,
    "graphfiles": 7,
    "logs": 7.5,
    "metrics": 7.5,
    "settings": 7.5,
    "errors": 8,
    "": 8,  # appliance/__init__.py
}

# Imports against the direction that exist today, each with its reason: new ones fail the test.
KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()


def _package_of(module: str) -> str:
    """`appliance.engine.client` -> `engine`; `appliance` -> ``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imported(path: Path, source: str) -> list[str]:
    """The `appliance` modules the file at `path` imports (relative imports resolved;
    `from appliance import x` as `appliance.x`)."""
    here = ["appliance", *path.relative_to(PACKAGE).parent.parts]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            if module == "appliance":  # a module of the package, or a name in its __init__
                found += [f"appliance.{alias.name}" if _is_module(alias.name) else "appliance" for alias in node.names]
            else:
                found.append(module)
    return [name for name in found if name == "appliance" or name.startswith("appliance.")]


def _is_module(name: str) -> bool:
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()


def _imports_by_module() -> dict[str, list[str]]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        modules[relative] = _imported(path, path.read_text(encoding="utf-8"))
    assert len(modules) > 50 and any(modules.values())  # the walk found the package and its imports
    return modules


def _place(relative: str) -> float:
    top = relative.split("/")[0].removesuffix(".py")
    return PLACE["" if top == "__init__" else top]


def test_every_package_has_a_place() -> None:
    unplaced = {relative.split("/")[0] for relative in _imports_by_module()} - {
        *PLACE,
        *(f"{name}.py" for name in PLACE),
        "__init__.py",
    }
    assert not unplaced, "add them to PLACE (and to docs/architecture.md's drawing)"


def test_no_module_imports_a_package_to_its_left() -> None:
    against: set[tuple[str, str]] = set()
    for relative, imported in _imports_by_module().items():
        for name in imported:
            if PLACE[_package_of(name)] < _place(relative):
                against.add((relative, name))
    assert against - KNOWN_EXCEPTIONS == set(), "imports against docs/architecture.md's direction"
    assert KNOWN_EXCEPTIONS - against == set(), "fixed: drop them from KNOWN_EXCEPTIONS"


def test_the_core_never_imports_the_tools() -> None:
    offenders = [
        f"{relative}: {name}"
        for relative, imported in _imports_by_module().items()
        # cli.py registers the tools
        if not relative.startswith("tools/") and relative != "cli.py"
        for name in imported
        if name.startswith("appliance.tools")
    ]
    assert not offenders


def test_the_checks_see_a_wrong_import() -> None:
    """Relative imports are resolved: a service module importing the api or the server is found."""
    source = "from ..api import app\nfrom appliance import server, __version__\nfrom . import chat\nimport json\n"
    imported = _imported(PACKAGE / "service" / "x.py", source)
    assert imported == ["appliance.api", "appliance.server", "appliance", "appliance.service"]
    assert [name for name in imported if PLACE[_package_of(name)] < _place("service/x.py")] == imported[:2]
