"""Tools for models whose chat template ignores them: the appliance writes them into the prompt.

Many chat templates (SmolLM2's among them) never read `tools`, so the model would not know what it
may call, and OpenVINO GenAI's own fallback writes a `{"tool_calls": [...]}` syntax that no parser
here reads. For such a model (read from its files with its graph: `EngineClient.tools`) the tool list
and the call format of the model's parser go into the system message, in this wording (as
llama.cpp's generic format and Ollama do):

    You can call the following tools. Each is given as JSON: its name, what it does, and the JSON
    Schema of its arguments.
    {"name": "get_weather", "description": "...", "parameters": {...}}

    To call a tool, answer with the call alone, written exactly like this example:
    <tool_call>
    {"name": "tool_name", "arguments": {"argument": "value"}}
    </tool_call>

appended to the request's first system message (after a blank line) or as a new first system
message. When the template does not render `tool_calls` either, earlier assistant turns' calls
are written into their text in the same format. Tool results stay `tool` messages, as the
template (or OpenVINO GenAI's fallback for it) renders them, without their `tool_call_id` (the
calls written as text carry none): measured on SmolLM2-135M, results
rewritten as `<tool_response>` or plain user text made the Agents SDK's loop call its tool again
and again. `/tokenize` renders the same prompt.
"""

from __future__ import annotations

import json
from typing import Any

from appliance.engine.host.templates import ToolFormat
from appliance.service.tool_parsers import tool_parser

__all__ = ["TOOLS_INTRO", "shown_tools"]

TOOLS_INTRO = (
    "You can call the following tools. Each is given as JSON: its name, what it does, and the JSON "
    "Schema of its arguments."
)
CALL_INTRO = "To call a tool, answer with the call alone, written exactly like this example:"
_EXAMPLE = [("tool_name", {"argument": "value"})]


def shown_tools(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, format_: ToolFormat
) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """(messages, tools for the template): unchanged where the template renders tools and calls,
    else with the tools in the system message and earlier calls written as text."""
    parser = tool_parser(format_.parser)
    if not format_.calls_from_template:
        messages = [_calls_as_text(message, parser) for message in messages]
    if not tools or format_.from_template:
        return messages, tools
    listed = "\n".join(json.dumps(tool["function"], ensure_ascii=False) for tool in tools)
    text = f"{TOOLS_INTRO}\n{listed}\n\n{CALL_INTRO}\n{parser.write_calls(_EXAMPLE)}"
    if messages and messages[0]["role"] == "system":
        first = messages[0]
        return [{**first, "content": f"{first['content']}\n\n{text}"}, *messages[1:]], None
    return [{"role": "system", "content": text}, *messages], None


def _calls_as_text(message: dict[str, Any], parser: Any) -> dict[str, Any]:
    if message["role"] == "tool":
        # The calls written above carry no ids, so a result's id tells the model nothing; left in,
        # a client's random ids (`call_x7Qp...`) would make the same conversation a different
        # prompt each time, and a greedy answer with it.
        return {key: value for key, value in message.items() if key != "tool_call_id"}
    calls = message.get("tool_calls")
    if not calls:
        return message
    written = parser.write_calls([(call["function"]["name"], call["function"]["arguments"]) for call in calls])
    content = message.get("content") or ""
    rest = {key: value for key, value in message.items() if key != "tool_calls"}
    return {**rest, "content": f"{content}\n{written}" if content else written}
