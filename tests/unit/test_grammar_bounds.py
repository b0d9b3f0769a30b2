"""Grammars are written in linear time, bounded by their inputs' own size before conversion and by
their bytes while they are written, stop when abandoned, and are costed with their literal text
(issue 40: H1 and M2)."""

from __future__ import annotations

import json
import string
import threading
from random import Random

import pytest

from appliance.grammar import GrammarError, json_schema_grammar, parse_grammar, regex_grammar, schema_expression
from appliance.grammar.bounds import INPUT_LIMITS, MAX_GRAMMAR_BYTES, BuildAbandoned, abandoned_when
from appliance.grammar.cost import (
    CLOSURE_WORK_PER_STATE,
    LITERAL_BYTES_PER_STATE,
    GrammarBudget,
    check_grammar,
    grammar_cost,
)
from appliance.grammar.ebnf import RuleSet, choice_grammar
from appliance.grammar.schema_size import count_schema


def words(count: int, length: int, seed: int = 1) -> list[str]:
    """`count` distinct random lowercase words of `length` letters."""
    random = Random(seed)
    found: set[str] = set()
    while len(found) < count:
        found.add("".join(random.choice(string.ascii_lowercase) for _ in range(length)))
    return sorted(found)


def nested_items(depth: int) -> dict:
    schema: dict = {"type": "integer"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


def optional_properties(count: int) -> dict:
    return {"type": "object", "properties": {f"property_{i:05d}": {"type": "string"} for i in range(count)}}


class CountingNames(dict):
    """A RuleSet's rule table that counts the name lookups `reserve` makes."""

    lookups = 0

    def __contains__(self, name: object) -> bool:
        self.lookups += 1
        return super().__contains__(name)


# -- linear time ----------------------------------------------------------------------------------


def test_rule_names_are_found_in_constant_time() -> None:
    rules = RuleSet()
    rules._rules = names = CountingNames()
    for index in range(2, 500):  # names a later hint would probe first, taken beforehand
        rules.claim(f"rest_{index}")
    before = names.lookups
    given = [rules.reserve("rest") for _ in range(5_000)]
    assert len(set(given)) == 5_000 and not {f"rest_{index}" for index in range(2, 500)} & set(given)
    # Each number is tried once: the 498 claimed names, then one lookup per new name.
    assert names.lookups - before <= 5_000 + 500


def test_a_schema_is_written_in_time_linear_in_its_properties() -> None:
    counts = {}
    for size in (1_000, 4_000):
        rules = RuleSet(max_bytes=10**8)
        rules._rules = CountingNames()
        schema_expression(optional_properties(size), rules)
        counts[size] = rules._rules.lookups
    # Quadratic before: 4,000 optional properties made 16 million lookups (19 s for 8,000).
    assert counts[4_000] <= 4 * counts[1_000] + 100, counts
    assert counts[4_000] < 5 * 4_000


def test_a_long_chain_of_rules_is_checked_in_linear_time() -> None:
    # The rules in the worst order for a fixpoint that re-reads every rule until nothing changes
    # (one pass per rule: 4,000 rules took 25 s). Checked here in one pass over the grammar.
    size = 20_000
    chain = "root ::= r1\n" + "".join(f'r{i} ::= r{i + 1} "a"\n' for i in range(1, size)) + f'r{size} ::= "b"\n'
    assert grammar_cost(chain).rules == size + 1
    endless = "root ::= r1\n" + "".join(f'r{i} ::= r{i + 1} "a"\n' for i in range(1, size)) + f"r{size} ::= r1\n"
    with pytest.raises(GrammarError, match="No output can satisfy"):
        grammar_cost(endless)


@pytest.mark.parametrize(
    ("grammar", "derives"),
    [
        ('root ::= a | "x"\na ::= a', True),
        ("root ::= a b\na ::= [a-z]\nb ::= b", False),
        ('root ::= a "x"\na ::= "" | root', True),
        ("root ::= (a)*\na ::= a", True),
        ("root ::= (a)+\na ::= a", False),
    ],
)
def test_what_derives_a_string_is_found_as_before(grammar: str, derives: bool) -> None:
    if derives:
        grammar_cost(grammar)
    else:
        with pytest.raises(GrammarError, match="No output can satisfy"):
            grammar_cost(grammar)


# -- bounds on the inputs, before conversion ----------------------------------------------------


def refusal(schema: object) -> GrammarError:
    with pytest.raises(GrammarError) as info:
        json_schema_grammar(schema)
    return info.value


def test_a_schema_with_too_many_properties_is_refused_before_conversion() -> None:
    limit = INPUT_LIMITS["properties"][0]
    rules = RuleSet()
    with pytest.raises(GrammarError) as info:
        schema_expression(optional_properties(8_000), rules, "schema")
    assert "8000 properties" in info.value.message and f"at most {limit}" in info.value.message
    assert info.value.path == "schema"
    assert rules.bytes == 0  # refused before a rule was written
    json_schema_grammar(optional_properties(1_000))  # well within


@pytest.mark.parametrize(
    ("schema", "what", "path"),
    [
        ({"enum": words(1_001, 4)}, "`enum` and `const` values", "enum"),
        ({"anyOf": [{"const": word} for word in words(1_001, 4)]}, "alternatives", ""),
        (
            {
                "type": "object",
                "properties": {"a": {"oneOf": [{"type": "integer"}] * 600}, "b": {"anyOf": [True] * 401}},
            },
            "alternatives",
            "properties.",
        ),
        ({"type": "object", "properties": {name: {"type": "null"} for name in words(100, 1_300)}}, "characters", ""),
        ({"type": "array", "prefixItems": [{"type": "null"}] * 5_001}, "properties", ""),
        ({"type": "object", "required": words(5_001, 6)}, "properties", ""),
        ({"anyOf": [{"items": {"items": {"items": {"items": True}}}}] * 1000 * 5}, "alternatives", ""),
        ({"anyOf": [nested_items(20)] * 1_000}, "schemas", "anyOf["),
    ],
    ids=["enum", "anyOf-consts", "alternatives-over-parts", "text", "prefixItems", "required", "anyOf-5000", "schemas"],
)
def test_schema_sizes_over_their_limits_are_refused(schema: dict, what: str, path: str) -> None:
    error = refusal(schema)
    assert "too large for structured output" in error.message and what in error.message, error.message
    assert error.path.startswith(path), error.path


def test_schema_sizes_count_over_every_schema_of_one_grammar() -> None:
    rules = RuleSet(max_bytes=10**8)
    for index in range(4):
        schema_expression(optional_properties(1_000), rules, f"tools[{index}].function.parameters")
    with pytest.raises(GrammarError) as info:
        schema_expression(optional_properties(1_001), rules, "tools[4].function.parameters")
    assert "5001 properties" in info.value.message
    assert info.value.path == "tools[4].function.parameters"


def test_counting_a_schema_reads_no_annotation() -> None:
    rules = RuleSet()
    huge = {"type": "string", "description": "x" * 10_000_000, "examples": [list(range(1_000_000))]}
    count_schema({"type": "object", "properties": {"a": huge}}, rules)
    assert rules.held == {"schemas": 2, "properties": 1, "text": 1}


def test_the_walk_follows_references_as_the_converter_does() -> None:
    # Into an annotation: converted, so counted.
    error = refusal({"$ref": "#/x-blob", "x-blob": optional_properties(8_000)})
    assert "8000 properties" in error.message and error.path == "#/x-blob"
    # A definition nothing refers to is not converted, so not counted.
    json_schema_grammar({"$defs": {"unused": optional_properties(6_000)}, "type": "string"})
    # A definition referred to many times is converted once, and counted once.
    shared = {"$defs": {"many": optional_properties(3_000)}, "type": "array", "items": {"$ref": "#/$defs/many"}}
    rules = RuleSet(max_bytes=10**8)
    schema_expression({**shared, "prefixItems": [{"$ref": "#/$defs/many"}] * 10}, rules)
    assert rules.held["properties"] == 3_000 + 10
    # Recursion ends.
    json_schema_grammar({"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#"}}]})


def test_nesting_is_refused_before_conversion() -> None:
    schema: dict = {"type": "string"}
    for _ in range(400):
        schema = {"type": "object", "properties": {"a": schema}}
    rules = RuleSet()
    with pytest.raises(GrammarError, match="nests more than 24 levels") as info:
        count_schema(schema, rules)
    assert info.value.path == ".".join(["properties.a"] * 24)


def test_pattern_alternatives_are_bounded() -> None:
    pattern = "^(" + "|".join(words(5_000, 8)) + ")$"
    with pytest.raises(GrammarError, match="5000 alternatives"):
        regex_grammar(pattern)
    error = refusal({"type": "string", "pattern": pattern})
    assert error.path == "pattern" and "alternatives" in error.message
    regex_grammar("^(" + "|".join(words(500, 8)) + ")$")


def test_grammars_are_bounded_by_size_before_reading_and_by_alternatives() -> None:
    too_large = 'root ::= "' + "a" * MAX_GRAMMAR_BYTES + '"'
    with pytest.raises(GrammarError, match=f"at most {MAX_GRAMMAR_BYTES}"):
        parse_grammar(too_large)
    many = "root ::= " + " | ".join(json.dumps(word) for word in words(1_001, 6))
    with pytest.raises(GrammarError, match="1001 alternatives"):
        parse_grammar(many)
    parse_grammar("root ::= " + " | ".join(json.dumps(word) for word in words(999, 6)))


def test_choices_are_bounded() -> None:
    with pytest.raises(GrammarError, match="1001 alternatives"):
        choice_grammar(words(1_001, 3))
    assert choice_grammar(["yes", "no"]) == 'root ::= ("yes" | "no")\n'


# -- the byte budget while writing, and abandoning ---------------------------------------------


class Recording(RuleSet):
    defined = 0

    def define(self, name: str, body: str) -> None:
        super().define(name, body)
        self.defined += 1


def test_a_build_stops_as_soon_as_its_grammar_passes_the_byte_budget() -> None:
    rules = Recording(max_bytes=4_096)
    with pytest.raises(GrammarError, match="grew past 4096 bytes"):
        schema_expression(optional_properties(4_000), rules)
    # 4,000 properties would write 8,000 rules; it stopped after the few that fill 4 KiB.
    assert rules.defined < 100
    assert rules.bytes - 4_096 < 200  # the one rule that passed the budget, no more


class CountingFlag(threading.Event):
    """A flag never set that counts the checkpoints that looked at it: the work a build did."""

    looks = 0

    def is_set(self) -> bool:
        self.looks += 1
        return False


@pytest.mark.parametrize(
    "schema",
    [
        {  # required members: written inline, no rule until the object is done
            "type": "object",
            "properties": {
                f"p{i}": {"type": "integer", "minimum": -(10**14) + i, "maximum": 10**15 - i} for i in range(4_000)
            },
            "required": [f"p{i}" for i in range(4_000)],
        },
        {"anyOf": [{"type": "integer", "minimum": i, "maximum": 10**15 - i} for i in range(1_000)]},
        {"type": "array", "prefixItems": [{"type": "number", "minimum": i, "maximum": 10**12} for i in range(4_000)]},
        {"type": "string", "pattern": "^" + "." * 100_000 + "$"},
    ],
    ids=["required-properties", "anyOf", "prefixItems", "pattern"],
)
def test_parts_written_inline_stop_the_build_at_once(schema: dict) -> None:
    flag, rules = CountingFlag(), RuleSet(max_bytes=4_096)
    with abandoned_when(flag), pytest.raises(GrammarError, match="grew past 4096 bytes"):
        schema_expression(schema, rules)
    # Past the walk that counted the schema (one look per subschema), the parts written fill
    # 4 KiB: a few dozen subschemas or pattern items converted, not thousands.
    assert flag.looks - rules.held["schemas"] < 400, flag.looks


def test_the_budget_counts_the_root_expression_too() -> None:
    rules = RuleSet(max_bytes=100)
    with pytest.raises(GrammarError, match="grew past 100 bytes"):
        rules.render("(" + " | ".join(json.dumps(word) for word in words(20, 8)) + ")")


def test_an_abandoned_build_stops_at_its_next_checkpoint() -> None:
    flag = threading.Event()

    class LeavesAfterTen(Recording):
        def define(self, name: str, body: str) -> None:
            super().define(name, body)
            if self.defined == 10:
                flag.set()  # as the waiting coroutine does when its client leaves

    rules = LeavesAfterTen(max_bytes=10**8)
    with abandoned_when(flag), pytest.raises(BuildAbandoned):
        schema_expression(optional_properties(4_000), rules)
    assert rules.defined == 10
    flag.clear()
    with abandoned_when(flag):
        schema_expression(optional_properties(10), RuleSet())  # not abandoned: built


@pytest.mark.parametrize(
    "build",
    [
        lambda: json_schema_grammar({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}),
        lambda: regex_grammar("[a-z]+"),
        lambda: parse_grammar('root ::= "a"'),
        lambda: grammar_cost('root ::= "a"'),
    ],
    ids=["schema", "regex", "grammar", "cost"],
)
def test_every_kind_of_build_checks_for_abandonment(build) -> None:
    flag = threading.Event()
    flag.set()
    with abandoned_when(flag), pytest.raises(BuildAbandoned):
        build()


# -- the compile budget counts literal text -----------------------------------------------------


def test_literal_bytes_cost_states() -> None:
    cost = grammar_cost('root ::= ("' + "a" * 1_000 + '" | "bc"){2}\n')
    assert (cost.classes, cost.literal_bytes) == (0, 2_004)
    assert cost.states == -(-2_004 // LITERAL_BYTES_PER_STATE) + -(-cost.closure_work // CLOSURE_WORK_PER_STATE)


@pytest.mark.parametrize(
    "grammar",
    [
        "root ::= (" + " | ".join(json.dumps(json.dumps(word)) for word in words(4_400, 40)) + ")\n",
        "root ::= (" + " | ".join(json.dumps(word) for word in words(5_000, 8)) + ")\n",
        json_schema_grammar({"enum": words(1_000, 40)}),
        json_schema_grammar({"anyOf": [{"const": word} for word in words(1_000, 40)]}),
    ],
    ids=["enum-4400x40", "alternation-5000", "enum-1000x40", "anyOf-1000-consts"],
)
def test_large_literal_alternatives_are_over_the_compile_budget(grammar: str) -> None:
    with pytest.raises(GrammarError, match="too complex") as info:
        check_grammar(grammar, GrammarBudget())
    assert "bytes of literal text" in info.value.message


def test_moderate_literal_alternatives_are_within_the_budget() -> None:
    check_grammar(json_schema_grammar({"enum": words(300, 40)}), GrammarBudget())
    check_grammar(json_schema_grammar(optional_properties(150)), GrammarBudget())


# -- the compile budget counts long runs of optional items --------------------------------------


def test_optional_members_are_rules_of_their_own() -> None:
    """Inline, the positions of each optional member also held every member that may follow
    (one required and 400 optional properties: 43 s of compile in the engine's step); as rules,
    each is compiled on its own (about 2 s, and refused by the budget)."""
    schema = optional_properties(3)
    schema["required"] = ["property_00001"]
    grammar = json_schema_grammar(schema)
    root = grammar.splitlines()[0]
    assert root.count("member") == 2 and "property_00000" not in root and "property_00002" not in root


@pytest.mark.parametrize(
    ("grammar", "refused"),
    [
        (json_schema_grammar(optional_properties(400)), True),
        (json_schema_grammar({**optional_properties(400), "required": ["property_00000"]}), True),
        ("root ::= " + " ".join(f'("{word}")?' for word in words(200, 12)) + ' "z"\n', True),
        (json_schema_grammar(optional_properties(150)), False),
        (json_schema_grammar({**optional_properties(150), "required": ["property_00000"]}), False),
    ],
    ids=["400-optional", "1-required-400-optional", "200-optional-words", "150-optional", "1-required-150-optional"],
)
def test_long_runs_of_optional_items_are_over_the_compile_budget(grammar: str, refused: bool) -> None:
    if refused:
        with pytest.raises(GrammarError, match="closure work"):
            check_grammar(grammar, GrammarBudget())
    else:
        check_grammar(grammar, GrammarBudget())


def test_closure_work_is_found_in_linear_time_for_long_chains() -> None:
    # 20,000 rules that may each be empty, each beginning the one before: no recursion, and work
    # growing with the square of the chain (as the engine's compile does), not of the grammar.
    size = 20_000
    chain = "root ::= r1\n" + "".join(f'r{i} ::= ("a")? r{i + 1}\n' for i in range(1, size)) + f'r{size} ::= "b"\n'
    cost = grammar_cost(chain)
    assert cost.closure_work > size * size


def test_surrogates_in_a_users_grammar_are_costed() -> None:
    cost = grammar_cost(parse_grammar('root ::= "\\ud800" [a-z]'))
    assert cost.literal_bytes == 3 and cost.classes == 1
