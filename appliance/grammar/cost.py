"""What a grammar will cost the engine, worked out before the engine sees it.

xgrammar compiles a new grammar inside `ContinuousBatchingPipeline.step()`, so every stream of the
model waits for it. Its compile time grows with the character classes of each rule once it has
unrolled counted repetitions (`x{m,n}` up to 128 copies, one pass over the vocabulary each, narrow
classes hardly cheaper than broad ones), while a rule referred to many times is compiled once.
Measured on 2 cores (openvino-genai 2026.4.1, SmolLM2's 49k-token vocabulary): 2-6 ms per class
(`(.{16}){1,8}`, 128 classes: 0.5-0.6 s; 512 classes in alternatives: 1.3-2.9 s); literals and
rule references next to nothing; the 18 realistic tool and response-format schemas of
`tests/data/schema_corpus.json`, as written by this package, have at most 127 classes and compiled
in 30-270 ms; 256 classes took 0.6-1.2 s. Ambiguous repetitions cost at every generated token instead, and grammars no output can
satisfy would be silently dropped by the engine: both are refused here.
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.grammar.ebnf import GrammarError, Node, read_grammar

__all__ = ["GrammarBudget", "GrammarCost", "check_grammar", "grammar_cost"]

_ENGINE_UNROLL_LIMIT = 128
"""xgrammar writes out counted repetitions up to this count (one copy each) and counts larger ones."""


@dataclass(frozen=True)
class GrammarCost:
    bytes: int
    rules: int
    states: int
    """Character classes once the engine has unrolled counted repetitions."""


@dataclass(frozen=True)
class GrammarBudget:
    max_bytes: int = 256 * 1024
    max_states: int = 256


def _states(node: Node, rules: dict[str, Node]) -> int:
    """Character classes in one rule's body once the engine has unrolled its counted repetitions.
    A reference costs nothing here: the engine compiles each rule once, however often it is used."""
    kind = node[0]
    if kind == "class":
        return 1
    if kind in ("literal", "ref"):
        return 0
    if kind == "repeat":
        _, item, low, high = node
        copies = high if high is not None else max(low, 1)
        if copies > _ENGINE_UNROLL_LIMIT:
            copies = 1
        if item[0] == "ref" and _single_class(rules[item[1]]):
            return copies  # the engine writes a one-class rule's class into each copy
        return _states(item, rules) * copies
    return sum(_states(item, rules) for option in node[1] for item in option)


def _single_class(body: Node) -> bool:
    while body[0] == "group" and len(body[1]) == 1 and len(body[1][0]) == 1:
        body = body[1][0][0]
    return body[0] == "class"


def _derives(node: Node, found: set[str], *, empty: bool) -> bool:
    """Whether `node` derives some finite string (with `empty`: the empty string), given the rules
    `found` to do so."""
    kind = node[0]
    if kind == "ref":
        return node[1] in found
    if kind == "repeat":
        return node[2] == 0 or _derives(node[1], found, empty=empty)
    if kind == "group":
        return any(all(_derives(item, found, empty=empty) for item in option) for option in node[1])
    if kind == "literal":
        return not empty or node[1] == ""
    return not empty


def _rules_deriving(rules: dict[str, Node], *, empty: bool) -> set[str]:
    """The rules that derive some finite string (or, with `empty`, the empty string): a fixpoint."""
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, body in rules.items():
            if name not in found and _derives(body, found, empty=empty):
                found.add(name)
                changed = True
    return found


def _check_repeated_items(rules: dict[str, Node]) -> None:
    """Refuse a repetition of something that can be empty, like `(a{0,9}){0,9}` or `(a|b?)*`.

    Such a grammar is ambiguous at every position: measured, `((a{0,10000}){0,10000}){0,10000}`
    made each step of the engine take 5 s, for every stream of the model.
    """
    nullable = _rules_deriving(rules, empty=True)

    def visit(node: Node) -> None:
        if node[0] == "repeat":
            if (node[3] is None or node[3] > 1) and _derives(node[1], nullable, empty=True):
                raise GrammarError(
                    "The constraint repeats something that can be empty (like `(a?)*` or `(a{0,9}){0,9}`), "
                    "which makes it ambiguous and very slow to follow; write the inner part so it "
                    "cannot be empty (e.g. `a*` instead of `(a?)*`)."
                )
            visit(node[1])
        elif node[0] == "group":
            for option in node[1]:
                for item in option:
                    visit(item)

    for body in rules.values():
        visit(body)


def grammar_cost(text: str) -> GrammarCost:
    """The cost of a grammar written by this package (or checked by `parse_grammar`).

    Raises GrammarError when no output can satisfy it.
    """
    rules = read_grammar(text)
    if "root" not in _rules_deriving(rules, empty=False):
        raise GrammarError(
            "No output can satisfy this constraint (e.g. a schema that only refers to itself, "
            "with no way to end the recursion)."
        )
    _check_repeated_items(rules)
    return GrammarCost(
        bytes=len(text.encode()), rules=len(rules), states=sum(_states(body, rules) for body in rules.values())
    )


def check_grammar(text: str, budget: GrammarBudget) -> GrammarCost:
    """The grammar's cost, or GrammarError if it exceeds `budget`."""
    cost = grammar_cost(text)
    if cost.bytes > budget.max_bytes:
        raise GrammarError(
            f"The constraint is too large for structured output: its grammar is {cost.bytes} bytes "
            f"(at most {budget.max_bytes})."
        )
    if cost.states > budget.max_states:
        raise GrammarError(
            f"The constraint is too complex for structured output: its grammar has {cost.states} states "
            f"(character classes once counted repetitions are written out; at most {budget.max_states}: each "
            "costs the engine a pass over its vocabulary while every stream of the model waits). Use "
            "fewer or shorter patterns; lengths (`maxLength`) and `[a-z]{17,}`-style counts above 16 cost little."
        )
    return cost
