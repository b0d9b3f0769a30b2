"""The server process never loads OpenVINO on import: only the engine processes need it (issue 30). It
costs the server about a second at start-up and memory it never uses; the client, the messages and
the whole HTTP side import without it."""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

import pytest

import appliance.engine

HEAVY = ("openvino", "openvino_genai")


@pytest.mark.parametrize(
    "module",
    [
        "appliance.engine",
        "appliance.engine.messages",
        "appliance.service.chat",
        "appliance.api.app",
        "appliance.server",
    ],
)
def test_the_server_side_imports_without_openvino(module: str) -> None:
    code = f"import sys, {module}; print(sorted({{m.split('.')[0] for m in sys.modules}}))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert [name for name in HEAVY if f"'{name}'" in loaded] == []


def test_the_engine_modules_import_each_other_in_one_direction() -> None:
    package = Path(appliance.engine.__file__).parent
    imports: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        found = set()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:  # module level: what loads on import
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("appliance.engine."):
                found.add(node.module.removeprefix("appliance.engine."))
            if isinstance(node, ast.ImportFrom) and node.module == "appliance.engine":
                found |= {alias.name for alias in node.names}
        imports[".".join(path.relative_to(package).with_suffix("").parts)] = found
    order = list(graphlib.TopologicalSorter(imports).static_order())  # raises CycleError on a circle
    assert {"host.client", "worker.process", "messages"} <= set(order)
