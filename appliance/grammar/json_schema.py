"""JSON schemas -> grammars for compact JSON (at most one space after `:` and `,`).

A grammar may allow fewer documents than the schema (every generated document must validate; not
every valid document needs to be reachable): objects keep the schema's property order and never add
undeclared properties, bounded numbers are written without exponents, integers have at most 16
digits. Keywords that constrain documents but cannot be honoured that way (`not`, `if`,
`uniqueItems`, `multipleOf`, ... : `UNSUPPORTED`) are refused with an error naming them, never
ignored. Every other keyword the writer does not know (`x-*`, `strict`, `example`, `nullable`, ...)
is an annotation, as JSON Schema says of unknown keywords: schemas from MCP servers, zod and
pydantic carry them. None of them can make a generated document invalid (`nullable` only widens).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any

from appliance.grammar.bounds import checkpoint
from appliance.grammar.ebnf import ANY_CHAR, GrammarError, RuleSet, char_class, literal, repeat, subtract
from appliance.grammar.regex import regex_expression
from appliance.grammar.schema_size import MAX_DEPTH, count_schema, resolve

__all__ = ["json_object_expression", "json_object_grammar", "json_schema_grammar", "refused_part", "schema_expression"]

SPACE = '" "?'
MAX_DIGITS = 16
_ASSERTIONS = {
    "type",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
}
UNSUPPORTED = frozenset(
    {
        "not",
        "if",
        "then",
        "else",
        "uniqueItems",
        "multipleOf",
        "contains",
        "minContains",
        "maxContains",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
        "unevaluatedProperties",
        "unevaluatedItems",
        "additionalItems",
        "$dynamicRef",
        "$recursiveRef",
    }
)
"""Keywords that restrict which documents are valid and that no grammar written here enforces."""
_MEANINGFUL = _ASSERTIONS | UNSUPPORTED


def _keywords(schema: dict) -> set[str]:
    """The keywords of `schema` that constrain documents (annotations and unknown ones left out)."""
    return set(schema) & _MEANINGFUL


_TYPES = ("string", "integer", "number", "boolean", "null", "object", "array")
# Formats written as regular expressions (each generated value is a valid instance).
_FORMATS = {
    "date": r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])",
    "time": r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])",
    "date-time": r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
    r"(\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])",
    "uuid": r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    "email": r"[a-zA-Z0-9._%+-]{1,64}@[a-zA-Z0-9-]{1,63}(\.[a-zA-Z0-9-]{1,63}){1,4}",
    "ipv4": r"((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])",
}


def _json(rules: RuleSet, kind: str) -> str:
    """The shared rule for any JSON `kind` (char, string, integer, number, value, object, array),
    defined with what it needs on first use. No free whitespace."""
    if kind == "char":
        plain = char_class(subtract(ANY_CHAR, [(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)]))
        return rules.shared("json-char", lambda: f'{plain} | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{{4}})')
    if kind == "string":
        return rules.shared("json-string", lambda: f'"\\"" {_json(rules, "char")}* "\\""')
    if kind == "integer":
        return rules.shared("json-integer", lambda: f'"-"? ("0" | [1-9] {_digits(0, MAX_DIGITS - 1, rules)})')
    if kind == "number":
        return rules.shared(
            "json-number",
            lambda: (
                f'{_json(rules, "integer")} ("." {_digits(1, MAX_DIGITS, rules)})? ([eE] [-+]? {_digits(1, 3, rules)})?'
            ),
        )
    string, value = _json(rules, "string"), "json-value"  # json-value refers to itself (nesting)

    def any_value() -> str:
        rules.shared(
            "json-object",
            lambda: f'"{{" ({string} ":" {SPACE} {value} ("," {SPACE} {string} ":" {SPACE} {value})*)? "}}"',
        )
        rules.shared("json-array", lambda: f'"[" ({value} ("," {SPACE} {value})*)? "]"')
        return f'json-object | json-array | {string} | {_json(rules, "number")} | "true" | "false" | "null"'

    rules.shared(value, any_value)
    return value if kind == "value" else f"json-{kind}"


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(", ", ": "), ensure_ascii=False)


# -- numbers ------------------------------------------------------------------------------------


def _digits(low: int, high: int, rules: RuleSet) -> str:
    """low..high decimal digits."""
    return repeat("[0-9]", low, high, rules)


def _any_digits(count: int, rules: RuleSet) -> str:
    """Exactly `count` digits, as a shared rule: a range's every level ends in free digits, and a
    rule costs the engine once however often it is used (written out at each level, a 16-digit
    range on both sides of zero cost 257 states, over the budget). Each count is one digit and
    the next shorter count's rule, so all the counts of a range share their digits: zod's
    safe-integer bounds (`maximum: 9007199254740991`) cost 47-77 states, 121-151 as `[0-9]{n}`."""
    if count == 1:
        return "[0-9]"
    return rules.shared(f"digits-{count}", lambda: f"[0-9] {_any_digits(count - 1, rules)}")


def _same_length_range(low: str, high: str, rules: RuleSet) -> str:
    """Digit strings of one length from `low` to `high` (inclusive).

    Linear in the number of digits: a tail that may be anything is `[0-9]{n}`, never split again.
    """
    if low == high:
        return literal(low)
    rest = len(low) - 1
    if low[0] == high[0]:
        return f"{literal(low[0])} {_same_length_range(low[1:], high[1:], rules)}"
    # The first digits whose tails range over every digit string join one class.
    free_low = int(low[0]) + (low[1:] != "0" * rest)
    free_high = int(high[0]) - (high[1:] != "9" * rest)
    options = []
    if low[1:] != "0" * rest:
        options.append(f"{literal(low[0])} {_same_length_range(low[1:], '9' * rest, rules)}")
    if free_low <= free_high:
        digit = f"[{free_low}]" if free_low == free_high else f"[{free_low}-{free_high}]"
        options.append(f"{digit} {_any_digits(rest, rules)}" if rest else digit)
    if high[1:] != "9" * rest:
        options.append(f"{literal(high[0])} {_same_length_range('0' * rest, high[1:], rules)}")
    return options[0] if len(options) == 1 else "(" + " | ".join(options) + ")"


def _natural_range(low: int, high: int, rules: RuleSet) -> str:
    """Decimal numerals (no leading zeros) of the integers low..high, 0 <= low <= high."""
    short, long = len(str(low)), len(str(high))
    if short == long:
        return _same_length_range(str(low), str(high), rules)
    # Lengths whose every numeral is in range are one option; the lengths at either end that are
    # only partly in range get their own.
    # (For one digit, only 0 starts a full length: 1..9 is a partial one.)
    first_full = short if low == 0 or (short > 1 and low == 10 ** (short - 1)) else short + 1
    last_full = long if high == 10**long - 1 else long - 1
    options = []
    if first_full > short:
        options.append(_same_length_range(str(low), "9" * short, rules))
    if first_full == 1:
        options.append("[0-9]")
        first_full = 2
    if first_full <= last_full:
        options.append(f"[1-9] {_digits(first_full - 1, last_full - 1, rules)}")
    if last_full < long:
        options.append(_same_length_range("1" + "0" * (long - 1), str(high), rules))
    return options[0] if len(options) == 1 else "(" + " | ".join(options) + ")"


def _bounds(schema: dict, path: str) -> tuple[float | None, bool, float | None, bool]:
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        value = schema.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise GrammarError(f"`{key}` must be a number.", f"{path}.{key}")
    low, low_exclusive = schema.get("minimum"), False
    if schema.get("exclusiveMinimum") is not None and (low is None or schema["exclusiveMinimum"] >= low):
        low, low_exclusive = schema["exclusiveMinimum"], True
    high, high_exclusive = schema.get("maximum"), False
    if schema.get("exclusiveMaximum") is not None and (high is None or schema["exclusiveMaximum"] <= high):
        high, high_exclusive = schema["exclusiveMaximum"], True
    return low, low_exclusive, high, high_exclusive


def _integer_span(schema: dict, path: str) -> tuple[int, int]:
    low, low_exclusive, high, high_exclusive = _bounds(schema, path)
    limit = 10**MAX_DIGITS - 1
    first = -limit if low is None else (math.floor(low) + 1 if low_exclusive else math.ceil(low))
    last = limit if high is None else (math.ceil(high) - 1 if high_exclusive else math.floor(high))
    return max(first, -limit), min(last, limit)


def _integers(first: int, last: int, rules: RuleSet) -> list[str]:
    """Alternatives for the integers first..last."""
    options = []
    if last >= 0 and first <= last:
        options.append(_natural_range(max(first, 0), last, rules))
    if first < 0 and first <= last:
        options.append(f'"-" {_natural_range(max(-last, 1), -first, rules)}')
    return options


def _integer(schema: dict, path: str, rules: RuleSet) -> str:
    low, _, high, _ = _bounds(schema, path)
    if low is None and high is None:
        return _json(rules, "integer")
    first, last = _integer_span(schema, path)
    options = _integers(first, last, rules)
    if not options:
        raise GrammarError("No integer satisfies these bounds.", path)
    return options[0] if len(options) == 1 else "(" + " | ".join(options) + ")"


def _number(schema: dict, path: str, rules: RuleSet) -> str:
    low, _, high, _ = _bounds(schema, path)
    if low is None and high is None:
        return _json(rules, "number")
    limit = 10**MAX_DIGITS - 1
    first, last = _integer_span(schema, path)
    options = _integers(first, last, rules)
    # A fraction ending in 1-9 is never zero: k.f lies strictly between k and k+1 (or -k-1 and -k).
    fraction = rules.shared("json-fraction", lambda: f'"." {_digits(0, MAX_DIGITS - 2, rules)} [1-9]')
    # Without a bound, fractions go as far as integers do.
    low_value = -limit - 1 if low is None else low
    high_value = limit + 1 if high is None else high
    positive = (max(math.ceil(low_value), 0), min(math.floor(high_value) - 1, limit))
    if positive[0] <= positive[1]:
        options.append(f"{_natural_range(*positive, rules)} {fraction}")
    negative = (max(math.ceil(-high_value), 0), min(math.floor(-low_value) - 1, limit))
    if negative[0] <= negative[1]:
        options.append(f'"-" {_natural_range(*negative, rules)} {fraction}')
    if not options:
        raise GrammarError("No number satisfies these bounds.", path)
    return "(" + " | ".join(options) + ")"


# -- the converter ------------------------------------------------------------------------------


class _Converter:
    def __init__(self, root: Any, rules: RuleSet) -> None:
        self.root = root
        self.rules = rules
        self.refs: dict[str, str] = {}
        self.depth = 0

    def expression(self, schema: Any, path: str) -> str:
        checkpoint()
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise GrammarError(f"The schema nests more than {MAX_DEPTH} levels deep here.", path)
            return self.unnested(schema, path)
        finally:
            self.depth -= 1

    def unnested(self, schema: Any, path: str) -> str:
        if schema is True or schema == {}:
            return _json(self.rules, "value")
        if not isinstance(schema, dict):
            raise GrammarError("A schema must be an object (or `true`).", path)
        refused = sorted(set(schema) & UNSUPPORTED)
        if refused:
            raise GrammarError(
                f"The schema keyword `{refused[0]}` is not supported for structured output.", _join(path, refused[0])
            )
        if "$ref" in schema:
            if _keywords(schema) - {"$ref"}:
                raise GrammarError("`$ref` cannot be combined with other keywords here.", path)
            return self.reference(schema["$ref"], _join(path, "$ref"))
        if "const" in schema:
            return literal(_compact(schema["const"]))
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                raise GrammarError("`enum` must be a non-empty array.", _join(path, "enum"))
            return "(" + " | ".join(self.rules.pieces(literal(_compact(value)) for value in values)) + ")"
        for keyword in ("anyOf", "oneOf", "allOf"):
            if keyword in schema:
                return self.combination(schema, keyword, path)
        types = schema.get("type", _implied_type(schema))
        if types is None:
            return _json(self.rules, "value")
        if isinstance(types, str):
            types = [types]
        if not isinstance(types, list) or not types or any(kind not in _TYPES for kind in types):
            raise GrammarError(f"`type` must be one of {', '.join(_TYPES)} (or a list of them).", _join(path, "type"))
        options = [self.typed(kind, schema, path) for kind in dict.fromkeys(types)]
        return options[0] if len(options) == 1 else "(" + " | ".join(options) + ")"

    def combination(self, schema: dict, keyword: str, path: str) -> str:
        branches = schema[keyword]
        where = _join(path, keyword)
        if not isinstance(branches, list) or not branches:
            raise GrammarError(f"`{keyword}` must be a non-empty array of schemas.", where)
        if _keywords(schema) - {keyword}:
            raise GrammarError(f"`{keyword}` cannot be combined with other keywords here.", path)
        if keyword == "allOf":
            if len(branches) != 1:
                raise GrammarError("`allOf` with more than one schema is not supported.", where)
            return self.expression(branches[0], f"{where}[0]")
        # oneOf is generated like anyOf: a value is built from one branch (discriminated unions).
        options = self.rules.pieces(
            self.expression(branch, f"{where}[{index}]") for index, branch in enumerate(branches)
        )
        return "(" + " | ".join(options) + ")"

    def reference(self, ref: Any, path: str) -> str:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise GrammarError("Only local references (`#/$defs/...`) are supported.", path)
        if ref not in self.refs:
            try:
                target = resolve(self.root, ref)
            except KeyError:
                raise GrammarError(f"The reference '{ref}' does not resolve.", path) from None
            name = self.rules.reserve(ref.rsplit("/", 1)[-1] or "root_ref")
            self.refs[ref] = name
            self.rules.define(name, self.expression(target, ref))
        return self.refs[ref]

    def typed(self, kind: str, schema: dict, path: str) -> str:
        if kind == "string":
            return self.string(schema, path)
        if kind == "integer":
            return _integer(schema, path, self.rules)
        if kind == "number":
            return _number(schema, path, self.rules)
        if kind == "boolean":
            return '("true" | "false")'
        if kind == "null":
            return '"null"'
        if kind == "object":
            return self.object(schema, path)
        return self.array(schema, path)

    def string(self, schema: dict, path: str) -> str:
        pattern, fmt = schema.get("pattern"), schema.get("format")
        if pattern is not None or fmt is not None:
            if "minLength" in schema or "maxLength" in schema or (pattern is not None and fmt is not None):
                raise GrammarError("`pattern`/`format` cannot be combined with each other or with lengths.", path)
            if fmt is not None and fmt not in _FORMATS:
                raise GrammarError(
                    f"The string format '{fmt}' is not supported (supported: {', '.join(_FORMATS)}).",
                    _join(path, "format"),
                )
            if pattern is not None and not isinstance(pattern, str):
                raise GrammarError("`pattern` must be a string.", _join(path, "pattern"))
            if fmt is not None:  # one rule per format, however many fields use it (compiled once)
                inner = self.rules.shared(
                    f"format-{fmt}", lambda: regex_expression(_FORMATS[fmt], self.rules, json_string=True)
                )
                return f'"\\"" {inner} "\\""'
            try:
                inner = regex_expression(pattern, self.rules, json_string=True)
            except GrammarError as exc:
                raise GrammarError(exc.message, _join(path, "pattern")) from None
            return f'"\\"" {inner} "\\""'
        low, high = _counts(schema, "minLength", "maxLength", path)
        char = _json(self.rules, "char")
        return f'"\\"" {repeat(char, low or 0, high, self.rules)} "\\""'

    def object(self, schema: dict, path: str) -> str:
        properties = schema.get("properties") or {}
        required = schema.get("required") or []
        if not isinstance(properties, dict):
            raise GrammarError("`properties` must be an object.", _join(path, "properties"))
        if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
            raise GrammarError("`required` must be an array of property names.", _join(path, "required"))
        members = dict(properties)
        for name in required:
            members.setdefault(name, True)
        minimum, maximum = _counts(schema, "minProperties", "maxProperties", path)
        if not members:
            return self.mapping(schema, path, minimum, maximum)
        if (minimum or 0) > len(set(required)) or (maximum is not None and maximum < len(members)):
            raise GrammarError("`minProperties`/`maxProperties` beside `properties` are not supported.", path)
        texts = self.rules.pieces(
            f"{literal(_compact(name) + ':')} {SPACE} {self.expression(sub, _join(path, 'properties', name))}"
            for name, sub in members.items()
        )
        entries = [(name in required, text) for name, text in zip(members, texts)]
        return '"{" ' + _members(entries, self.rules) + ' "}"'

    def mapping(self, schema: dict, path: str, minimum: int | None, maximum: int | None) -> str:
        extra = schema.get("additionalProperties", True)
        if extra is False:
            if minimum:
                raise GrammarError("`minProperties` cannot be met without properties.", path)
            return '"{" "}"'
        value = self.expression(extra, _join(path, "additionalProperties"))
        entry = self.rules.add("entry", f'{_json(self.rules, "string")} ":" {SPACE} {value}')
        return _list("{", "}", entry, minimum or 0, maximum, self.rules)

    def array(self, schema: dict, path: str) -> str:
        low, maximum = _counts(schema, "minItems", "maxItems", path)
        minimum = low or 0
        prefix = schema.get("prefixItems") or []
        if not isinstance(prefix, list):
            raise GrammarError("`prefixItems` must be an array of schemas.", _join(path, "prefixItems"))
        items = schema.get("items", True)
        item = None if items is False else self.expression(items, _join(path, "items"))
        if not prefix:
            if item is None:
                return '"[" "]"'
            return _list("[", "]", item, minimum, maximum, self.rules)
        if maximum is not None and maximum < len(prefix):
            raise GrammarError("`maxItems` is below the number of `prefixItems`.", path)
        parts = self.rules.pieces(
            self.expression(sub, f"{_join(path, 'prefixItems')}[{index}]") for index, sub in enumerate(prefix)
        )
        text = f' "," {SPACE} '.join(parts)
        if item is not None:
            more_max = None if maximum is None else maximum - len(prefix)
            text += " " + repeat(f'("," {SPACE} {item})', max(minimum - len(prefix), 0), more_max, self.rules)
        elif minimum > len(prefix):
            raise GrammarError("`minItems` is above the number of `prefixItems` and `items` is false.", path)
        return f'"[" {text} "]"'


def _join(path: str, *parts: str) -> str:
    return ".".join(part for part in (path, *parts) if part)


def _implied_type(schema: dict) -> str | None:
    if {"properties", "required", "additionalProperties", "minProperties", "maxProperties"} & set(schema):
        return "object"
    if {"items", "prefixItems", "minItems", "maxItems"} & set(schema):
        return "array"
    if {"minLength", "maxLength", "pattern", "format"} & set(schema):
        return "string"
    if {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} & set(schema):
        return "number"
    return None


def _count(schema: dict, key: str, path: str) -> int | None:
    value = schema.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise GrammarError(f"`{key}` must be a non-negative integer.", _join(path, key))
    return value


def _counts(schema: dict, low_key: str, high_key: str, path: str) -> tuple[int | None, int | None]:
    low, high = _count(schema, low_key, path), _count(schema, high_key, path)
    if low is not None and high is not None and low > high:
        raise GrammarError(f"No value satisfies `{low_key}` {low} with `{high_key}` {high}.", path)
    return low, high


def _list(open_: str, close: str, item: str, minimum: int, maximum: int | None, rules: RuleSet) -> str:
    """`open item, item, ... close` with minimum..maximum items."""
    if maximum is not None and maximum < minimum:
        raise GrammarError("The maximum count is below the minimum count.")
    if maximum == 0:
        return f"{literal(open_)} {literal(close)}"
    item = _named(item, "item", rules)  # written twice below: a name keeps nested lists linear
    more = repeat(f'("," {SPACE} {item})', max(minimum - 1, 0), None if maximum is None else maximum - 1, rules)
    body = f"{item} {more}"
    if minimum == 0:
        body = f"({body})?"
    return f"{literal(open_)} {body} {literal(close)}"


def _members(entries: list[tuple[bool, str]], rules: RuleSet) -> str:
    """Object members in order; required ones always, optional ones may be left out.

    Each optional member is a rule of its own: the engine compiles a rule on its own, but the
    positions of an inline optional group also hold everything that may follow it (measured: one
    required and 400 optional properties, inline, 43 s of compile inside the engine's step; as
    rules, about 2 s; see `closure`)."""
    first_required = next((index for index, (required, _) in enumerate(entries) if required), None)
    if first_required is not None:
        parts = [f'({_rule(entry, rules)} "," {SPACE})?' for _, entry in entries[:first_required]]
        parts.append(entries[first_required][1])
        for required, entry in entries[first_required + 1 :]:
            parts.append(f'"," {SPACE} {entry}' if required else f'("," {SPACE} {_rule(entry, rules)})?')
        return " ".join(parts)
    # All optional: any one may come first, then each later one may follow. `rest_i` (what may
    # follow once member i is written) keeps this linear in the number of members.
    names = [_rule(entry, rules) for _, entry in entries]
    rest = '""'
    options = [names[-1]]
    for name, following in zip(reversed(names[:-1]), reversed(names[1:])):
        rest = rules.add("rest", f'("," {SPACE} {following})? {rest}'.removesuffix(' ""'))
        options.append(f"{name} {rest}")
    return "(" + " | ".join(reversed(options)) + ")?"


def _rule(entry: str, rules: RuleSet) -> str:
    """A rule for an optional member (its name, if it is one already)."""
    return entry if entry.replace("-", "_").isidentifier() else rules.add("member", entry)


def _named(expression: str, hint: str, rules: RuleSet) -> str:
    """`expression` itself if it is short, else a rule for it (to refer to it more than once)."""
    if len(expression) <= 24 or expression.replace("-", "_").isidentifier():
        return expression
    return rules.add(hint, expression)


def schema_expression(schema: Any, rules: RuleSet, path: str = "") -> str:
    """A grammar expression (rules added to `rules`) for compact JSON valid against `schema`.

    `$ref`s resolve against `schema` itself. The schema's size is counted into `rules` first
    (`count_schema`), so the schemas of one grammar are bounded together before any is converted.
    Raises GrammarError with the path of the problem.
    """
    count_schema(schema, rules, path)
    return _Converter(schema, rules).expression(schema, path)


def json_schema_grammar(schema: Any) -> str:
    """A whole grammar producing compact JSON documents valid against `schema`."""
    rules = RuleSet()
    return rules.render(schema_expression(schema, rules))


_BLAME_PARTS = 256
"""Subschemas `refused_part` converts at most (it runs only for refused schemas)."""


def refused_part(schema: Any, check: Callable[[str], object]) -> str:
    """The path of the deepest part of `schema` whose own grammar `check` refuses ("" for the whole).

    A grammar is refused as a whole (too complex, ambiguous); this says where in the schema that
    comes from, so that the error can name it.
    """
    found, found_depth = "", -1
    for count, (path, depth, part) in enumerate(_parts(schema, "", 0)):
        if count == _BLAME_PARTS:
            break
        if depth <= found_depth:
            continue
        rules = RuleSet()
        try:
            check(rules.render(_Converter(schema, rules).expression(part, path)))
        except GrammarError:
            key = next((key for key in ("pattern", "format") if key in part), None)
            found, found_depth = _join(path, key) if key else path, depth
    return found


def _parts(schema: Any, path: str, depth: int) -> Iterator[tuple[str, int, dict]]:
    """Every subschema (objects only) with its path and depth, parents first."""
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return
    yield path, depth, schema
    for key in ("$defs", "definitions", "properties"):  # a definition before its references
        if isinstance(schema.get(key), dict):
            for name, sub in schema[key].items():
                yield from _parts(sub, _join(path, key, name), depth + 1)
    for key in ("items", "additionalProperties"):
        yield from _parts(schema.get(key), _join(path, key), depth + 1)
    for key in ("prefixItems", "anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list):
            for index, sub in enumerate(schema[key]):
                yield from _parts(sub, f"{_join(path, key)}[{index}]", depth + 1)


def json_object_grammar() -> str:
    """A whole grammar producing any compact JSON object (`response_format: json_object`)."""
    rules = RuleSet()
    return rules.render(json_object_expression(rules))


def json_object_expression(rules: RuleSet) -> str:
    """The expression (rules added to `rules`) of any compact JSON object."""
    return _json(rules, "object")
