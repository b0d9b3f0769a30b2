"""What the dialects share in naming a chat request's fields as their own requests name them
(`service.chat.FieldNames`): a table of renamed top-level fields, and the shape of the message
and tool-call paths the chat plan writes."""

from __future__ import annotations

import re

__all__ = ["MESSAGE", "TOOL_CALL", "renamed", "reindexed"]

MESSAGE = re.compile(r"^messages\[(\d+)\](.*)$")
"""`messages[k]...`: the message index and the rest of the path."""
TOOL_CALL = re.compile(r"^\.tool_calls\[(\d+)\](\.function\.arguments)?")
"""`.tool_calls[m]` (and `.function.arguments`) after a message's path."""
_TOOL = re.compile(r"^tools\[(\d+)\]")


def reindexed(param: str | None, indices: list[int]) -> str | None:
    """`param` with a leading `tools[k]` written `tools[indices[k]]`: a tool of a list some tools
    were taken out of, named by its index in the list they were taken from."""
    found = _TOOL.match(param) if param is not None else None
    if found is None or int(found.group(1)) >= len(indices):
        return param
    return f"tools[{indices[int(found.group(1))]}]{param[found.end() :]}"  # type: ignore[index]


def renamed(param: str, table: list[tuple[re.Pattern[str], str]]) -> str | None:
    """`param` as the first matching entry of `table` renames it; None if none matches."""
    for pattern, replacement in table:
        if pattern.match(param):
            return pattern.sub(replacement, param, count=1)
    return None
