"""What the dialects share in naming a chat request's fields as their own requests name them
(`service.chat.FieldNames`): a table of renamed top-level fields, and the shape of the message
and tool-call paths the chat plan writes."""

from __future__ import annotations

import re

__all__ = ["MESSAGE", "TOOL_CALL", "renamed"]

MESSAGE = re.compile(r"^messages\[(\d+)\](.*)$")
"""`messages[k]...`: the message index and the rest of the path."""
TOOL_CALL = re.compile(r"^\.tool_calls\[(\d+)\](\.function\.arguments)?")
"""`.tool_calls[m]` (and `.function.arguments`) after a message's path."""


def renamed(param: str, table: list[tuple[re.Pattern[str], str]]) -> str | None:
    """`param` as the first matching entry of `table` renames it; None if none matches."""
    for pattern, replacement in table:
        if pattern.match(param):
            return pattern.sub(replacement, param, count=1)
    return None
