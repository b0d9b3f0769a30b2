"""Tool calls: the graph's parser reads them out of the model's text, streamed or whole, and writes
the grammar that forces one (tool_choice `required` or a named function).

Parsers (graph file `tool_parser`):
- hermes (Hermes, Qwen 2.5/3): `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, repeated.
- llama3_json (Llama 3.1+): the whole answer is `{"name": ..., "parameters": {...}}` (optionally
  after `<|python_tag|>`), several separated by `;`.
- mistral: `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]` (or `[TOOL_CALLS]name[ARGS]{...}`).

A complete block that does not parse as a call stays in `content`. A call the answer ends inside
(max_tokens cut it) is dropped from both `content` and the calls: call markup never reaches
`content`, and the complete calls before it are kept.
"""

from __future__ import annotations

import json
import re
import secrets
import string
from dataclasses import dataclass
from typing import Any

from appliance.grammar import GrammarError, schema_expression
from appliance.grammar.ebnf import RuleSet, literal
from appliance.grammar.json_schema import SPACE
from appliance.protocol.openai import Tool

__all__ = [
    "ParsedCall",
    "ToolCallStream",
    "call_expression",
    "forced_call_grammar",
    "new_call_id",
    "tool_parser",
]

_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: str
    """JSON text of the arguments object."""


def _call(obj: Any, arguments_key: str = "arguments") -> ParsedCall | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    arguments = obj.get(arguments_key, obj.get("arguments", obj.get("parameters", {})))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return None
    if not isinstance(arguments, dict):
        return None
    return ParsedCall(name=obj["name"], arguments=json.dumps(arguments, ensure_ascii=False))


def _json_values(text: str, position: int, separator: str) -> list[tuple[Any, int]]:
    """Consecutive JSON values from `position`, separated by `separator` (and whitespace), each
    with the position after it; stops at the first thing that is not one."""

    def skip_space(at: int) -> int:
        while at < len(text) and text[at].isspace():
            at += 1
        return at

    values: list[tuple[Any, int]] = []
    while True:
        start = skip_space(position)
        if values:
            if not text.startswith(separator, start):
                return values
            start = skip_space(start + len(separator))
        try:
            value, position = _DECODER.raw_decode(text, start)
        except ValueError:
            return values
        values.append((value, position))


class _Parser:
    name = ""
    marker = ""
    id_length = 24

    def parse_calls(self, text: str) -> tuple[list[ParsedCall], int]:
        """The complete, valid calls at the start of `text` (which starts at the marker) and where
        they end. What follows (e.g. a call cut off by max_tokens) is not a call."""
        raise NotImplementedError

    def write_calls(self, calls: list[tuple[str, dict[str, Any]]]) -> str:
        """(name, arguments) calls as the model writes them (for prompts whose template cannot)."""
        raise NotImplementedError

    def forced(self, call: str, max_calls: int, rules: RuleSet) -> str:
        """The grammar expression of an answer made of 1 to `max_calls` calls, each matching the
        rule `call`: the answer may end after every complete call.

        What repeats is a rule of its own: the engine writes out each copy, and each copied
        literal costs it a pass over the vocabulary when compiling.
        """
        raise NotImplementedError


def _valid_prefix(candidates: list[tuple[Any, int]], arguments_key: str = "arguments") -> tuple[list[ParsedCall], int]:
    calls, end = [], 0
    for value, position in candidates:
        call = _call(value, arguments_key)
        if call is None:
            break
        calls.append(call)
        end = position
    return calls, end


class _Hermes(_Parser):
    name = "hermes"
    marker = "<tool_call>"
    _BLOCK = re.compile(r"\s*<tool_call>(.*?)</tool_call>", re.S)

    def parse_calls(self, text: str) -> tuple[list[ParsedCall], int]:
        calls, position = [], 0
        while match := self._BLOCK.match(text, position):
            try:
                call = _call(json.loads(match.group(1)))
            except (ValueError, RecursionError):  # a model can write 2,000 brackets as well as text
                call = None
            if call is None:
                break
            calls.append(call)
            position = match.end()
        return calls, position

    def write_calls(self, calls: list[tuple[str, dict[str, Any]]]) -> str:
        return "\n".join(
            f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}\n</tool_call>"
            for name, arguments in calls
        )

    def forced(self, call: str, max_calls: int, rules: RuleSet) -> str:
        block = rules.add("tool_call_block", f'"<tool_call>" "\\n"? {call} "\\n"? "</tool_call>"')
        return f'{block} ("\\n"? {block}){{0,{max_calls - 1}}}' if max_calls > 1 else block


class _Llama3Json(_Parser):
    name = "llama3_json"
    marker = ""  # calls are the whole answer: decided by its first character
    _TAG = "<|python_tag|>"

    def parse_calls(self, text: str) -> tuple[list[ParsedCall], int]:
        start = len(text) - len(text.lstrip())
        if text.startswith(self._TAG, start):
            start += len(self._TAG)
        return _valid_prefix(_json_values(text, start, ";"), "parameters")

    def write_calls(self, calls: list[tuple[str, dict[str, Any]]]) -> str:
        return "; ".join(
            json.dumps({"name": name, "parameters": arguments}, ensure_ascii=False) for name, arguments in calls
        )

    def forced(self, call: str, max_calls: int, rules: RuleSet) -> str:
        return f'{call} ("; " {call}){{0,{max_calls - 1}}}' if max_calls > 1 else call


class _Mistral(_Parser):
    name = "mistral"
    marker = "[TOOL_CALLS]"
    id_length = 9  # Mistral's chat templates require 9-character ids
    _NAMED = re.compile(r"\s*([A-Za-z0-9_-]+)\[ARGS\]")
    _OPEN = re.compile(r"\s*\[")
    _CLOSE = re.compile(r"\s*\]")

    def parse_calls(self, text: str) -> tuple[list[ParsedCall], int]:
        position = len(self.marker)
        if opening := self._OPEN.match(text, position):
            # [TOOL_CALLS][{...}, {...}]: the calls of a cut-off array still count.
            calls, end = _valid_prefix(_json_values(text, opening.end(), ","))
            if calls and (closing := self._CLOSE.match(text, end)):
                end = closing.end()
            return calls, end
        calls, end = [], 0
        while match := self._NAMED.match(text, position):
            try:
                arguments, position = _DECODER.raw_decode(text, match.end())
            except ValueError:
                break
            call = _call({"name": match.group(1), "arguments": arguments})
            if call is None:
                break
            calls.append(call)
            end = position
            if text.startswith(self.marker, position):
                position += len(self.marker)
        return calls, end

    def write_calls(self, calls: list[tuple[str, dict[str, Any]]]) -> str:
        listed = [{"name": name, "arguments": arguments} for name, arguments in calls]
        return "[TOOL_CALLS]" + json.dumps(listed, ensure_ascii=False)

    def forced(self, call: str, max_calls: int, rules: RuleSet) -> str:
        more = f' ("," {SPACE} {call}){{0,{max_calls - 1}}}' if max_calls > 1 else ""
        return f'"[TOOL_CALLS]" "[" {call}{more} "]"'


_PARSERS: dict[str, _Parser] = {parser.name: parser for parser in (_Hermes(), _Llama3Json(), _Mistral())}


def tool_parser(name: str) -> _Parser:
    return _PARSERS[name]


def new_call_id(parser: _Parser) -> str:
    alphabet = string.ascii_letters + string.digits
    suffix = "".join(secrets.choice(alphabet) for _ in range(parser.id_length))
    return suffix if parser.id_length < 24 else f"call_{suffix}"


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
    text is complete (hermes: at `</tool_call>`; the others: at the end of the answer).
    """

    def __init__(self, parser: _Parser) -> None:
        self.parser = parser
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
        content, calls = "", []
        parser = self.parser
        if not parser.marker:
            # llama3_json: the answer is calls only if it starts like one.
            if not self._started:
                stripped = self._pending.lstrip()
                tag = _Llama3Json._TAG
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
            if isinstance(parser, _Hermes):
                match = _Hermes._BLOCK.match(self._pending)
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

    def _settle(self, text: str) -> tuple[str, list[ParsedCall]]:
        """(what is left as content, the calls) of text that starts with calls."""
        text = text.lstrip()
        calls, end = self.parser.parse_calls(text)
        if not calls:
            return text, []
        rest = text[end:]
        return ("" if not rest.strip() else rest), calls

    def _unfinished(self, text: str) -> tuple[str, list[ParsedCall]]:
        """(content, calls) of the text the answer ended in after a call began: the complete calls;
        what follows them, or a call cut off before it was complete, is markup and is dropped.
        Only where calls have no marker (llama3_json) is text that holds no call content."""
        calls, _ = self.parser.parse_calls(text.lstrip())
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
    """The expression (its rules added to `rules`) of an answer made of tool calls, as in
    `forced_call_grammar`."""
    parser = tool_parser(parser_name)
    arguments_key = "parameters" if parser.name == "llama3_json" else "arguments"
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
        try:
            arguments = schema_expression(schema, rules, f"tools[{index}].function.parameters")
        except GrammarError as exc:
            exc.path = exc.path or f"tools[{index}].function.parameters"
            raise
        calls.append(
            f'"{{" {literal(chr(34) + "name" + chr(34) + ":")} {SPACE} {literal(json.dumps(function.name))} '
            f'"," {SPACE} {literal(json.dumps(arguments_key) + ":")} {SPACE} {arguments} "}}"'
        )
    return parser.forced(rules.add("tool_call", " | ".join(calls)), 1 if name is not None else max_calls, rules)
