"""Tool calls: the graph's call format reads them out of the model's text, streamed or whole, and
writes the grammar that forces one (tool_choice `required` or a named function).

The formats themselves (hermes, llama3_json, mistral, phi4_mini, qwen3_coder, glm45, deepseek_r1,
harmony) live in `service.tool_formats`, one module per family's way of writing calls.

A complete block that does not parse as a call stays in `content`. A call the answer ends inside
(max_tokens cut it) is dropped from both `content` and the calls: call markup never reaches
`content`, and the complete calls before it are kept.
"""

from __future__ import annotations

import re
import secrets
import string
from collections.abc import Mapping
from typing import Any

from appliance.grammar import GrammarError
from appliance.grammar.ebnf import RuleSet
from appliance.protocol.openai import Tool
from appliance.service.tool_formats import CallFormat, ParsedCall, call_format
from appliance.service.tool_formats.base import NO_SCHEMAS
from appliance.service.tool_formats.json_calls import Llama3Json

__all__ = [
    "ParsedCall",
    "ToolCallStream",
    "call_expression",
    "forced_call_grammar",
    "new_call_id",
    "tool_parser",
    "tool_schemas",
]

tool_parser = call_format
"""The call format named by a graph's `tool_parser` (or found from its chat template)."""


def new_call_id(parser: CallFormat) -> str:
    alphabet = string.ascii_letters + string.digits
    suffix = "".join(secrets.choice(alphabet) for _ in range(parser.id_length))
    return suffix if parser.id_length < 24 else f"call_{suffix}"


def tool_schemas(tools: list[Tool] | tuple[Tool, ...]) -> dict[str, Any]:
    """The tools' parameter schemas by function name (formats whose values are typed by them)."""
    return {tool.function.name: tool.function.parameters or {} for tool in tools}


def _held_back(text: str, marker: str) -> int:
    """Length of the longest end of `text` that could be the start of `marker`."""
    for length in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-length:]):
            return length
    return 0


class ToolCallStream:
    """Splits generated text into content and tool calls as it arrives.

    Content streams through, except text that may be the start of a call marker, which waits until
    it is clearly not one: raw call markup never reaches `content`. A call is reported once its
    text is complete: at the end of its block for formats whose blocks close (`CallFormat.end`),
    after which text is content again; at the end of the answer for the others.
    """

    def __init__(self, parser: CallFormat, schemas: Mapping[str, Any] = NO_SCHEMAS) -> None:
        self.parser = parser
        self._schemas = schemas
        self._block = (
            re.compile(r"\s*" + re.escape(parser.marker) + ".*?" + re.escape(parser.end), re.S) if parser.end else None
        )
        self._pending = ""
        self._in_calls = False
        self._started = False
        self.calls: list[ParsedCall] = []

    def feed(self, text: str) -> tuple[str, list[ParsedCall]]:
        """New content and newly completed calls."""
        self._pending += text
        return self._advance(final=False)

    def finish(self) -> tuple[str, list[ParsedCall]]:
        return self._advance(final=True)

    def _advance(self, *, final: bool) -> tuple[str, list[ParsedCall]]:
        if not self.parser.marker:
            return self._whole_answer(final=final)
        content, calls = "", []
        parser = self.parser
        while True:
            if not self._in_calls:
                start = self._pending.find(parser.marker)
                if start < 0:
                    keep = 0 if final else _held_back(self._pending, parser.marker)
                    content += self._pending[: len(self._pending) - keep]
                    self._pending = self._pending[len(self._pending) - keep :]
                    return content, self._record(calls)
                content += self._pending[:start]
                self._pending = self._pending[start:]
                self._in_calls = True
            if self._block is not None:
                match = self._block.match(self._pending)
                if match:
                    found, text = self._settle(match.group(0))
                    content += found
                    calls += text
                    self._pending = self._pending[match.end() :]
                    continue
                stripped = self._pending.lstrip()
                if stripped and not (stripped.startswith(parser.marker) or parser.marker.startswith(stripped)):
                    self._in_calls = False  # text after the calls: content again
                    continue
            if final:
                found, text = self._unfinished(self._pending)
                self._pending = ""
                return content + found, self._record(calls + text)
            return content, self._record(calls)

    def _whole_answer(self, *, final: bool) -> tuple[str, list[ParsedCall]]:
        """llama3_json: the answer is calls only if it starts like one."""
        content, calls = "", []
        if not self._started:
            stripped = self._pending.lstrip()
            tag = Llama3Json.TAG
            if not final and (not stripped or (tag.startswith(stripped) and stripped != tag)):
                return "", []
            self._started = True
            self._in_calls = stripped.startswith(("{", tag))
        if not self._in_calls:
            content, self._pending = self._pending, ""
        elif final:
            content, calls = self._unfinished(self._pending)
            self._pending = ""
        return content, self._record(calls)

    def _settle(self, text: str) -> tuple[str, list[ParsedCall]]:
        """(what is left as content, the calls) of text that starts with calls."""
        text = text.lstrip()
        calls, end = self.parser.parse_calls(text, self._schemas)
        if not calls:
            return text, []
        rest = text[end:]
        return ("" if not rest.strip() else rest), calls

    def _unfinished(self, text: str) -> tuple[str, list[ParsedCall]]:
        """(content, calls) of the text the answer ended in after a call began: the complete calls;
        what follows them, or a call cut off before it was complete, is markup and is dropped.
        Only where calls have no marker (llama3_json) is text that holds no call content."""
        calls, _ = self.parser.parse_calls(text.lstrip(), self._schemas)
        if calls or self.parser.marker:
            return "", calls
        return text.lstrip(), []

    def _record(self, calls: list[ParsedCall]) -> list[ParsedCall]:
        self.calls += calls
        return calls


def forced_call_grammar(parser_name: str, tools: list[Tool], name: str | None, max_calls: int) -> str:
    """A grammar whose every output is one call of `name`'s tool or, without a name, 1 to
    `max_calls` calls of any tool, with arguments valid against its parameters schema."""
    rules = RuleSet()
    return rules.render(call_expression(parser_name, tools, name, max_calls, rules))


def call_expression(parser_name: str, tools: list[Tool], name: str | None, max_calls: int, rules: RuleSet) -> str:
    """The expression (its rules added to `rules`) of an answer made of tool calls in the format
    `parser_name`, as in `forced_call_grammar`."""
    parser = tool_parser(parser_name)
    calls = []
    for index, tool in enumerate(tools):
        function = tool.function
        if name is not None and function.name != name:
            continue
        schema = (
            function.parameters
            if function.parameters is not None
            else {"type": "object", "properties": {}, "additionalProperties": False}
        )
        path = f"tools[{index}].function.parameters"
        try:
            calls.append(parser.call_grammar(function.name, schema, rules, path))
        except GrammarError as exc:
            exc.path = exc.path or path
            raise
    return parser.forced(rules.add("tool_call", " | ".join(calls)), 1 if name is not None else max_calls, rules)
