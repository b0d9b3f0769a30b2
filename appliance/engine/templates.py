"""What a model's chat template does with tools, read from the template's text.

Many chat templates (SmolLM2's among them) never look at `tools`: the model would not learn what it
may call. OpenVINO GenAI then writes its own tool list and a `{"tool_calls": [...]}` syntax into a
system message, a format no tool parser here reads. The service therefore needs to know, per model,
whether the template renders `tools` (and earlier turns' `tool_calls`), and which call format the
template teaches when a graph names no `tool_parser`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from appliance.engine.messages import Ready
from appliance.graphfiles import Graph

__all__ = ["GENERIC_TOOL_PARSER", "TemplateTools", "ToolFormat", "template_tools"]

_BLOCKS = re.compile(r"\{%-?(.*?)-?%\}|\{\{-?(.*?)-?\}\}", re.S)
_STRINGS = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", re.S)
# Markers a template writes when it renders calls, in the order they are tried.
_FORMATS = (("<tool_call>", "hermes"), ("[TOOL_CALLS]", "mistral"), ("<|python_tag|>", "llama3_json"))


def _key_or_nothing(match: re.Match[str]) -> str:
    # `message['tool_calls']` reads the calls; `'You may call tools'` is only text.
    inner = match.group(0)[1:-1]
    return inner if inner.isidentifier() else '""'


@dataclass(frozen=True)
class TemplateTools:
    renders_tools: bool
    """The template reads the `tools` variable."""
    renders_tool_calls: bool
    """The template reads the messages' `tool_calls`."""
    tool_parser: str | None
    """The call format the template teaches (None: not recognised)."""


def template_tools(template: str) -> TemplateTools:
    """Whether `template` (Jinja) reads `tools` and `tool_calls` in its code (not in its text), and
    the call format it writes."""
    code = " ".join(_STRINGS.sub(_key_or_nothing, first or second) for first, second in _BLOCKS.findall(template))
    parser = next((name for marker, name in _FORMATS if marker in template), None)
    return TemplateTools(
        renders_tools=re.search(r"\btools\b", code) is not None,
        renders_tool_calls=re.search(r"\btool_calls\b", code) is not None,
        tool_parser=parser,
    )


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
    def of(cls, graph: Graph, ready: Ready) -> ToolFormat:
        if graph.tool_parser:
            parser, source = graph.tool_parser, "graph file"
        elif ready.template_tool_parser:
            parser, source = ready.template_tool_parser, "chat template"
        else:
            parser, source = GENERIC_TOOL_PARSER, "generic"
        return cls(parser, ready.template_renders_tools, ready.template_renders_tool_calls, source)

    def describe(self) -> str:
        shown = "by the chat template" if self.from_template else "in a system message (the template ignores them)"
        return f"{self.parser} calls ({self.source}), tool list {shown}"
