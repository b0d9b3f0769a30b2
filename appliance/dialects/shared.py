"""What the dialects whose wire has no `param` or no JSON-text arguments share: an error message led
by the field it is about, and a tool call's arguments as the object those wires carry."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["error_message", "tool_input"]


def error_message(message: str, param: str | None) -> str:
    """`message`, led by the field it is about (`max_tokens: Field required.`), for error bodies
    that have no separate `param` (Anthropic's, Ollama's)."""
    if not param or message.startswith(f"{param}:"):
        return message
    # The decoder's messages name the field themselves; here the field leads instead.
    message = message.removeprefix(f"Invalid value for '{param}': ")
    message = "Field required." if message == f"Missing required parameter: '{param}'." else message
    return f"{param}: {message}"


def tool_input(arguments: str) -> dict[str, Any]:
    """A call's arguments (JSON text) as an object. A parser may pass on arguments that are not a
    JSON object (an unforced call the model wrote badly): they are kept whole, under `arguments`."""
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"arguments": arguments}
