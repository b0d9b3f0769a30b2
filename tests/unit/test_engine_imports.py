"""The server process never loads OpenVINO: only the engine processes need it (issue 30). Loading it
costs the server about a second at start-up and memory it never uses; the client, the messages and
the whole HTTP side import without it."""

from __future__ import annotations

import subprocess
import sys

import pytest

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
