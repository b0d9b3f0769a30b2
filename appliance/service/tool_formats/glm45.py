"""GLM-4.5's calls (and GLM-4.6/4.7's): a function name, then key/value pairs in their own tags.

    <tool_call>get_weather
    <arg_key>city</arg_key>
    <arg_value>Paris</arg_value>
    <arg_key>days</arg_key>
    <arg_value>3</arg_value>
    </tool_call>

As its chat template writes them: a string value raw, any other as JSON; read back typed by the
tool's parameters schema, as Qwen3-Coder's values are (`qwen3_coder.typed_value`). Several calls
are several blocks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from appliance.grammar import schema_expression
from appliance.grammar.ebnf import RuleSet, char_class, complement, literal
from appliance.service.tool_formats.base import NO_SCHEMAS, CallBlock, CallFormat, ParsedCall
from appliance.service.tool_formats.qwen3_coder import is_text, schema_properties, text_value, typed_call, xml_text
from appliance.service.tool_formats.scanning import Scanner, TagScanner

__all__ = ["Glm45"]

_HEAD = re.compile(r"\s*+<tool_call>\s*+([\w.\-]++)[ \t]*+")
_KEY, _VALUE = re.compile(r"\s*+<arg_key>"), re.compile(r"\s*+<arg_value>")
_KEY_END, _VALUE_END = "</arg_key>", "</arg_value>"
_CLOSE = re.compile(r"\s*+</tool_call>")


def _pairs(text: str, at: int) -> tuple[dict[str, str], int]:
    """The raw values by key of the pairs from `at`, and where they end. A key runs to the first
    `</arg_key>`, a value to the first `</arg_value>`: no backtracking, whatever the text."""
    values: dict[str, str] = {}
    while key := _KEY.match(text, at):
        key_end = text.find(_KEY_END, key.end())
        value = _VALUE.match(text, key_end + len(_KEY_END)) if key_end >= 0 else None
        value_end = text.find(_VALUE_END, value.end()) if value else -1
        if value is None or value_end < 0:
            break
        values[text[key.end() : key_end].strip()] = text[value.end() : value_end]
        at = value_end + len(_VALUE_END)
    return values, at


class Glm45(CallFormat):
    name = "glm45"
    marker = "<tool_call>"
    end = "</tool_call>"

    def parse_calls(self, text: str, schemas: Mapping[str, Any] = NO_SCHEMAS) -> tuple[list[ParsedCall], int]:
        calls, position = [], 0
        while head := _HEAD.match(text, position):
            values, at = _pairs(text, head.end())
            closing = _CLOSE.match(text, at)
            call = typed_call(head.group(1), values, schemas) if closing else None
            if closing is None or call is None:
                break  # something that is not a key/value pair: the block is not a call
            calls.append(call)
            position = closing.end()
        return calls, position

    def block_scanner(self) -> Scanner:
        return TagScanner((self.end,), {"<arg_key>": _KEY_END, "<arg_value>": _VALUE_END})

    def write_calls(self, calls: list[tuple[str, dict[str, Any]]]) -> str:
        blocks = []
        for name, arguments in calls:
            pairs = "".join(
                f"<arg_key>{key}</arg_key>\n<arg_value>"
                f"{value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}</arg_value>\n"
                for key, value in arguments.items()
            )
            blocks.append(f"<tool_call>{name}\n{pairs}</tool_call>")
        return "\n".join(blocks)

    def call_grammar(self, name: str, schema: dict[str, Any], rules: RuleSet, path: str) -> str:
        """The name, then the schema's properties in its order (the required ones always), string
        values as raw text bounded by their schema, others as JSON valid against it."""
        required = set(schema.get("required") or ())
        parts = [literal(f"{name}\n")]
        for key, subschema in schema_properties(schema).items():
            where = f"{path}.properties.{key}" if path else f"properties.{key}"
            value = (
                text_value(subschema, rules, where)
                if is_text(subschema)
                else schema_expression(subschema, rules, where)
            )
            pair = f"{literal(f'<arg_key>{key}</arg_key>' + chr(10) + '<arg_value>')} {value} {literal('</arg_value>' + chr(10))}"
            parts.append(pair if key in required else f"({pair})?")
        return " ".join(parts)

    def loose_call(self, name: str, rules: RuleSet) -> str:
        """Any pairs, each key text without `<`, each value raw text without `</`."""
        text = rules.shared("xml-text", xml_text)
        key = char_class(complement([(ord("<"), ord("<"))]))
        pair = f'"<arg_key>" {key}+ "</arg_key>\\n<arg_value>" {text} "</arg_value>\\n"'
        return f"{literal(f'{name}' + chr(10))} ({pair})*"

    def auto_block(self, call: str, max_calls: int, rules: RuleSet) -> CallBlock:
        return CallBlock(self.marker, call, self.end, last=max_calls == 1)

    def forced(self, call: str, max_calls: int, rules: RuleSet) -> str:
        block = rules.add("tool_call_block", f'"<tool_call>" {call} "</tool_call>"')
        return f'{block} ("\\n" {block}){{0,{max_calls - 1}}}' if max_calls > 1 else block
