"""docs/api.md's table of OpenAI fields, read back for the tests that hold the server to it."""

from __future__ import annotations

import re
from pathlib import Path

APIS = ("chat", "completions", "responses")
_DOCS = Path(__file__).resolve().parent.parent / "docs" / "api.md"


def documented_fields() -> dict[str, dict[str, str]]:
    """field -> {api: "honoured" | "accepted" | "refused"} for the APIs that have it."""
    text = _DOCS.read_text()
    table = text.split("## OpenAI fields: honoured, accepted, refused", 1)[1].split("\n### ", 1)[0]
    rows: dict[str, dict[str, str]] = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) != 5 or not cells[0].startswith("`"):
            continue
        groups = {api: group for api, group in zip(APIS, cells[1:4]) if group != "—"}
        for name in re.findall(r"`([^`]+)`", cells[0]):
            rows[name] = groups
    return rows
