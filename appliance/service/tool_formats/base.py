"""What every call format shares: the parsed call, the format's interface, and JSON helpers.

A call's `arguments` are always strict JSON (RFC 8259) that any parser reads back as the model
meant them: the formats decode the model's JSON with `DECODER`, which refuses `NaN`, `Infinity`,
`-Infinity` and numbers beyond a double's range (`1e999`, which Python would read as infinity),
and `parsed_call` refuses text no UTF-8 encoder can write (a lone surrogate, `"\\ud800"`). A call
whose JSON is refused is a malformed call, as a call that is not JSON at all: its format leaves
it where it leaves those (see `service.tool_parsers`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from appliance.grammar import schema_expression
from appliance.grammar.ebnf import RuleSet, literal
from appliance.grammar.json_schema import SPACE
from appliance.service.tool_formats.scanning import JsonScanner, Scanner, blank_end

__all__ = [
    "DECODER",
    "NO_SCHEMAS",
    "CallBlock",
    "CallFormat",
    "ParsedCall",
    "json_call",
    "json_values",
    "parsed_call",
    "strict_json",
    "valid_prefix",
]


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise ValueError(f"{text} is beyond a double's range")
    return number


DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)
"""Strict JSON: raises ValueError (RecursionError when nested past Python's limit) on what RFC
8259 does not allow, and on numbers that overflow a double."""
NO_SCHEMAS: Mapping[str, Any] = {}


def strict_json(text: str) -> Any:
    """The value of `text` (JSON with whitespace around it), read by `DECODER`."""
    return DECODER.decode(text)


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: str
    """JSON text of the arguments object."""


def parsed_call(name: str, arguments: dict[str, Any]) -> ParsedCall | None:
    """The call, its arguments as JSON text; None if the name or the arguments hold text no
    encoder can write (a lone surrogate a JSON escape made), or nest too deep to write back (the
    decoder stops near Python's recursion limit, and writing starts deeper in the stack)."""
    try:
        text = json.dumps(arguments, ensure_ascii=False, allow_nan=False)
        name.encode()
        text.encode()
    except (ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        return None
    return ParsedCall(name=name, arguments=text)


def json_call(obj: Any, arguments_key: str = "arguments") -> ParsedCall | None:
    """The call a decoded `{"name": ..., "arguments": {...}}` object holds (None if it holds none);
    arguments given as JSON text are read too."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    arguments = obj.get(arguments_key, obj.get("arguments", obj.get("parameters", {})))
    if isinstance(arguments, str):
        try:
            arguments = strict_json(arguments)
        except (ValueError, RecursionError):
            return None
    if not isinstance(arguments, dict):
        return None
    return parsed_call(obj["name"], arguments)


def json_values(text: str, position: int, separator: str) -> list[tuple[Any, int]]:
    """Consecutive JSON values from `position`, separated by `separator` (and whitespace), each
    with the position after it; stops at the first thing that is not one."""
    values: list[tuple[Any, int]] = []
    while True:
        start = blank_end(text, position)
        if values:
            if not text.startswith(separator, start):
                return values
            start = blank_end(text, start + len(separator))
        try:
            value, position = DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):  # a model can write 2,000 brackets as well as text
            return values
        values.append((value, position))


def valid_prefix(candidates: list[tuple[Any, int]], arguments_key: str = "arguments") -> tuple[list[ParsedCall], int]:
    """The leading candidates that are calls, and where the last of them ends."""
    calls, end = [], 0
    for value, position in candidates:
        call = json_call(value, arguments_key)
        if call is None:
            break
        calls.append(call)
        end = position
    return calls, end


@dataclass(frozen=True)
class CallBlock:
    """Where calls may start in a model's free text (`tool_choice: auto`): the text runs until
    the model writes `begin` (the format's marker, the trigger), then what follows matches the
    grammar expression `content` and `end` closes the block; free text again after it, unless
    `last` (the answer ends with the block: the format's calls run to the end of the answer, or
    one block holds all of them)."""

    begin: str
    content: str
    end: str = ""
    last: bool = False


class CallFormat:
    """One model family's way of writing tool calls.

    `marker` starts the calls ("" for llama3_json, whose calls are the whole answer); `end`, when
    the format has one, closes a block of calls, after which the answer may go on as text (else
    the calls run to the end of the answer). `ToolCallStream` streams text around them.
    """

    name = ""
    marker = ""
    end = ""
    id_length = 24
    arguments_key = "arguments"

    def parse_calls(self, text: str, schemas: Mapping[str, Any] = NO_SCHEMAS) -> tuple[list[ParsedCall], int]:
        """The complete, valid calls at the start of `text` (which starts at the marker) and where
        they end. What follows (e.g. a call cut off by max_tokens) is not a call. `schemas`: the
        request's tools' parameter schemas by name, for formats whose values are typed by them."""
        raise NotImplementedError

    def block_scanner(self) -> Scanner:
        """What finds where a block of calls ends (formats with an `end`), fed the text after
        the marker: by default `end` outside the JSON strings of the calls."""
        return JsonScanner((self.end,))

    def write_calls(self, calls: list[tuple[str, dict[str, Any]]]) -> str:
        """(name, arguments) calls as the model writes them (for prompts whose template cannot)."""
        raise NotImplementedError

    def call_grammar(self, name: str, schema: dict[str, Any], rules: RuleSet, path: str) -> str:
        """The grammar expression of one call of the function `name` with arguments valid against
        `schema`: by default the JSON object `{"name": ..., "<arguments_key>": {...}}`."""
        arguments = schema_expression(schema, rules, path)
        return (
            f'"{{" {literal(chr(34) + "name" + chr(34) + ":")} {SPACE} {literal(json.dumps(name))} '
            f'"," {SPACE} {literal(json.dumps(self.arguments_key) + ":")} {SPACE} {arguments} "}}"'
        )

    def loose_call(self, name: str, rules: RuleSet) -> str:
        """The grammar expression of a call of `name` with any arguments (an object): for a tool
        whose schema no grammar here can express, in auto mode, so that its calls still parse."""
        return self.call_grammar(name, {"type": "object"}, rules, "")

    def auto_block(self, call: str, max_calls: int, rules: RuleSet) -> CallBlock | None:
        """The block of 1 to `max_calls` calls, each matching the rule `call`, that free text may
        hold (`tool_choice: auto`); None for a format without a marker (`auto_answer`)."""
        raise NotImplementedError

    def auto_answer(self, call: str, max_calls: int, rules: RuleSet) -> str:
        """For a format without a marker: the grammar expression of a whole answer that is either
        calls or text that does not start like one."""
        raise NotImplementedError

    def forced(self, call: str, max_calls: int, rules: RuleSet) -> str:
        """The grammar expression of an answer made of 1 to `max_calls` calls, each matching the
        rule `call`: the answer may end after every complete call.

        What repeats is a rule of its own: the engine writes out each copy, and each copied
        literal costs it a pass over the vocabulary when compiling.
        """
        raise NotImplementedError
