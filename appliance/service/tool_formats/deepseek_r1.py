"""DeepSeek-R1's calls (and its distills'), as its chat template writes an assistant's `tool_calls`:

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
    ```json
    {"city": "Paris"}
    ```<｜tool▁call▁end｜>
    <｜tool▁call▁begin｜>function<｜tool▁sep｜>...<｜tool▁call▁end｜><｜tool▁calls▁end｜>

(the bars are U+FF5C, the underscores U+2581: each marker is one token of its tokenizer). A block
cut off by max_tokens keeps the calls that closed before the cut.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from appliance.grammar import schema_expression
from appliance.grammar.ebnf import RuleSet, literal
from appliance.service.tool_formats.base import DECODER, NO_SCHEMAS, CallBlock, CallFormat, ParsedCall, json_call

__all__ = ["DeepSeekR1"]

CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, CALL_END, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
_HEAD = re.compile(r"\s*+" + re.escape(CALL_BEGIN) + r"(\w++)" + re.escape(SEP) + r"([^\n]++)\n```(?:json)?\s*+")
_TAIL = re.compile(r"\s*+```\s*+" + re.escape(CALL_END))
_CLOSE = re.compile(r"\s*+" + re.escape(CALLS_END))


class DeepSeekR1(CallFormat):
    name = "deepseek_r1"
    marker = CALLS_BEGIN
    end = CALLS_END

    def parse_calls(self, text: str, schemas: Mapping[str, Any] = NO_SCHEMAS) -> tuple[list[ParsedCall], int]:
        calls: list[ParsedCall] = []
        position = end = len(self.marker)
        while head := _HEAD.match(text, position):
            try:
                arguments, after = DECODER.raw_decode(text, head.end())
            except (ValueError, RecursionError):
                break
            tail = _TAIL.match(text, after)
            call = json_call({"name": head.group(2).strip(), "arguments": arguments})
            if head.group(1) != "function" or tail is None or call is None:
                break
            calls.append(call)
            position = end = tail.end()
        if calls and (close := _CLOSE.match(text, end)):
            end = close.end()
        return calls, end if calls else 0

    def write_calls(self, calls: list[tuple[str, dict[str, Any]]]) -> str:
        written = "\n".join(
            f"{CALL_BEGIN}function{SEP}{name}\n```json\n{json.dumps(arguments, ensure_ascii=False)}\n```{CALL_END}"
            for name, arguments in calls
        )
        return f"{CALLS_BEGIN}{written}{CALLS_END}"

    def call_grammar(self, name: str, schema: dict[str, Any], rules: RuleSet, path: str) -> str:
        arguments = schema_expression(schema, rules, path)
        opening = literal(f"{CALL_BEGIN}function{SEP}{name}\n```json\n")
        return f"{opening} {arguments} {literal(chr(10) + '```' + CALL_END)}"

    def auto_block(self, call: str, max_calls: int, rules: RuleSet) -> CallBlock:
        # One block holds every call of the turn.
        return CallBlock(CALLS_BEGIN, self._calls(call, max_calls), CALLS_END, last=True)

    def forced(self, call: str, max_calls: int, rules: RuleSet) -> str:
        return f"{literal(CALLS_BEGIN)} {self._calls(call, max_calls)} {literal(CALLS_END)}"

    @staticmethod
    def _calls(call: str, max_calls: int) -> str:
        return f'{call} ("\\n" {call}){{0,{max_calls - 1}}}' if max_calls > 1 else call
