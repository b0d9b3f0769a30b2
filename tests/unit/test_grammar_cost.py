"""Grammars stay small by construction and are checked against a compile budget (issue 14).

The languages are checked exactly: each grammar (non-recursive ones) is turned into a Python regular
expression and matched against values in and out of the schema's range.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from appliance.grammar import GrammarError, json_schema_grammar, parse_grammar, regex_grammar
from appliance.grammar.cost import GrammarBudget, check_grammar, grammar_cost
from appliance.grammar.ebnf import Node, RuleSet, read_grammar

CORPUS = json.loads((Path(__file__).parent.parent / "data" / "schema_corpus.json").read_text())
BUDGET = GrammarBudget()


def as_regex(grammar: str) -> re.Pattern[str]:
    """The language of a non-recursive grammar as a Python regular expression."""
    rules = read_grammar(grammar)

    def write(node: Node, seen: tuple[str, ...]) -> str:
        kind = node[0]
        if kind == "literal":
            return re.escape(node[1])
        if kind == "class":
            return "[" + "".join(f"{re.escape(chr(low))}-{re.escape(chr(high))}" for low, high in node[1]) + "]"
        if kind == "ref":
            assert node[1] not in seen, "recursive grammar"
            return f"(?:{write(rules[node[1]], (*seen, node[1]))})"
        if kind == "repeat":
            _, item, low, high = node
            return f"(?:{write(item, seen)}){{{low},{'' if high is None else high}}}"
        return "(?:" + "|".join("".join(write(item, seen) for item in option) for option in node[1]) + ")"

    return re.compile(write(rules["root"], ("root",)))


def in_span(value: int, schema: dict) -> bool:
    low, high = schema.get("minimum"), schema.get("maximum")
    low_x, high_x = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    return (
        (low is None or value >= low)
        and (high is None or value <= high)
        and (low_x is None or value > low_x)
        and (high_x is None or value < high_x)
        and abs(value) < 10**16
    )


bounds = st.one_of(st.none(), st.integers(-(10**17), 10**17), st.integers(-1000, 1000))


@settings(max_examples=300, deadline=None)
@example(low=-33185939596535, high=2909662544613632, exclusive_low=False, exclusive_high=False, probes=[])
@given(
    low=bounds,
    high=bounds,
    exclusive_low=st.booleans(),
    exclusive_high=st.booleans(),
    probes=st.lists(st.integers(-(10**17), 10**17), max_size=20),
)
def test_integer_ranges_are_exact_and_small(low, high, exclusive_low, exclusive_high, probes) -> None:
    schema: dict = {"type": "integer"}
    if low is not None:
        schema["exclusiveMinimum" if exclusive_low else "minimum"] = low
    if high is not None:
        schema["exclusiveMaximum" if exclusive_high else "maximum"] = high
    try:
        grammar = json_schema_grammar(schema)
    except GrammarError:
        assert not any(in_span(v, schema) for v in [low or 0, high or 0, (low or 0) + 1, (high or 0) - 1])
        return
    assert len(grammar) < 4000, len(grammar)  # was ~4.5 MB for a one-sided bound
    check_grammar(grammar, BUDGET)
    pattern = as_regex(grammar)
    edges = [b + d for b in (low, high, 0, 10**16, -(10**16)) if b is not None for d in (-2, -1, 0, 1, 2)]
    for value in [*edges, *probes]:
        assert bool(pattern.fullmatch(str(value))) == in_span(value, schema), (schema, value)
    assert not pattern.fullmatch("01")
    assert not pattern.fullmatch("-0") or in_span(0, schema)  # "-0" is JSON for 0


@settings(max_examples=150, deadline=None)
@given(
    low=st.integers(-50, 50), span=st.integers(1, 200), probes=st.lists(st.decimals(-300, 300, places=3), max_size=20)
)
def test_bounded_number_outputs_stay_in_range(low, span, probes) -> None:
    schema = {"type": "number", "minimum": low, "exclusiveMaximum": low + span}
    pattern = as_regex(json_schema_grammar(schema))
    for value in probes:
        text = format(value.normalize(), "f")
        if pattern.fullmatch(text):
            assert low <= float(text) < low + span, (schema, text)
    assert pattern.fullmatch(str(low)) and not pattern.fullmatch(str(low + span))


@settings(max_examples=200, deadline=None)
@given(low=st.integers(0, 300), extra=st.one_of(st.none(), st.integers(0, 300)))
def test_counted_repetition_matches_exactly_its_counts(low, extra) -> None:
    high = None if extra is None else low + extra
    rules = RuleSet()
    grammar = rules.render(f'"<" {rules.counted("[a]", low, high)} ">"')
    pattern = as_regex(grammar)
    for count in range(0, (high if high is not None else low) + 20):
        assert bool(pattern.fullmatch("<" + "a" * count + ">")) == (count >= low and (high is None or count <= high)), (
            count
        )
    assert len(grammar) < 1200  # O(log n) rules


def test_large_string_lengths_cost_little_to_compile() -> None:
    for length in (17, 100, 1000, 10_000):
        grammar = json_schema_grammar({"type": "string", "minLength": 1, "maxLength": length})
        assert grammar_cost(grammar).states <= 40, length
        assert as_regex(grammar).fullmatch('"' + "x" * length + '"')
        assert not as_regex(grammar).fullmatch('"' + "x" * (length + 1) + '"')


def test_nested_arrays_and_optional_properties_grow_linearly() -> None:
    schema: dict = {"type": "integer"}
    for _ in range(23):  # was a 1.2 KB schema that froze the event loop 5.5 s
        schema = {"type": "array", "items": schema}
    assert len(json_schema_grammar(schema)) < 4000
    schema = {"type": "string"}
    for level in range(6):  # 6 levels of 10 optional properties (1.8 KB): ~250 MB/s of engine growth before
        properties = {f"p{level}_{i}": {"type": "string"} for i in range(10)}
        schema = {"type": "object", "properties": {**properties, f"p{level}_0": schema}}
    grammar = json_schema_grammar(schema)
    assert len(grammar) < 10_000
    check_grammar(grammar, BUDGET)
    # The same through $defs, each level referring to the one below ten times (a million paths).
    defs: dict = {"l0": {"type": "string"}}
    for level in range(1, 7):
        defs[f"l{level}"] = {
            "type": "object",
            "properties": {f"p{i}": {"$ref": f"#/$defs/l{level - 1}"} for i in range(10)},
        }
    grammar = json_schema_grammar({"$defs": defs, "$ref": "#/$defs/l6"})
    assert len(grammar) < 10_000
    check_grammar(grammar, BUDGET)
    assert as_regex(json_schema_grammar({"properties": {"a": {"type": "boolean"}, "b": {"type": "null"}}})).fullmatch(
        '{"b":null}'
    )


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_realistic_schemas_fit_the_budget(name: str) -> None:
    grammar = json_schema_grammar(CORPUS[name])
    cost = check_grammar(grammar, BUDGET)
    assert cost.bytes < 4000 and cost.states <= 160, cost


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: json_schema_grammar({"$ref": "#"}), "No output can satisfy"),
        (
            lambda: json_schema_grammar(
                {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}
            ),
            "No output",
        ),
        (
            lambda: json_schema_grammar({"type": "object", "properties": {"x": {"$ref": "#"}}, "required": ["x"]}),
            "No output",
        ),
        (lambda: regex_grammar("((a{0,10000}){0,10000}){0,10000}"), "can be empty"),
        (lambda: regex_grammar("(a|b?)+"), "can be empty"),
        (lambda: parse_grammar('root ::= ("a"*)*'), "can be empty"),
        (lambda: regex_grammar("(" + "|".join(f".{{16}}{c}" for c in "abcdefghijklmnopqrstu") + ")"), "too complex"),
        (lambda: regex_grammar("a{0,10001}"), "above 10000"),
    ],
)
def test_costly_or_unsatisfiable_constraints_are_refused(build, message: str) -> None:
    with pytest.raises(GrammarError, match=message):
        check_grammar(build(), BUDGET)


def test_recursion_with_a_way_out_is_kept() -> None:
    tree = CORPUS["openai_ui_recursive"]
    check_grammar(json_schema_grammar(tree), BUDGET)
    check_grammar(json_schema_grammar({"anyOf": [{"$ref": "#"}, {"type": "string"}]}), BUDGET)


def test_deep_nesting_is_a_clear_error() -> None:
    schema: dict = {"type": "string"}
    for _ in range(400):
        schema = {"type": "array", "items": schema}
    with pytest.raises(GrammarError, match="nests more than 24 levels") as info:
        json_schema_grammar(schema)
    assert info.value.path.startswith("items.items.")
    with pytest.raises(GrammarError, match="nested more than 64 deep"):
        parse_grammar("root ::= " + "(" * 2000 + '"a"' + ")" * 2000)
    with pytest.raises(GrammarError, match="nested too deeply|more than 24 deep"):
        regex_grammar("(" * 2000 + "a" + ")" * 2000)


def test_user_grammar_counts_are_rewritten_and_names_kept_apart() -> None:
    grammar = parse_grammar('root ::= unit{0,5000} "!"\nunit ::= [a-c]')
    rules = read_grammar(grammar)
    assert rules["unit"] == ("group", [[("class", [(97, 99)])]])  # the user's rule is untouched
    assert "{0,5000}" not in grammar
    assert as_regex(grammar).fullmatch("ab" * 2500 + "!") and not as_regex(grammar).fullmatch("a" * 5001 + "!")


def test_refusals_name_the_part_of_the_schema_they_come_from() -> None:
    from appliance.grammar import refused_part

    def check(grammar: str) -> None:
        check_grammar(grammar, BUDGET)

    heavy = {"type": "string", "pattern": "^([a-z]{16}|[0-9]{16}){1,9}$"}  # 288 classes
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"anyOf": [{"type": "null"}, {"type": "array", "items": heavy}]}},
    }
    assert refused_part(schema, check) == "properties.b.anyOf[1].items.pattern"
    by_ref = {"$defs": {"h": heavy}, "properties": {"x": {"$ref": "#/$defs/h"}}}
    assert refused_part(by_ref, check) == "$defs.h.pattern"
    # Many parts each within budget: the whole is to blame.
    spread = {"properties": {f"p{i}": {"type": "string", "pattern": "^([a-z]{16}|[0-9]{16}){1,3}$"} for i in range(4)}}
    assert refused_part(spread, check) == ""
