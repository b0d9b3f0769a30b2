"""Regular expressions -> grammar expressions.

Python's own regex parser reads the pattern (so a syntax error is reported as Python reports it),
and its parse tree is written out as grammar. Generation must produce text the regex matches in
full: constructs that cannot be expressed that way (look-around, back-references, anchors in the
middle, case-insensitive matching) are refused rather than approximated.
"""

from __future__ import annotations

import json
import re
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]

from appliance.grammar.bounds import checkpoint
from appliance.grammar.ebnf import (
    ANY_CHAR,
    GrammarError,
    Ranges,
    RuleSet,
    char_class,
    literal,
    normalize,
    repeat,
    subtract,
)

__all__ = ["regex_expression", "regex_grammar"]

_ASCII = [(0, 0x7F)]
_DIGIT = [(0x30, 0x39)]
_WORD = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
_SPACE = [(0x09, 0x0D), (0x20, 0x20)]
# Categories as ASCII ranges. The positive ones are subsets of Python's Unicode categories; the
# negated ones are cut to ASCII so that nothing generated falls inside the Unicode category
# (e.g. an Arabic-Indic digit is not `\D`).
_CATEGORIES = {
    sre.CATEGORY_DIGIT: _DIGIT,
    sre.CATEGORY_WORD: _WORD,
    sre.CATEGORY_SPACE: _SPACE,
    sre.CATEGORY_NOT_DIGIT: subtract(_ASCII, _DIGIT),
    sre.CATEGORY_NOT_WORD: subtract(_ASCII, _WORD),
    sre.CATEGORY_NOT_SPACE: subtract([(0x21, 0x7E)], _SPACE),
}
# Characters a JSON string must escape.
_JSON_SPECIAL = [(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C)]
MAX_DEPTH = 24
"""Deepest nesting of groups and repetitions (the grammar allows 64; a JSON string adds a few)."""
_ALLOWED_FLAGS = re.UNICODE | re.VERBOSE | re.MULTILINE | re.DOTALL | re.ASCII


class _Translator:
    def __init__(self, pattern: str, rules: RuleSet, *, json_string: bool, dotall: bool) -> None:
        self.pattern = pattern
        self.rules = rules
        self.json_string = json_string
        self.dotall = dotall
        self.depth = 0

    def fail(self, what: str) -> GrammarError:
        return GrammarError(f"The regular expression '{self.pattern}' uses {what}, which is not supported.")

    def sequence(self, items: list, *, top: bool = False) -> str:
        parts: list[str] = []
        pending = ""
        written = 0  # bytes of `parts`: the build stops once they pass the grammar's budget
        for position, (op, arg) in enumerate(items):
            if op is sre.LITERAL:
                pending += self.char_text(arg)
                continue
            if pending:
                parts.append(literal(pending))
                pending = ""
            if op is sre.AT:
                edge = (position == 0 and arg in (sre.AT_BEGINNING, sre.AT_BEGINNING_STRING)) or (
                    position == len(items) - 1 and arg in (sre.AT_END, sre.AT_END_STRING)
                )
                if not (top and edge):
                    raise self.fail("an anchor or word boundary away from the start or end")
                continue
            parts.append(self.item(op, arg))
            written += len(parts[-1])
            self.rules.check_room(written)
        if pending:
            parts.append(literal(pending))
        return " ".join(parts) if parts else '""'

    def char_text(self, codepoint: int) -> str:
        char = chr(codepoint)
        if self.json_string:
            return json.dumps(char)[1:-1]
        return char

    def ranges(self, ranges: Ranges) -> str:
        if not self.json_string:
            return char_class(ranges)
        # In a JSON string, '"' and '\' may still appear escaped; control characters are left out.
        options = []
        plain = subtract(ranges, _JSON_SPECIAL)
        if plain:
            options.append(char_class(plain))
        for special in ('"', "\\"):
            if any(low <= ord(special) <= high for low, high in ranges):
                options.append(literal(json.dumps(special)[1:-1]))
        if not options:
            raise GrammarError(f"The regular expression '{self.pattern}' only allows control characters somewhere.")
        return options[0] if len(options) == 1 else f"({' | '.join(options)})"

    def item(self, op, arg) -> str:
        checkpoint()
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise GrammarError(f"The regular expression nests groups more than {MAX_DEPTH} deep.")
            return self.unnested_item(op, arg)
        finally:
            self.depth -= 1

    def unnested_item(self, op, arg) -> str:
        if op is sre.NOT_LITERAL:
            return self.ranges(subtract(list(ANY_CHAR), [(arg, arg)]))
        if op is sre.ANY:
            return self.ranges(list(ANY_CHAR) if self.dotall else subtract(list(ANY_CHAR), [(10, 10)]))
        if op is sre.IN:
            return self.ranges(self.class_ranges(arg))
        if op is sre.BRANCH:
            self.rules.count("alternatives", len(arg[1]))
            return "(" + " | ".join(self.sequence(list(branch)) for branch in arg[1]) + ")"
        if op is sre.SUBPATTERN:
            _, add_flags, del_flags, pattern = arg
            if add_flags or del_flags:
                raise self.fail("inline flags on a group")
            return f"({self.sequence(list(pattern))})"
        if op is sre.ATOMIC_GROUP:
            return f"({self.sequence(list(arg))})"
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
            low, high, pattern = arg
            inner = f"({self.sequence(list(pattern))})"
            try:
                return f"({repeat(inner, low, None if high == sre.MAXREPEAT else high, self.rules)})"
            except GrammarError as exc:
                raise GrammarError(f"The regular expression '{self.pattern}': {exc.message}") from None
        names = {
            sre.GROUPREF: "a back-reference",
            sre.GROUPREF_EXISTS: "a conditional group",
            sre.ASSERT: "a look-ahead or look-behind",
            sre.ASSERT_NOT: "a negative look-ahead or look-behind",
        }
        raise self.fail(names.get(op, str(op).lower()))

    def class_ranges(self, items) -> Ranges:
        negate = False
        ranges: Ranges = []
        categories = False
        for op, arg in items:
            if op is sre.NEGATE:
                negate = True
            elif op is sre.LITERAL:
                ranges.append((arg, arg))
            elif op is sre.RANGE:
                ranges.append(arg)
            elif op is sre.CATEGORY:
                if arg not in _CATEGORIES:
                    raise self.fail(f"the class {arg}")
                ranges.extend(_CATEGORIES[arg])
                categories = True
            else:
                raise self.fail(f"{op} in a character class")
        if not negate:
            return normalize(ranges)
        # [^\d] must not produce a non-ASCII digit: with a category inside, stay in ASCII.
        return subtract(_ASCII if categories else list(ANY_CHAR), ranges)


def regex_expression(pattern: str, rules: RuleSet, *, json_string: bool = False) -> str:
    """A grammar expression (rules added to `rules`) matching (a subset of) the strings `pattern`
    matches in full.

    With `json_string`, the expression produces the JSON-escaped form of such strings (for the
    inside of a JSON string literal). Its characters and `|` branches are counted into `rules`
    (`RuleSet.count`) before each is written. Raises GrammarError naming the problem.
    """
    rules.count("text", len(pattern))
    try:
        parsed = sre_parse.parse(pattern, 0)
    except re.error as exc:
        raise GrammarError(f"Invalid regular expression '{pattern}': {exc}.") from None
    except RecursionError:
        raise GrammarError("The regular expression is nested too deeply.") from None
    flags = parsed.state.flags
    if flags & ~_ALLOWED_FLAGS:
        raise GrammarError(f"The regular expression '{pattern}' uses flags (e.g. (?i)) that are not supported.")
    translator = _Translator(pattern, rules, json_string=json_string, dotall=bool(flags & re.DOTALL))
    items = list(parsed)
    if len(items) == 1 and items[0][0] is sre.BRANCH:
        # Anchors are allowed at the edges of each top-level alternative: ^a|^b$.
        rules.count("alternatives", len(items[0][1][1]))
        return "(" + " | ".join(translator.sequence(list(branch), top=True) for branch in items[0][1][1]) + ")"
    return translator.sequence(items, top=True)


def regex_grammar(pattern: str) -> str:
    """A whole grammar whose output matches `pattern` in full."""
    rules = RuleSet()
    return rules.render(regex_expression(pattern, rules))
