"""How a model gets its tools: the parser reading its calls, and who shows the tools to it.

Many chat templates (SmolLM2's among them) never look at `tools`: the model would not learn what it
may call. OpenVINO GenAI then writes its own tool list and a `{"tool_calls": [...]}` syntax into a
system message, a format no tool parser here reads. What a template does with tools is read from
the model's files when its graph is validated (`graphfiles.chat_template`, in `Graph.facts`), so
the first request to a model that has not loaded is planned as every later one.
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.graphfiles import Graph
from appliance.graphfiles.chat_template import TemplateTools

__all__ = ["GENERIC_TOOL_PARSER", "ToolFormat"]


GENERIC_TOOL_PARSER = "hermes"
"""The call format for a model whose graph names no tool_parser and whose chat template teaches
none: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, shown in the system message."""


@dataclass(frozen=True)
class ToolFormat:
    """How a model gets its tools: the parser reading its calls, and whether its chat template
    shows the tools (and earlier calls) itself or the service writes them into the prompt."""

    parser: str
    from_template: bool
    """The template renders `tools`; else the service shows them in a system message."""
    calls_from_template: bool = True
    """The template renders assistant messages' `tool_calls`; else the service writes them as text."""
    source: str = "graph file"
    """Where `parser` comes from: "graph file", "chat template" or "generic"."""

    @classmethod
    def of(cls, graph: Graph, template: TemplateTools) -> ToolFormat:
        """The format for `graph`, given what its chat template does with tools."""
        if graph.tool_parser:
            parser, source = graph.tool_parser, "graph file"
        elif template.tool_parser:
            parser, source = template.tool_parser, "chat template"
        else:
            parser, source = GENERIC_TOOL_PARSER, "generic"
        return cls(parser, template.renders_tools, template.renders_tool_calls, source)

    def __str__(self) -> str:
        return self.describe()

    def describe(self) -> str:
        shown = "by the chat template" if self.from_template else "in a system message (the template ignores them)"
        return f"{self.parser} calls ({self.source}), tool list {shown}"
