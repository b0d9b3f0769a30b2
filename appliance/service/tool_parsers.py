"""Tool calls: the graph's call format reads them out of the model's text, streamed or whole, and
writes the grammar that forces one (tool_choice `required` or a named function) and the grammar
each call in a free answer is held to (tool_choice `auto`: `auto_calls`).

The formats themselves (hermes, llama3_json, mistral, phi4_mini, qwen3_coder, glm45, deepseek_r1,
harmony) live in `service.tool_formats`, one module per family's way of writing calls.

A complete block that does not parse as a call stays in `content` (so does one whose arguments
are not strict JSON: `NaN`, `Infinity`, `1e999`, see `tool_formats.base`); mistral's calls, which
run to the end of the answer, are then dropped, and a llama3_json answer is then content. A call
the answer ends inside (max_tokens cut it) is dropped from both `content` and the calls: call
markup never reaches `content`, and the complete calls before it are kept. A block ends at its
format's closing marker outside its arguments' JSON strings (or tag values): a block whose JSON
leaves a string open runs to the end of the answer, as a cut call.

Model output is untrusted input, read on the event loop: every piece of text is looked at once,
whatever the size of the deltas, and no reader backtracks (`tool_formats.scanning`).
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from appliance.grammar import GrammarError
from appliance.grammar.ebnf import RuleSet
from appliance.protocol.openai import Tool
from appliance.service.tool_formats import CallFormat, ParsedCall, call_format
from appliance.service.tool_formats.base import NO_SCHEMAS, CallBlock
from appliance.service.tool_formats.json_calls import Llama3Json
from appliance.service.tool_formats.scanning import Scanner, blank_end, held_back, may_become

__all__ = [
    "AutoCalls",
    "ParsedCall",
    "ToolCallStream",
    "auto_calls",
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


class ToolCallStream:
    """Splits generated text into content and tool calls as it arrives.

    Content streams through, except text that may be the start of a call marker, which waits until
    it is clearly not one: raw call markup never reaches `content`. A call is reported once its
    text is complete: at the end of its block for formats whose blocks close (`CallFormat.end`,
    found by the format's `block_scanner`, so a marker inside an argument is text of it), after
    which text is content again; at the end of the answer for the others.

    Each piece is looked at once, in time linear in its length: a block is kept in parts and read
    once it is complete, and only a marker's start (or blank text after a block) is held back.
    """

    def __init__(self, parser: CallFormat, schemas: Mapping[str, Any] = NO_SCHEMAS) -> None:
        self.parser = parser
        self._schemas = schemas
        # "first" (llama3_json: before the answer's first word), "text", "block", "between" (blank
        # text after a block, which another block or text decides)
        self._state = "text" if parser.marker else "first"
        self._held = ""  # a marker's start, until the next piece tells
        self._blank: list[str] = []
        self._block: list[str] = []
        self._scanner: Scanner | None = None
        self.calls: list[ParsedCall] = []

    def feed(self, text: str) -> tuple[str, list[ParsedCall]]:
        """New content and newly completed calls."""
        return self._advance(text, final=False)

    def finish(self) -> tuple[str, list[ParsedCall]]:
        return self._advance("", final=True)

    def _advance(self, text: str, *, final: bool) -> tuple[str, list[ParsedCall]]:
        text, self._held = self._held + text, ""
        content: list[str] = []
        calls: list[ParsedCall] = []
        position: int | None = 0
        while position is not None:
            if self._state == "first":
                position = self._first(text, position, final, content)
            elif self._state == "text":
                position = self._text(text, position, final, content)
            elif self._state == "block":
                position = self._in_block(text, position, final, content, calls)
            else:
                position = self._between(text, position, final, content)
        return "".join(content), self._record(calls)

    def _first(self, text: str, position: int, final: bool, content: list[str]) -> int | None:
        """llama3_json: the answer is calls only if it starts like one."""
        start = blank_end(text, position)
        self._blank.append(text[position:start])
        tag = Llama3Json.TAG
        if not final and may_become(text, start, (tag,)):
            self._held = text[start:]
            return None
        blank, self._blank = "".join(self._blank), []
        if text.startswith(("{", tag), start):
            self._state, self._block = "block", [blank]
        else:
            self._state = "text"
            content.append(blank)
        return start

    def _text(self, text: str, position: int, final: bool, content: list[str]) -> int | None:
        marker = self.parser.marker
        start = text.find(marker, position) if marker else -1
        if start < 0:
            keep = 0 if final or not marker else held_back(text, (marker,), position)
            content.append(text[position : len(text) - keep])
            self._held = text[len(text) - keep :]
            return None
        content.append(text[position:start])
        return self._open_block(start)

    def _open_block(self, start: int) -> int:
        """Enters the block whose marker is at `start`: the position after the marker."""
        self._state, self._block = "block", [self.parser.marker]
        self._scanner = self.parser.block_scanner() if self.parser.end else None
        return start + len(self.parser.marker)

    def _in_block(
        self, text: str, position: int, final: bool, content: list[str], calls: list[ParsedCall]
    ) -> int | None:
        found = self._scanner.feed(text, position) if self._scanner is not None else None
        end = len(text) if found is None else found[0]
        self._block.append(text[position:end])
        if found is None and not final:
            return None
        block, self._block = "".join(self._block), []
        block_content, block_calls = self._settle(block) if found else self._unfinished(block)
        content.append(block_content)
        calls += block_calls
        self._state = "between"
        return end if found else None

    def _between(self, text: str, position: int, final: bool, content: list[str]) -> int | None:
        start = blank_end(text, position)
        self._blank.append(text[position:start])
        if text.startswith(self.parser.marker, start):
            self._blank = []  # blank text between blocks belongs to neither
            return self._open_block(start)
        if may_become(text, start, (self.parser.marker,)):
            if final:
                self._blank = []  # markup (or nothing) after the calls: dropped
            else:
                self._held = text[start:]
            return None
        content.append("".join(self._blank))
        self._state, self._blank = "text", []  # text after the calls: content again
        return start

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
    call, _ = _call_rule(parser, tools, name, rules)
    return parser.forced(call, 1 if name is not None else max_calls, rules)


@dataclass(frozen=True)
class AutoCalls:
    """The calls an answer in auto mode may hold, as the engine holds them to the tools' schemas."""

    grammar: str
    """With `block`, the grammar of the block's content (after its marker); without, of the whole
    answer (a format without a marker: llama3_json)."""
    block: CallBlock | None
    loose: tuple[int, ...]
    """The tools (by index) whose schemas no grammar here expresses: called with any arguments."""


def auto_calls(parser_name: str, tools: list[Tool], max_calls: int) -> AutoCalls:
    """The calls of `tools` a free answer may hold in the format `parser_name`: 1 to
    `max_calls` per block. GrammarError when even that cannot be written (the tools together
    pass a size bound)."""
    parser = tool_parser(parser_name)
    rules = RuleSet()
    call, loose = _call_rule(parser, tools, None, rules, lenient=True)
    block = parser.auto_block(call, max_calls, rules)
    expression = block.content if block is not None else parser.auto_answer(call, max_calls, rules)
    return AutoCalls(grammar=rules.render(expression), block=block, loose=tuple(loose))


def _call_rule(
    parser: CallFormat, tools: list[Tool], name: str | None, rules: RuleSet, *, lenient: bool = False
) -> tuple[str, list[int]]:
    """The rule of one call of `name`'s tool, or of any tool, and (`lenient`) the tools called
    with any arguments (`CallFormat.loose_call`) because their schema cannot be written as a
    grammar; without `lenient`, GrammarError naming the schema's part."""
    calls, loose = [], []
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
        if lenient and not _expressible(parser, function.name, schema, path):
            calls.append(parser.loose_call(function.name, rules))
            loose.append(index)
            continue
        try:
            calls.append(parser.call_grammar(function.name, schema, rules, path))
        except GrammarError as exc:
            exc.path = exc.path or path
            raise
    return rules.add("tool_call", " | ".join(calls)), loose


def _expressible(parser: CallFormat, name: str, schema: dict[str, Any], path: str) -> bool:
    """Whether the call's grammar can be written (tried on rules of its own, so that a schema
    refused halfway leaves nothing behind in the grammar's)."""
    try:
        parser.call_grammar(name, schema, RuleSet(), path)
    except GrammarError:
        return False
    return True
