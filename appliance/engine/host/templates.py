"""How a model gets its tools: the parser reading its calls, who shows the tools to it, and the
parser splitting out its reasoning.

Many chat templates (SmolLM2's among them) never look at `tools`: the model would not learn what it
may call. OpenVINO GenAI then writes its own tool list and a `{"tool_calls": [...]}` syntax into a
system message, a format no tool parser here reads. What a template does with tools is read from
the model's files when its graph is validated (`graphfiles.chat_template`, in `Graph.facts`), so
the first request to a model that has not loaded is planned as every later one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    reasoning: str | None = None
    """The reasoning parser (None: reasoning is not split out)."""
    reasoning_source: str = ""
    """Where `reasoning` comes from: "graph file", "chat template", "tool parser" (harmony) or "" (none)."""
    why: str = field(default="", compare=False)
    """What in the chat template (or the tokenizer) chose `parser`, or why nothing was recognised."""
    reasoning_why: str = field(default="", compare=False)

    @classmethod
    def of(cls, graph: Graph, template: TemplateTools) -> ToolFormat:
        """The formats for `graph`, given what its chat template does with tools and shows: the
        graph file's `tool_parser` and `reasoning_parser` win over the template's."""
        if graph.tool_parser:
            parser, source = graph.tool_parser, "graph file"
        elif template.tool_parser:
            parser, source = template.tool_parser, "chat template"
        else:
            parser, source = GENERIC_TOOL_PARSER, "generic"
        if graph.reasoning_parser:
            reasoning, reasoning_source = graph.reasoning_parser, "graph file"
        elif template.reasoning_parser:
            reasoning, reasoning_source = template.reasoning_parser, "chat template"
        else:
            reasoning, reasoning_source = None, ""
        reasoning_why = template.reasoning_reason
        if parser == "harmony" and reasoning != "harmony":
            # Harmony's calls are messages among its channels: the splitter runs whatever the graph says.
            reasoning, reasoning_source, reasoning_why = (
                "harmony",
                "tool parser",
                "harmony calls come among its channels",
            )
        return cls(
            parser,
            template.renders_tools,
            template.renders_tool_calls,
            source,
            reasoning,
            reasoning_source,
            why=template.tool_reason,
            reasoning_why=reasoning_why,
        )

    @property
    def keeps_special_tokens(self) -> bool:
        """The reasoning format's markers are special tokens (harmony's channels): the text the
        parser reads must keep them, tools or not."""
        return self.reasoning == "harmony" or self.parser == "harmony"

    def __str__(self) -> str:
        return self.describe()

    def describe(self) -> str:
        shown = "by the chat template" if self.from_template else "in a system message (the template ignores them)"
        source = f"{self.source}: {self.why}" if self.source != "graph file" and self.why else self.source
        if self.reasoning:
            why = f": {self.reasoning_why}" if self.reasoning_source != "graph file" and self.reasoning_why else ""
            reasoning = f"reasoning {self.reasoning} ({self.reasoning_source}{why})"
        else:
            reasoning = f"no reasoning parser ({self.reasoning_why})" if self.reasoning_why else "no reasoning parser"
        return f"{self.parser} calls ({source}), tool list {shown}; {reasoning}"
