"""Qwen3-Coder's calls: XML-like blocks whose parameter values are raw text, typed by the tool's schema.

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    <parameter=days>
    3
    </parameter>
    </function>
    </tool_call>

As its chat template writes them: a value is written as it is when it is a string, as JSON
otherwise (objects, arrays, numbers, booleans). Reading one back therefore needs the tool's
parameters schema: a property the schema types as a string stays text (`"007"` stays `"007"`),
any other is read as JSON; a property the schema does not describe is read as JSON when it is
valid JSON, else kept as text. Several calls are several blocks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from appliance.grammar import GrammarError, schema_expression
from appliance.grammar.ebnf import RuleSet, char_class, complement, literal, repeat
from appliance.grammar.regex import regex_expression
from appliance.service.tool_formats.base import NO_SCHEMAS, CallBlock, CallFormat, ParsedCall, parsed_call, strict_json
from appliance.service.tool_formats.scanning import Scanner, TagScanner

__all__ = ["Qwen3Coder", "is_text", "schema_properties", "text_value", "typed_call", "typed_value", "xml_text"]

_HEAD = re.compile(r"\s*+<tool_call>\s*+<function=([^>\n]++)>")
_PARAMETER = re.compile(r"\s*+<parameter=([^>\n]++)>\n?")
_PARAMETER_END = "</parameter>"
_CLOSE = re.compile(r"\s*+</function>\s*+</tool_call>")


def is_text(schema: Any) -> bool:
    """The property is a string (alone or among other types): its value is written raw."""
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    if kind == "string" or (isinstance(kind, list) and "string" in kind):
        return True
    return kind is None and ("enum" in schema and all(isinstance(value, str) for value in schema["enum"]))


def typed_value(raw: str, schema: Any) -> Any:
    """A raw parameter value as its property's schema types it (text stays text). A value that
    is not strict JSON (`NaN`, `1e999`, a typo) stays text, as the model wrote it."""
    if is_text(schema):
        return raw
    try:
        return strict_json(raw)
    except (ValueError, RecursionError):
        return raw


def typed_call(name: str, values: dict[str, str], schemas: Mapping[str, Any]) -> ParsedCall | None:
    """The call of `name` with its raw `values` typed by its tool's parameters schema."""
    properties = schema_properties(schemas.get(name))
    return parsed_call(name, {key: typed_value(raw, properties.get(key)) for key, raw in values.items()})


def schema_properties(schema: Any) -> dict[str, Any]:
    """A parameters schema's `properties` ({} when it has none)."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return properties if isinstance(properties, dict) else {}


def xml_text() -> str:
    """Text holding no `</` and not ending in `<`."""
    plain = char_class(complement([(ord("<"), ord("<"))]))
    after_lt = char_class(complement([(ord("<"), ord("<")), (ord("/"), ord("/"))]))
    return f'({plain} | "<"+ {after_lt})*'


def text_value(schema: dict[str, Any], rules: RuleSet, path: str) -> str:
    """The raw text of a string parameter, as its schema bounds it: an enum or const, a pattern,
    lengths (text without `<`), else any text without `</`."""
    enum = [schema["const"]] if "const" in schema else schema.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(item, str) for item in enum):
        return "(" + " | ".join(literal(item) for item in enum) + ")"
    if "format" in schema:
        raise GrammarError("`format` is not supported on a qwen3_coder string parameter of a forced call.", path)
    if "pattern" in schema:
        pattern = schema["pattern"]
        if not isinstance(pattern, str):
            raise GrammarError("`pattern` must be a string.", f"{path}.pattern")
        try:
            return regex_expression(pattern, rules)
        except GrammarError as exc:
            raise GrammarError(exc.message, f"{path}.pattern") from None
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    if "minLength" in schema or "maxLength" in schema:
        if not isinstance(low, int) or (high is not None and not isinstance(high, int)) or (high or low) < low:
            raise GrammarError("`minLength`/`maxLength` must be counts, the least not above the most.", path)
        char = rules.shared("xml-char", lambda: char_class(complement([(ord("<"), ord("<"))])))
        return repeat(char, low, high, rules)
    return rules.shared("xml-text", xml_text)


def _parameters(text: str, at: int) -> tuple[dict[str, str], int]:
    """The raw values by name of the parameters from `at`, and where they end. A value runs to
    the first `</parameter>` (less one newline at each end): no backtracking, whatever the text."""
    values: dict[str, str] = {}
    while (parameter := _PARAMETER.match(text, at)) and (end := text.find(_PARAMETER_END, parameter.end())) >= 0:
        values[parameter.group(1).strip()] = text[parameter.end() : end].removesuffix("\n")
        at = end + len(_PARAMETER_END)
    return values, at


class Qwen3Coder(CallFormat):
    name = "qwen3_coder"
    marker = "<tool_call>"
    end = "</tool_call>"

    def parse_calls(self, text: str, schemas: Mapping[str, Any] = NO_SCHEMAS) -> tuple[list[ParsedCall], int]:
        """A value runs to the first `</parameter>` after its tag, so `</function>` or
        `</tool_call>` inside it is text of the value (as `block_scanner` finds the block's end)."""
        calls, position = [], 0
        while head := _HEAD.match(text, position):
            values, at = _parameters(text, head.end())
            closing = _CLOSE.match(text, at)
            call = typed_call(head.group(1).strip(), values, schemas) if closing else None
            if closing is None or call is None:
                break  # something that is not a parameter: the block is not a call
            calls.append(call)
            position = closing.end()
        return calls, position

    def block_scanner(self) -> Scanner:
        return TagScanner((self.end,), {"<parameter=": _PARAMETER_END})

    def write_calls(self, calls: list[tuple[str, dict[str, Any]]]) -> str:
        blocks = []
        for name, arguments in calls:
            parameters = "".join(
                f"<parameter={key}>\n{value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}\n"
                "</parameter>\n"
                for key, value in arguments.items()
            )
            blocks.append(f"<tool_call>\n<function={name}>\n{parameters}</function>\n</tool_call>")
        return "\n".join(blocks)

    def call_grammar(self, name: str, schema: dict[str, Any], rules: RuleSet, path: str) -> str:
        """`<function=NAME>` then the schema's properties in its order, the required ones always:
        string values as raw text bounded by their schema (`text_value`: never `</`, so a value
        cannot close its tag early), others as JSON valid against the property's schema."""
        required = set(schema.get("required") or ())
        parts = [literal(f"<function={name}>\n")]
        for key, subschema in schema_properties(schema).items():
            where = f"{path}.properties.{key}" if path else f"properties.{key}"
            if is_text(subschema):
                value = text_value(subschema, rules, where)
            else:
                value = schema_expression(subschema, rules, where)
            parameter = (
                f"{literal(f'<parameter={key}>' + chr(10))} {value} {literal(chr(10) + '</parameter>' + chr(10))}"
            )
            parts.append(parameter if key in required else f"({parameter})?")
        parts.append(literal("</function>"))
        return " ".join(parts)

    def loose_call(self, name: str, rules: RuleSet) -> str:
        """Any parameters, each value raw text without `</`."""
        text = rules.shared("xml-text", xml_text)
        key = char_class(complement([(ord(">"), ord(">")), (ord("\n"), ord("\n"))]))
        parameter = f'"<parameter=" {key}+ ">\\n" {text} "\\n</parameter>\\n"'
        return f"{literal(f'<function={name}>' + chr(10))} ({parameter})* {literal('</function>')}"

    def auto_block(self, call: str, max_calls: int, rules: RuleSet) -> CallBlock:
        return CallBlock(self.marker, f'"\\n" {call} "\\n"', self.end, last=max_calls == 1)

    def forced(self, call: str, max_calls: int, rules: RuleSet) -> str:
        block = rules.add("tool_call_block", f'"<tool_call>\\n" {call} "\\n</tool_call>"')
        return f'{block} ("\\n" {block}){{0,{max_calls - 1}}}' if max_calls > 1 else block
