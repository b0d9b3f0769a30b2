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
from appliance.grammar.ebnf import RuleSet, literal
from appliance.service.tool_formats.base import NO_SCHEMAS, CallFormat, ParsedCall
from appliance.service.tool_formats.qwen3_coder import is_text, schema_properties, text_value, typed_value

__all__ = ["Glm45"]

_BLOCK = re.compile(r"\s*<tool_call>\s*([\w.\-]+)[ \t]*(.*?)</tool_call>", re.S)
_PAIR = re.compile(r"\s*<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.S)


class Glm45(CallFormat):
    name = "glm45"
    marker = "<tool_call>"
    end = "</tool_call>"

    def parse_calls(self, text: str, schemas: Mapping[str, Any] = NO_SCHEMAS) -> tuple[list[ParsedCall], int]:
        calls, position = [], 0
        while match := _BLOCK.match(text, position):
            name, body = match.group(1), match.group(2)
            properties = schema_properties(schemas.get(name))
            arguments: dict[str, Any] = {}
            at = 0
            while pair := _PAIR.match(body, at):
                key = pair.group(1).strip()
                arguments[key] = typed_value(pair.group(2), properties.get(key))
                at = pair.end()
            if body[at:].strip():
                break  # something that is not a key/value pair: the block is not a call
            calls.append(ParsedCall(name, json.dumps(arguments, ensure_ascii=False)))
            position = match.end()
        return calls, position

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

    def forced(self, call: str, max_calls: int, rules: RuleSet) -> str:
        block = rules.add("tool_call_block", f'"<tool_call>" {call} "</tool_call>"')
        return f'{block} ("\\n" {block}){{0,{max_calls - 1}}}' if max_calls > 1 else block
