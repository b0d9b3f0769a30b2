"""What a chat request's tools mean, decided once by one rule.

Tools are in play when the request sends some and `tool_choice` is not "none": then the chat
template shows them (or, where it ignores them, the system message: `tool_prompt`), the model's
tool parser reads calls out of the answer (special tokens kept, as
call markers often are ones), `required` or a named function makes the output grammar force a
call, and "auto" holds each call the model starts to the tools' schemas (`constraints.auto_constraint`).
With "none" the template does not show the tools, so the model cannot call one. The tool
calls of earlier assistant turns are rendered here too, as chat templates expect them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from appliance.errors import InvalidRequest
from appliance.graphfiles import Graph
from appliance.protocol.openai import ChatCompletionRequest, NamedToolChoice, Tool, ToolCall

__all__ = ["NO_TOOLS", "ToolPlan", "template_tool_calls"]


@dataclass(frozen=True)
class ToolPlan:
    """The tools of one request: shown to the template, parsed from the output, forced or not."""

    tools: tuple[Tool, ...] = ()
    """The tools in play (none when the request sends none or tool_choice is "none")."""
    parser: str | None = None
    """The graph's tool parser, when tools are in play."""
    forced: bool = False
    """tool_choice `required` or a named function: the output grammar forces a call."""
    forced_name: str | None = None
    max_calls: int = 1
    """Calls one constrained answer may hold: 1 for a named function or `parallel_tool_calls:
    false`, else the graph's `limits.max_parallel_tool_calls`."""

    @classmethod
    def of(cls, request: ChatCompletionRequest, graph: Graph, parser: str) -> ToolPlan:
        """The plan of `request` on `graph`, whose model's calls `parser` reads (the graph's
        `tool_parser`, else the format its chat template teaches, else the generic one: see
        `EngineClient.tools`); a 400 when tools and tool_choice do not fit together."""
        choice = request.tool_choice
        if not request.tools:
            if choice == "required" or isinstance(choice, NamedToolChoice):
                raise InvalidRequest("tool_choice requires tools.", param="tool_choice")
            return cls()
        names = [tool.function.name for tool in request.tools]
        if len(set(names)) != len(names):
            raise InvalidRequest("Each tool needs its own function name.", param="tools")
        if isinstance(choice, NamedToolChoice) and choice.function.name not in names:
            raise InvalidRequest(
                f"tool_choice names the function '{choice.function.name}', which is not among the tools.",
                param="tool_choice.function.name",
            )
        if choice == "none":
            return cls()
        return cls(
            tools=tuple(request.tools),
            parser=parser,
            forced=choice == "required" or isinstance(choice, NamedToolChoice),
            forced_name=choice.function.name if isinstance(choice, NamedToolChoice) else None,
            max_calls=graph.limits.max_parallel_tool_calls
            if request.parallel_tool_calls and not isinstance(choice, NamedToolChoice)
            else 1,
        )

    @classmethod
    def shown(cls, tools: list[Tool] | None) -> ToolPlan:
        """Tools shown to the template only (the tokenizer route: nothing is generated)."""
        return cls(tools=tuple(tools or ()))

    def template_tools(self) -> list[dict[str, Any]] | None:
        """The tools as chat templates expect them (OpenAI's shape, unset fields left out)."""
        return [_template_tool(tool) for tool in self.tools] if self.tools else None


def _template_tool(tool: Tool) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.function.name}
    if tool.function.description is not None:
        function["description"] = tool.function.description
    function["parameters"] = tool.function.parameters or {"type": "object", "properties": {}}
    return {"type": "function", "function": function}


NO_TOOLS = ToolPlan()
"""A request without tools."""


def template_tool_calls(calls: list[ToolCall], where: str) -> list[dict[str, Any]]:
    """An assistant message's tool calls for the chat template.

    Templates written for Hugging Face (Qwen, Llama, Mistral) render `arguments` as an object, so
    OpenAI's JSON text is parsed here; text that is not a JSON object is a 400.
    """
    rendered = []
    for index, call in enumerate(calls):
        param = f"{where}.tool_calls[{index}].function.arguments"
        try:
            arguments = json.loads(call.function.arguments)
        except RecursionError:
            raise InvalidRequest("Tool call arguments are nested too deeply.", param=param) from None
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            raise InvalidRequest("Tool call arguments must be a JSON object (as text).", param=param)
        rendered.append(
            {"id": call.id, "type": "function", "function": {"name": call.function.name, "arguments": arguments}}
        )
    return rendered
