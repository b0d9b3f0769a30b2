"""The import direction docs/architecture.md draws, checked with `ast` over every module:

    cli -> commands/tools -> server -> api -> dialects -> service -> runtime -> engine -> graphfiles -> errors
                                                    \\-> protocol, media, grammar (beside service)

No module imports a package to its left. Modules in the same place may import each other, except
that the core never imports the tools, and that inside `engine` the server process's side
(`engine/host/`) and the engine process's (`engine/worker/`) import only themselves and the wire
between them (`engine/messages.py`, `engine/vision.py`), the spawn target aside.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "appliance"

# Each top-level package or module of `appliance`, by its place in the chain (a module may import
# only what has the same or a larger number). The small modules the drawing leaves out sit where
# their users need them: `connections` under `server` (its only user), `logs`, `metrics` and
# `settings` just above `errors` (the engine logs and counts; they import `errors` at most),
# `cpu_affinity` with them (the server pins itself, an engine process takes its CPUs back),
# `memory_budget` too (settings check it, graphfiles write sizes with it), `store` (the database:
# the api and the dialects keep their state in it, and it imports `errors` only), and
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
    "batches": 3.2,  # the Batch API: runs its lines through the entry
    "entry": 3.25,  # the transport-free way in: the api and the batch runner call it
    "dialects": 3.5,
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
    "cpu_affinity": 7.5,
    "cpu_features": 7.5,
    "memory_budget": 7.5,
    "store": 7.5,
    "errors": 8,
    "": 8,  # appliance/__init__.py
}

# Imports against the direction that exist today, each with its reason: new ones fail the test.
KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()


def _package_of(module: str) -> str:
    """`appliance.engine.host.client` -> `engine`; `appliance` -> ``."""
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
            # `from package import module` imports the module; any other name comes from __init__.
            found += [
                f"{module}.{alias.name}" if _is_module(f"{module}.{alias.name}") else module for alias in node.names
            ]
    return [name for name in found if name == "appliance" or name.startswith("appliance.")]


def _is_module(name: str) -> bool:
    """`appliance.service.chat` names a module or package of ours."""
    path = PACKAGE.joinpath(*name.split(".")[1:])
    return name.startswith("appliance.") and (path.is_dir() or path.with_suffix(".py").is_file())


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
    assert imported == ["appliance.api.app", "appliance.server", "appliance", "appliance.service.chat"]
    assert [name for name in imported if PLACE[_package_of(name)] < _place("service/x.py")] == imported[:2]


def _module_file(name: str, modules: dict[str, list[str]]) -> str | None:
    """`appliance.service.chat` -> `service/chat.py` (or its package's `__init__.py`)."""
    path = "/".join(name.split(".")[1:])
    for candidate in (f"{path}.py", f"{path}/__init__.py" if path else "__init__.py"):
        if candidate in modules:
            return candidate
    return None


def test_no_modules_import_each_other_in_a_circle() -> None:
    """Any import, at module level or inside a function: a circle means two modules are one."""
    _import_graph(_imports_by_module()).prepare()  # raises CycleError naming the circle


def _import_graph(modules: dict[str, list[str]]) -> graphlib.TopologicalSorter:
    return graphlib.TopologicalSorter(
        {
            relative: {found for name in imported if (found := _module_file(name, modules)) and found != relative}
            for relative, imported in modules.items()
        }
    )


def test_the_circle_check_sees_a_circle() -> None:
    modules = {"a.py": ["appliance.b"], "b.py": ["appliance.a"]}
    with pytest.raises(graphlib.CycleError):
        _import_graph(modules).prepare()


EDGE = ("api/gate.py", "api/errors.py", "api/openapi.py", "api/profiles.py", "api/csrf.py")
"""The HTTP edge: it reads the dialects' profiles (`api/profiles.py`) and names no dialect."""


def test_the_edge_names_no_dialect() -> None:
    modules = _imports_by_module()
    offenders = [
        f"{relative}: {name}"
        for relative in EDGE
        for name in modules[relative]
        if name.startswith(("appliance.dialects", "appliance.protocol")) or name.endswith("_routes")
    ]
    assert not offenders, "a dialect declares itself in its profile (api/profiles.py), read by the edge"


ENGINE_WIRE = ("appliance.engine.messages", "appliance.engine.vision")
"""What both engine sides share: the frames on the pipe, the image tags both write and check."""
SPAWN_TARGET = ("engine/host/engine_process.py", "appliance.engine.worker.process")
"""The one crossing: the server names the engine process's entry point (`main`) to spawn it."""


def _engine_side(module: str) -> str | None:
    """`appliance.engine.host.client` -> "host"; `...worker.batching` -> "worker"; the wire ->
    "wire"; `appliance.engine` (the package's face, which exports the server side) -> "face"."""
    if module in ENGINE_WIRE:
        return "wire"
    for side in ("host", "worker"):
        if module == f"appliance.engine.{side}" or module.startswith(f"appliance.engine.{side}."):
            return side
    return "face" if module == "appliance.engine" else None


def _engine_crossings(modules: dict[str, list[str]]) -> set[tuple[str, str]]:
    """Imports from one engine side into the other (or from the wire into either): the server
    side (`engine/host/`) and the engine process's (`engine/worker/`) may import only themselves
    and the wire."""
    allowed = {"host": {"host", "wire"}, "worker": {"worker", "wire"}, "wire": {"wire"}}
    crossings = set()
    for relative, imported in modules.items():
        side = _engine_side("appliance." + relative.removesuffix(".py").removesuffix("/__init__").replace("/", "."))
        if side not in allowed:
            continue
        for name in imported:
            found = _engine_side(name)
            if found is not None and found not in allowed[side]:
                crossings.add((relative, name))
    return crossings


def test_the_engine_sides_never_import_each_other() -> None:
    """The server process's side of the engine and the engine process's side share only the wire,
    so the split (issue 43) stays: nothing of one side loads in the other's process by accident."""
    modules = _imports_by_module()
    assert any(relative.startswith("engine/host/") for relative in modules)
    assert any(relative.startswith("engine/worker/") for relative in modules)
    assert _engine_crossings(modules) == {SPAWN_TARGET}


def test_the_engine_check_sees_a_crossing() -> None:
    modules = {
        "engine/worker/batching.py": ["appliance.engine.messages", "appliance.engine.host.streams"],
        "engine/worker/preparer.py": ["appliance.engine", "appliance.engine.worker.prompts"],
        "engine/host/client.py": ["appliance.engine.vision", "appliance.engine.worker.outputs", "appliance.errors"],
        "engine/messages.py": ["appliance.engine.host.streams"],
        "engine/__init__.py": ["appliance.engine.host.client"],
    }
    assert _engine_crossings(modules) == {
        ("engine/worker/batching.py", "appliance.engine.host.streams"),
        ("engine/worker/preparer.py", "appliance.engine"),
        ("engine/host/client.py", "appliance.engine.worker.outputs"),
        ("engine/messages.py", "appliance.engine.host.streams"),
    }
