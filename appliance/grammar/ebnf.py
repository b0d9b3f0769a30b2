"""Writing EBNF in the syntax xgrammar compiles, and reading a user's grammar in that syntax.

The syntax (xgrammar's, close to llama.cpp's GBNF): `name ::= alternatives`, `|` between
alternatives, `"literal"` strings, `[a-z]` / `[^...]` character classes, `( ... )` groups, the
quantifiers `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`, and `#` comments. The start rule is `root`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from appliance.grammar.bounds import INPUT_LIMITS, MAX_GRAMMAR_BYTES, checkpoint

__all__ = [
    "MAX_CODEPOINT",
    "MAX_REPEAT",
    "GrammarError",
    "RuleSet",
    "char_class",
    "choice_grammar",
    "complement",
    "literal",
    "parse_grammar",
    "repeat",
    "subtract",
]

MAX_CODEPOINT = 0x10FFFF
ANY_CHAR = ((0, 0xD7FF), (0xE000, MAX_CODEPOINT))
"""Every Unicode scalar value (surrogates cannot be written in UTF-8)."""
MAX_REPEAT = 10_000
"""Largest `{m,n}` bound accepted: bigger ones make grammar compilation slow."""

Ranges = list[tuple[int, int]]


class GrammarError(ValueError):
    """A constraint that cannot be turned into a grammar; `path` locates it inside the field."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.path = path


# -- writing ------------------------------------------------------------------------------------


def _escape(codepoint: int, specials: str) -> str:
    char = chr(codepoint)
    if 0x20 <= codepoint < 0x7F and char not in specials:
        return char
    if codepoint <= 0xFFFF:
        return f"\\u{codepoint:04x}"
    return f"\\U{codepoint:08x}"


def literal(text: str) -> str:
    """A grammar string literal matching exactly `text`."""
    return '"' + "".join(_escape(ord(char), '"\\') for char in text) + '"'


def normalize(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """Sorted, merged, non-overlapping codepoint ranges (both ends inclusive)."""
    merged: Ranges = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


def complement(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """The characters (of ANY_CHAR) not in `ranges`."""
    result: Ranges = []
    start = 0
    for low, high in normalize(ranges):
        if low > start:
            result.append((start, low - 1))
        start = high + 1
    if start <= MAX_CODEPOINT:
        result.append((start, MAX_CODEPOINT))
    return _valid(result)


def _valid(ranges: Ranges) -> Ranges:
    kept: Ranges = []
    for low, high in ranges:
        for valid_low, valid_high in ANY_CHAR:
            if valid_low <= high and low <= valid_high:
                kept.append((max(low, valid_low), min(high, valid_high)))
    return kept


def subtract(ranges: Iterable[tuple[int, int]], removed: Iterable[tuple[int, int]]) -> Ranges:
    kept = complement(removed)
    result: Ranges = []
    for low, high in normalize(ranges):
        for keep_low, keep_high in kept:
            if keep_low <= high and low <= keep_high:
                result.append((max(low, keep_low), min(high, keep_high)))
    return result


def char_class(ranges: Sequence[tuple[int, int]]) -> str:
    """A character class matching exactly the characters in `ranges`.

    Always written as positive ranges of valid characters: xgrammar's negated classes (`[^"]`)
    also admit byte sequences that are not UTF-8, which then break detokenization. An empty set
    cannot be written as a class: callers must check for it first.
    """
    ranges = _valid(normalize(ranges))
    if not ranges:
        raise GrammarError("The constraint allows no character at some position.")
    specials = "\\]-^["
    body = "".join(
        _escape(low, specials) if low == high else f"{_escape(low, specials)}-{_escape(high, specials)}"
        for low, high in ranges
    )
    return f"[{body}]"


UNROLL_LIMIT = 16
"""Largest count written as `x{m,n}`, which xgrammar unrolls into one copy of x per count.

Each copied terminal costs the engine a pass over the whole vocabulary when it compiles the grammar
(about 10 ms for a 49k-token vocabulary on 2 cores, inside the serving step), so larger counts are
built from powers of 16 instead (`RuleSet.counted`): O(log n) copies for any n. (Powers of two
compile faster still but cost ~80 ms more per generated token on that vocabulary: the engine's
parser walks the deeper nesting at every step.)
"""


def repeat(expression: str, low: int, high: int | None, rules: RuleSet | None = None) -> str:
    """`expression` repeated low..high times (high None: unbounded).

    Counts above UNROLL_LIMIT need `rules`, where the power-of-two rules are added.
    """
    if low > MAX_REPEAT or (high is not None and high > MAX_REPEAT):
        raise GrammarError(f"Repetition counts above {MAX_REPEAT} are not supported.")
    if high is not None and high < low:
        raise GrammarError(f"Repetition {{{low},{high}}} has its maximum below its minimum.")
    if (low, high) == (0, None):
        return f"{expression}*"
    if (low, high) == (1, None):
        return f"{expression}+"
    if (low, high) == (0, 1):
        return f"{expression}?"
    if (low, high) == (1, 1):
        return expression
    if rules is not None and max(low, high or 0) > UNROLL_LIMIT:
        return rules.counted(expression, low, high)
    if high is None:
        return f"{expression}{{{low},}}"
    if low == high:
        return f"{expression}{{{low}}}"
    return f"{expression}{{{low},{high}}}"


def _base16(number: int) -> list[int]:
    """The base-16 digits of `number`, lowest first."""
    digits = []
    while number:
        number, digit = divmod(number, 16)
        digits.append(digit)
    return digits


class RuleSet:
    """The named rules of one grammar under construction; `render` writes the grammar.

    It also keeps the grammar's bounds while it is written: its size (`max_bytes`, checked as
    each rule is defined), what its inputs hold (`count`, against INPUT_LIMITS) and whether its
    client has left (`checkpoint`).
    """

    def __init__(self, max_bytes: int = MAX_GRAMMAR_BYTES) -> None:
        self._rules: dict[str, str | None] = {}
        self._numbers: dict[str, int] = {}  # the next number to try after each base name
        self._counting: dict[tuple, str] = {}  # the rules `counted` wrote, by what they match
        self.max_bytes = max_bytes
        self.bytes = 0
        """Bytes of the rules defined so far, as `render_rules` writes them."""
        self.held: Counter[str] = Counter()
        """What the inputs written into this grammar hold, by INPUT_LIMITS's names."""

    def reserve(self, hint: str) -> str:
        """A fresh rule name (from `hint`) to `define` later: lets a rule refer to itself.

        The names of one base are numbered `base`, `base_2`, `base_3`, ...; the next number to
        try is remembered per base, so a grammar with thousands of `rest` rules is written in
        time linear in their number (it once probed every earlier name for each new one: 8,000
        properties took 19 s). A number is tried at most once per base.
        """
        base = re.sub(r"[^A-Za-z0-9_]+", "_", hint).strip("_").lower() or "rule"
        if base[0].isdigit():
            base = f"r_{base}"
        number = self._numbers.get(base, 1)
        name = base if number == 1 else f"{base}_{number}"
        while name in self._rules or name == "root":
            number += 1
            name = f"{base}_{number}"
        self._numbers[base] = number + 1
        self._rules[name] = None
        return name

    def define(self, name: str, body: str) -> None:
        """Give `name` its body; GrammarError once the grammar passes `max_bytes` (the build
        stops there, not after writing the rest), BuildAbandoned once its client has left."""
        checkpoint()
        self.bytes += len(name) + len(body) + 6  # " ::= " and the newline
        if self.bytes > self.max_bytes:
            raise self.too_large()
        self._rules[name] = body

    def check_room(self, pending: int) -> None:
        """GrammarError if the rules so far and `pending` bytes still to be written (parts of an
        expression under construction) pass `max_bytes`."""
        if self.bytes + pending > self.max_bytes:
            raise self.too_large()

    def pieces(self, texts: Iterable[str]) -> list[str]:
        """`texts` (parts of one expression, all to be written) as a list, taken one at a time:
        the build stops (GrammarError) as soon as they pass `max_bytes` with the rules so far,
        without writing the rest."""
        found: list[str] = []
        pending = 0
        for text in texts:
            pending += len(text)
            self.check_room(pending)
            found.append(text)
        return found

    def too_large(self) -> GrammarError:
        return GrammarError(
            f"The constraint is too large for structured output: its grammar grew past {self.max_bytes} bytes "
            "while it was written."
        )

    def count(self, what: str, amount: int, path: str = "") -> None:
        """Add `amount` to what this grammar's inputs hold of `what` (a key of INPUT_LIMITS);
        GrammarError at `path` when that passes its limit."""
        self.held[what] += amount
        limit, described = INPUT_LIMITS[what]
        if self.held[what] > limit:
            raise GrammarError(
                f"The constraint is too large for structured output: it holds {self.held[what]} {described} "
                f"(at most {limit} in one request).",
                path,
            )

    def add(self, hint: str, body: str) -> str:
        name = self.reserve(hint)
        self.define(name, body)
        return name

    def shared(self, name: str, body: Callable[[], str]) -> str:
        """The helper rule `name` (e.g. `json-string`), defined on first use.

        Shared names hold a hyphen, which `reserve` never produces, so they cannot collide.
        """
        if name not in self._rules:
            self._rules[name] = None
            self.define(name, body())
        return name

    def counted(self, expression: str, low: int, high: int | None) -> str:
        """`expression` low..high times, from rules for 16, 256, 4096, ... copies (unambiguous).

        Like a number in base 16: exactly n copies are each power's digit of n in sequence; up to
        n copies are `upto(n) ::= P_k{0,d-1} free_k | P_k{d} upto(n mod 16^k)` (d: n's top digit,
        P_k: 16^k copies, free_k: 0..16^k-1 copies). Every count has one derivation, and the
        grammar holds O(log n) rules, none repeating more than 16 copies.
        """
        unit = self._memo(("unit", expression), "unit", lambda: expression)
        parts = []
        for power, digit in reversed(list(enumerate(_base16(low)))):
            if digit:
                parts.append(repeat(self._power(unit, power), digit, digit))
        if high is None:
            parts.append(f"{unit}*")
        elif high > low:
            parts.append(self._upto(unit, high - low))
        return "(" + " ".join(parts) + ")" if parts else '""'

    def _memo(self, key: tuple, hint: str, body: Callable[[], str]) -> str:
        if key not in self._counting:
            name = self.reserve(hint)
            self._counting[key] = name
            self.define(name, body())
        return self._counting[key]

    def _power(self, unit: str, power: int) -> str:
        """The rule for 16^power copies of `unit`."""
        if power == 0:
            return unit
        lower = self._power(unit, power - 1)
        return self._memo((unit, "x", power), f"{unit}_x{16**power}", lambda: f"{lower}{{16}}")

    def _free(self, unit: str, power: int) -> str:
        """0..16^power - 1 copies of `unit`."""
        if power == 0:
            return '""'
        if power == 1:
            return self._upto(unit, 15)
        lower = self._free(unit, power - 1)
        tail = "" if lower == '""' else f" {lower}"
        return self._memo(
            (unit, "free", power),
            f"{unit}_upto{16**power - 1}",
            lambda: f"{self._power(unit, power - 1)}{{0,15}}{tail}",
        )

    def _upto(self, unit: str, count: int) -> str:
        """0..count copies of `unit` (count >= 1)."""
        power = len(_base16(count)) - 1
        digit, rest = divmod(count, 16**power)
        if power == 0:
            return self._memo((unit, "upto", count), f"{unit}_upto{count}", lambda: f"{unit}{{0,{count}}}")
        chunk, free = self._power(unit, power), self._free(unit, power)
        below = free if digit == 1 else f"{repeat(chunk, 0, digit - 1)} {free}"
        top = repeat(chunk, digit, digit) + (f" {self._upto(unit, rest)}" if rest else "")
        return self._memo((unit, "upto", count), f"{unit}_upto{count}", lambda: f"{top} | {below}")

    def claim(self, name: str) -> None:
        """Keep `name` (a user's rule) from being given to another rule."""
        self._rules.setdefault(name, None)

    def render(self, root: str) -> str:
        self.check_room(len(root) + 10)
        return f"root ::= {root}\n" + self.render_rules()

    def render_rules(self) -> str:
        return "".join(f"{name} ::= {body}\n" for name, body in self._rules.items() if body is not None)


# -- reading a user's grammar ------------------------------------------------------------------


@dataclass
class _Token:
    kind: str  # name, define, bar, open, close, quant, string, class
    value: object
    offset: int


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_QUANT = re.compile(r"\{\s*(\d+)\s*(?:(,)\s*(\d*)\s*)?\}")
_SIMPLE_ESCAPES = {"n": 10, "t": 9, "r": 13, "\\": 92, '"': 34, "'": 39, "[": 91, "]": 93, "-": 45, "^": 94, "/": 47}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text

    def where(self, offset: int) -> str:
        line = self.text.count("\n", 0, offset) + 1
        column = offset - (self.text.rfind("\n", 0, offset) + 1) + 1
        return f"line {line}, column {column}"

    def fail(self, message: str, offset: int) -> GrammarError:
        return GrammarError(f"Invalid grammar at {self.where(offset)}: {message}.")

    def escape(self, position: int) -> tuple[int, int]:
        """The codepoint of the escape starting at the backslash at `position`, and its end."""
        marker = self.text[position + 1 : position + 2]
        if marker in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[marker], position + 2
        if marker in _HEX_ESCAPES:
            digits = self.text[position + 2 : position + 2 + _HEX_ESCAPES[marker]]
            if len(digits) == _HEX_ESCAPES[marker] and all(c in "0123456789abcdefABCDEF" for c in digits):
                codepoint = int(digits, 16)
                if codepoint <= MAX_CODEPOINT:
                    return codepoint, position + 2 + len(digits)
        raise self.fail(f"unknown escape '\\{marker}'", position)

    def tokens(self) -> list[_Token]:
        text, position, found = self.text, 0, []
        while position < len(text):
            char = text[position]
            if char.isspace():
                position += 1
            elif char == "#":
                end = text.find("\n", position)
                position = len(text) if end < 0 else end
            elif text.startswith("::=", position):
                found.append(_Token("define", None, position))
                position += 3
            elif char in "|()*+?":
                kind = {"|": "bar", "(": "open", ")": "close"}.get(char, "quant")
                value = {"*": (0, None), "+": (1, None), "?": (0, 1)}.get(char)
                found.append(_Token(kind, value, position))
                position += 1
            elif char == "{":
                match = _QUANT.match(text, position)
                if not match:
                    raise self.fail("expected a repetition like {2}, {2,} or {2,5}", position)
                low = int(match.group(1))
                high = low if not match.group(2) else (int(match.group(3)) if match.group(3) else None)
                found.append(_Token("quant", (low, high), position))
                position = match.end()
            elif char == '"':
                value, position = self._string(position)
                found.append(_Token("string", value, position))
            elif char == "[":
                value, end = self._class(position)
                found.append(_Token("class", value, position))
                position = end
            elif match := _NAME.match(text, position):
                found.append(_Token("name", match.group(), position))
                position = match.end()
            else:
                raise self.fail(f"unexpected character '{char}'", position)
        return found

    def _string(self, start: int) -> tuple[str, int]:
        chars, position = [], start + 1
        while True:
            if position >= len(self.text) or self.text[position] == "\n":
                raise self.fail("unterminated string", start)
            char = self.text[position]
            if char == '"':
                return "".join(chars), position + 1
            if char == "\\":
                codepoint, position = self.escape(position)
                chars.append(chr(codepoint))
            else:
                chars.append(char)
                position += 1

    def _class(self, start: int) -> tuple[Ranges, int]:
        position = start + 1
        negate = self.text.startswith("^", position)
        position += negate
        ranges: Ranges = []
        while True:
            if position >= len(self.text) or self.text[position] == "\n":
                raise self.fail("unterminated character class", start)
            if self.text[position] == "]":
                break
            low, position = self._class_char(position)
            if self.text.startswith("-", position) and not self.text.startswith("-]", position):
                high, position = self._class_char(position + 1)
                if high < low:
                    raise self.fail("character range out of order", start)
                ranges.append((low, high))
            else:
                ranges.append((low, low))
        if not ranges:
            raise self.fail("empty character class", start)
        return (complement(ranges) if negate else normalize(ranges)), position + 1

    def _class_char(self, position: int) -> tuple[int, int]:
        if position >= len(self.text):
            raise self.fail("unterminated character class", position)
        if self.text[position] == "\\":
            return self.escape(position)
        return ord(self.text[position]), position + 1


# A parsed grammar expression: ("literal", text), ("class", ranges), ("ref", name),
# ("group", alternatives), each alternative a list of nodes, or ("repeat", node, low, high).
Node = tuple
MAX_NESTING = 64
"""Deepest nesting of groups accepted in a grammar (the engine's parser recurses on it)."""


class _Parser:
    def __init__(self, reader: _Reader, tokens: list[_Token]) -> None:
        self.reader, self.tokens, self.index = reader, tokens, 0
        self.referenced: dict[str, int] = {}
        self.depth = 0

    def peek(self, ahead: int = 0) -> _Token | None:
        index = self.index + ahead
        return self.tokens[index] if index < len(self.tokens) else None

    def at_rule_start(self) -> bool:
        token, following = self.peek(), self.peek(1)
        return token is not None and token.kind == "name" and following is not None and following.kind == "define"

    def rules(self) -> dict[str, Node]:
        rules: dict[str, Node] = {}
        while self.peek() is not None:
            if not self.at_rule_start():
                token = self.peek()
                raise self.reader.fail("expected a rule like `name ::= ...`", token.offset)
            name_token = self.tokens[self.index]
            self.index += 2
            if name_token.value in rules:
                raise self.reader.fail(f"rule '{name_token.value}' is defined twice", name_token.offset)
            rules[name_token.value] = self.alternatives()
        return rules

    def alternatives(self) -> Node:
        options = [self.sequence()]
        while (token := self.peek()) is not None and token.kind == "bar":
            self.index += 1
            options.append(self.sequence())
        return ("group", options)

    def sequence(self) -> list[Node]:
        items: list[Node] = []
        while (token := self.peek()) is not None and token.kind not in ("bar", "close") and not self.at_rule_start():
            self.index += 1
            if token.kind == "string":
                item: Node = ("literal", token.value)
            elif token.kind == "class":
                item = ("class", token.value)
            elif token.kind == "name":
                self.referenced.setdefault(token.value, token.offset)
                item = ("ref", token.value)
            elif token.kind == "open":
                self.depth += 1
                if self.depth > MAX_NESTING:
                    raise self.reader.fail(f"groups are nested more than {MAX_NESTING} deep", token.offset)
                item = self.alternatives()
                self.depth -= 1
                closing = self.peek()
                if closing is None or closing.kind != "close":
                    raise self.reader.fail("missing ')'", token.offset)
                self.index += 1
            else:
                raise self.reader.fail(f"unexpected '{self.reader.text[token.offset]}'", token.offset)
            while (quant := self.peek()) is not None and quant.kind == "quant":
                self.index += 1
                low, high = quant.value
                try:
                    repeat("x", low, high)  # checks the counts
                except GrammarError as exc:
                    raise self.reader.fail(exc.message.rstrip("."), quant.offset) from None
                item = ("repeat", item, low, high)
            items.append(item)
        return items


def read_grammar(text: str) -> dict[str, Node]:
    """The rules of a grammar, parsed. Raises GrammarError (with line and column) for a syntax
    error, groups nested too deeply, a rule defined twice, a reference to an undefined rule, or a
    grammar without `root`."""
    reader = _Reader(text)
    parser = _Parser(reader, reader.tokens())
    rules = parser.rules()
    if "root" not in rules:
        raise GrammarError("Invalid grammar: it has no `root` rule (the start rule).")
    for name, offset in parser.referenced.items():
        if name not in rules:
            raise reader.fail(f"rule '{name}' is used but not defined", offset)
    return rules


def _write(node: Node, rules: RuleSet) -> str:
    checkpoint()
    kind = node[0]
    if kind == "literal":
        return literal(node[1])
    if kind == "class":
        return char_class(node[1])
    if kind == "ref":
        return node[1]
    if kind == "repeat":
        return f"({repeat(_write(node[1], rules), node[2], node[3], rules)})"
    if len(node[1]) > 1:
        rules.count("alternatives", len(node[1]))
    alternatives = [" ".join(_write(item, rules) for item in option) or '""' for option in node[1]]
    return f"({' | '.join(alternatives)})"


def parse_grammar(text: str) -> str:
    """Check a user's EBNF grammar and write it back in a form known to compile.

    Raises GrammarError as `read_grammar` does, and for a grammar over MAX_GRAMMAR_BYTES (checked
    before it is read) or with more alternatives than INPUT_LIMITS allows; large repetition
    counts are rewritten as `RuleSet.counted` does (new rules, named apart from the user's).
    """
    rules = RuleSet()
    size = len(text.encode())
    if size > rules.max_bytes:
        raise GrammarError(f"The grammar is too large for structured output: {size} bytes (at most {rules.max_bytes}).")
    parsed = read_grammar(text)
    for name in parsed:
        rules.claim(name)
    for name, body in parsed.items():
        rules.define(name, _write(body, rules)[1:-1])  # a rule body needs no outer parentheses
    return rules.render_rules()


def choice_grammar(options: Sequence[str]) -> str:
    """A grammar whose output is exactly one of `options` (each counted as an alternative and
    its characters as text, against INPUT_LIMITS)."""
    rules = RuleSet()
    rules.count("alternatives", len(options))
    rules.count("text", sum(len(option) for option in options))
    return rules.render("(" + " | ".join(literal(option) for option in options) + ")")
