"""What a grammar will cost the engine, worked out before the engine sees it.

xgrammar compiles a new grammar inside `ContinuousBatchingPipeline.step()`, so every stream of the
model waits for it. What its compile time grows with is the number of character classes left once
it has unrolled counted repetitions (`x{m,n}` up to 128 copies): each is matched against the whole
vocabulary. Measured on 2 cores (openvino-genai 2026.4.1, SmolLM2's 49k-token vocabulary): about
10 ms per class (`[^"]{0,100}`: 1.0 s), while literals cost next to nothing (18 realistic tool and
response-format schemas, written by this package, compiled in 30-270 ms). Ambiguous repetitions
cost at every generated token instead, and grammars no output can satisfy would be silently
dropped by the engine: both are refused here.
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


_PRINTABLE = 95  # ASCII 0x20-0x7E: where most tokens of a vocabulary start


def _class_weight(ranges: list[tuple[int, int]]) -> float:
    """How much of a vocabulary pass a class costs: narrow classes prune most tokens at once."""
    if any(high >= 0x80 for _, high in ranges):
        return 1.0
    covered = sum(max(0, min(high, 0x7E) - max(low, 0x20) + 1) for low, high in ranges)
    return max(covered, 1) / _PRINTABLE


def _states(node: Node, rules: dict[str, Node]) -> float:
    kind = node[0]
    if kind == "literal":
        return 0.0
    if kind == "class":
        return _class_weight(node[1])
    if kind == "ref":
        return 0.0
    if kind == "repeat":
        _, item, low, high = node
        copies = high if high is not None else max(low, 1)
        if copies > _ENGINE_UNROLL_LIMIT:
            copies = 1
        if item[0] == "ref" and _single_element(rules[item[1]]):
            # The engine copies a one-element rule's element, not the reference, into each copy.
            item = rules[item[1]][1][0][0]
        return _states(item, rules) * copies
    return sum(_states(item, rules) for option in node[1] for item in option)


def _single_element(body: Node) -> bool:
    return body[0] == "group" and len(body[1]) == 1 and len(body[1][0]) == 1


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
    return GrammarCost(bytes=len(text.encode()), rules=len(rules), states=round(sum(_states(body, rules) for body in rules.values())))


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
            f"(character classes, counting repetitions; at most {budget.max_states}: each costs the engine "
            "a pass over the vocabulary when it compiles the grammar). Use fewer patterns or counted "
            "repetitions such as [a-z]{16}."
        )
    return cost
