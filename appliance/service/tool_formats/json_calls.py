"""Call formats whose calls are JSON objects `{"name": ..., "arguments": {...}}` between markers.

- hermes (Hermes, Qwen 2.5/3): `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, repeated.
- llama3_json (Llama 3.1+): the whole answer is `{"name": ..., "parameters": {...}}` (optionally
  after `<|python_tag|>`), several separated by `;`.
- mistral: `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]` (or `[TOOL_CALLS]name[ARGS]{...}`).
- phi4_mini (Phi-4-mini-instruct): `<|tool_call|>[{"name": ..., "arguments": {...}}, ...]<|/tool_call|>`,
  the markers being tokens of its tokenizer (its chat template only writes the tool list,
  `<|tool|>[...]<|/tool|>`, into the system turn).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from appliance.grammar.ebnf import ANY_CHAR, RuleSet, char_class, literal, subtract
from appliance.grammar.json_schema import SPACE
from appliance.service.tool_formats.base import (
    DECODER,
    NO_SCHEMAS,
    CallBlock,
    CallFormat,
    ParsedCall,
    json_call,
    json_values,
    valid_prefix,
)

__all__ = ["Hermes", "Llama3Json", "Mistral", "Phi4Mini"]

_BLANK = (
    (0x9, 0xD),
    (0x1C, 0x20),
    (0x85, 0x85),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
)
"""The characters `\\s` matches (`scanning.blank_end`): the blank text the parser skips before
deciding whether an answer is calls."""


def _char(char: str) -> tuple[int, int]:
    return ord(char), ord(char)


class Hermes(CallFormat):
    name = "hermes"
    marker = "<tool_call>"
    end = "</tool_call>"
    _OPEN = re.compile(r"\s*+<tool_call>\s*+")
    _CLOSE = re.compile(r"\s*+</tool_call>")

    def parse_calls(self, text: str, schemas: Mapping[str, Any] = NO_SCHEMAS) -> tuple[list[ParsedCall], int]:
        """Each block's JSON is read where it starts, so `</tool_call>` inside one of its strings
        is text of the string; the block ends at the first `</tool_call>` after the JSON."""
        calls, position = [], 0
        while opening := self._OPEN.match(text, position):
            try:
                value, after = DECODER.raw_decode(text, opening.end())
            except (ValueError, RecursionError):  # a model can write 2,000 brackets as well as text
                break
            closing = self._CLOSE.match(text, after)
            call = json_call(value)
            if closing is None or call is None:
                break
            calls.append(call)
            position = closing.end()
        return calls, position

    def write_calls(self, calls: list[tuple[str, dict[str, Any]]]) -> str:
        return "\n".join(
            f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}\n</tool_call>"
            for name, arguments in calls
        )

    def auto_block(self, call: str, max_calls: int, rules: RuleSet) -> CallBlock:
        return CallBlock(self.marker, self._inside(call), self.end, last=max_calls == 1)

    def forced(self, call: str, max_calls: int, rules: RuleSet) -> str:
        block = rules.add("tool_call_block", f'"<tool_call>" {self._inside(call)} "</tool_call>"')
        return f'{block} ("\\n"? {block}){{0,{max_calls - 1}}}' if max_calls > 1 else block

    @staticmethod
    def _inside(call: str) -> str:
        return f'"\\n"? {call} "\\n"?'


class Llama3Json(CallFormat):
    name = "llama3_json"
    marker = ""  # calls are the whole answer: decided by its first character
    arguments_key = "parameters"
    TAG = "<|python_tag|>"

    def parse_calls(self, text: str, schemas: Mapping[str, Any] = NO_SCHEMAS) -> tuple[list[ParsedCall], int]:
        start = len(text) - len(text.lstrip())
        if text.startswith(self.TAG, start):
            start += len(self.TAG)
        return valid_prefix(json_values(text, start, ";"), "parameters")

    def write_calls(self, calls: list[tuple[str, dict[str, Any]]]) -> str:
        return "; ".join(
            json.dumps({"name": name, "parameters": arguments}, ensure_ascii=False) for name, arguments in calls
        )

    def auto_block(self, call: str, max_calls: int, rules: RuleSet) -> None:
        return None  # no marker: the answer's first word decides (`auto_answer`)

    def auto_answer(self, call: str, max_calls: int, rules: RuleSet) -> str:
        """Blank text, then calls (after the tag or not), or text whose first word starts like
        neither (as `ToolCallStream` decides): the whole answer is one grammar, whose free text
        costs the engine nothing per token (any character, no marker to look for)."""
        any_text = rules.shared("any-text", lambda: f"{char_class(ANY_CHAR)}*")
        first = char_class(subtract(ANY_CHAR, [*_BLANK, _char("{"), _char("<")]))
        tag = self.TAG
        # Text starting with a part of the tag and then another character (or ending there).
        near_tag = " | ".join(
            f"{literal(tag[:length])} ({char_class(subtract(ANY_CHAR, [_char(tag[length])]))} {any_text})?"
            for length in range(1, len(tag))
        )
        text = rules.add("plain_answer", f"{first} {any_text} | {near_tag}")
        blank = char_class(_BLANK)
        return f"{blank}* (({literal(tag)})? {self.forced(call, max_calls, rules)} | {text})?"

    def forced(self, call: str, max_calls: int, rules: RuleSet) -> str:
        return f'{call} ("; " {call}){{0,{max_calls - 1}}}' if max_calls > 1 else call


class _JsonList(CallFormat):
    """`marker[{call}, {call}, ...]end?`: the calls of an array cut off by max_tokens still count."""

    _OPEN = re.compile(r"\s*+\[")
    _CLOSE = re.compile(r"\s*+\]")

    def _array(self, text: str, position: int) -> tuple[list[ParsedCall], int] | None:
        opening = self._OPEN.match(text, position)
        if not opening:
            return None
        calls, end = valid_prefix(json_values(text, opening.end(), ","))
        if calls and (closing := self._CLOSE.match(text, end)):
            end = closing.end()
            if self.end and (tail := re.compile(r"\s*" + re.escape(self.end)).match(text, end)):
                end = tail.end()
        return calls, end

    def write_calls(self, calls: list[tuple[str, dict[str, Any]]]) -> str:
        listed = [{"name": name, "arguments": arguments} for name, arguments in calls]
        return self.marker + json.dumps(listed, ensure_ascii=False) + self.end

    def auto_block(self, call: str, max_calls: int, rules: RuleSet) -> CallBlock:
        # One list holds every call, and mistral's run to the end of the answer.
        return CallBlock(self.marker, self._listed(call, max_calls), self.end, last=True)

    def forced(self, call: str, max_calls: int, rules: RuleSet) -> str:
        close = f' "{self.end}"' if self.end else ""
        return f'"{self.marker}" {self._listed(call, max_calls)}{close}'

    @staticmethod
    def _listed(call: str, max_calls: int) -> str:
        more = f' ("," {SPACE} {call}){{0,{max_calls - 1}}}' if max_calls > 1 else ""
        return f'"[" {call}{more} "]"'


class Mistral(_JsonList):
    name = "mistral"
    marker = "[TOOL_CALLS]"
    id_length = 9  # Mistral's chat templates require 9-character ids
    _NAMED = re.compile(r"\s*+([A-Za-z0-9_-]++)\[ARGS\]")

    def parse_calls(self, text: str, schemas: Mapping[str, Any] = NO_SCHEMAS) -> tuple[list[ParsedCall], int]:
        position = len(self.marker)
        listed = self._array(text, position)
        if listed is not None:
            return listed
        calls, end = [], 0
        while match := self._NAMED.match(text, position):
            try:
                arguments, position = DECODER.raw_decode(text, match.end())
            except (ValueError, RecursionError):
                break
            call = json_call({"name": match.group(1), "arguments": arguments})
            if call is None:
                break
            calls.append(call)
            end = position
            if text.startswith(self.marker, position):
                position += len(self.marker)
        return calls, end


class Phi4Mini(_JsonList):
    name = "phi4_mini"
    marker = "<|tool_call|>"
    end = "<|/tool_call|>"

    def parse_calls(self, text: str, schemas: Mapping[str, Any] = NO_SCHEMAS) -> tuple[list[ParsedCall], int]:
        listed = self._array(text, len(self.marker))
        if listed is not None:
            return listed
        # One call without the list around it, as the model sometimes writes it.
        calls, end = valid_prefix(json_values(text, len(self.marker), ","))
        if calls and (tail := re.compile(r"\s*" + re.escape(self.end)).match(text, end)):
            end = tail.end()
        return calls, end
