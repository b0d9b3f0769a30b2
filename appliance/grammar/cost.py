"""What a grammar will cost the engine, worked out before the engine sees it.

xgrammar compiles a new grammar inside `ContinuousBatchingPipeline.step()`, so every stream of the
model waits for it. Its compile time grows with the character classes of each rule once it has
unrolled counted repetitions (`x{m,n}` up to 128 copies, one pass over the vocabulary each, narrow
classes hardly cheaper than broad ones) and with the bytes of its literal text, while a rule
referred to many times is compiled once. Measured on 2 cores (openvino-genai 2026.4.1, SmolLM2's
49k-token vocabulary; the step that compiles, against steps without a grammar):

- character classes, 2-6 ms each: `(.{16}){1,8}` (128 classes) 0.2-0.6 s, 256 classes 0.6-1.2 s,
  512 classes in alternatives 1.3-2.9 s;
- literal text, 6-23 us a byte, a byte among many alternatives costing more than one in a long
  string: an enum of 4,400 distinct 40-letter strings (176 KB, no class) 1.1-1.7 s, of 1,100 such
  strings 0.6-0.95 s, of 400 0.23-0.52 s; 5,000 alternatives of 8 letters 0.64-0.92 s; 2,000
  rules of 20 letters, alternated, 0.84-1.0 s; one literal of 176,000 bytes 1.1 s. So
  LITERAL_BYTES_PER_STATE (128) bytes count as one class (measured: 100 to 300), and the default
  budget of 256 states holds at most 32 KiB of literal text: about 780 enum values of 40 letters;
- long runs of optional items, which make the compiler hold many items at every position
  (`closure.closure_work`, one state per CLOSURE_WORK_PER_STATE): an object of 400 optional
  properties 1.2-1.6 s (1,000: about 7 s), one required and 400 optional ones 1.8-2.1 s (43 s
  when each optional member was written inline rather than as a rule); at the budget, one
  required and 200 optional properties (130 states) 0.47-0.72 s;
- rule references next to nothing; the 18 realistic tool and response-format schemas of
  `tests/data/schema_corpus.json`, as written by this package, have at most 127 classes and 260
  literal bytes (132 states) and compiled in 30-270 ms. In one run, grammars at the budget
  compiled in 0.37-0.56 s (classes), 0.83-0.93 s (an enum of 740 40-letter strings) and
  0.47-0.79 s (optional properties).

Ambiguous repetitions cost at every generated token instead, and grammars no output can satisfy
would be silently dropped by the engine: both are refused here.
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.grammar.bounds import MAX_GRAMMAR_BYTES, checkpoint
from appliance.grammar.closure import closure_work
from appliance.grammar.ebnf import GrammarError, Node, read_grammar

__all__ = [
    "CLOSURE_WORK_PER_STATE",
    "LITERAL_BYTES_PER_STATE",
    "GrammarBudget",
    "GrammarCost",
    "check_grammar",
    "grammar_cost",
]

_ENGINE_UNROLL_LIMIT = 128
"""xgrammar writes out counted repetitions up to this count (one copy each) and counts larger ones."""
LITERAL_BYTES_PER_STATE = 128
"""Bytes of literal text that cost the engine's compiler about as much as one character class
(measured: see the module's docstring)."""
CLOSURE_WORK_PER_STATE = 8_000
"""Closure work (`closure.closure_work`) that costs the engine's compiler about as much as one
character class: measured, 1 to 3.5 million a second (see `closure`); 256 states, 2 million."""


@dataclass(frozen=True)
class GrammarCost:
    bytes: int
    rules: int
    classes: int
    """Character classes once the engine has unrolled counted repetitions."""
    literal_bytes: int
    """Bytes of literal text once the engine has unrolled counted repetitions."""
    closure_work: int = 0
    """What the compiler holds at each position, summed (`closure.closure_work`)."""

    @property
    def states(self) -> int:
        """The compile cost in classes: each class, and each LITERAL_BYTES_PER_STATE literal bytes
        and CLOSURE_WORK_PER_STATE of closure work."""
        return (
            self.classes
            + -(-self.literal_bytes // LITERAL_BYTES_PER_STATE)
            + -(-self.closure_work // CLOSURE_WORK_PER_STATE)
        )


@dataclass(frozen=True)
class GrammarBudget:
    max_bytes: int = MAX_GRAMMAR_BYTES
    max_states: int = 256


def _weight(node: Node, rules: dict[str, Node]) -> tuple[int, int]:
    """Character classes and literal bytes in one rule's body once the engine has unrolled its
    counted repetitions. A reference costs nothing here: the engine compiles each rule once,
    however often it is used."""
    kind = node[0]
    if kind == "class":
        return 1, 0
    if kind == "literal":
        return 0, len(node[1].encode(errors="surrogatepass"))
    if kind == "ref":
        return 0, 0
    if kind == "repeat":
        _, item, low, high = node
        copies = high if high is not None else max(low, 1)
        if copies > _ENGINE_UNROLL_LIMIT:
            copies = 1
        if item[0] == "ref" and _single_class(rules[item[1]]):
            return copies, 0  # the engine writes a one-class rule's class into each copy
        classes, literal_bytes = _weight(item, rules)
        return classes * copies, literal_bytes * copies
    classes = literal_bytes = 0
    for option in node[1]:
        for item in option:
            more_classes, more_bytes = _weight(item, rules)
            classes += more_classes
            literal_bytes += more_bytes
    return classes, literal_bytes


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


class _Derivations:
    """Which rules derive some finite string (or, with `empty`, the empty string), found in time
    linear in the grammar's size.

    Each rule, group and alternative is a node waiting for some of its parts: a sequence for all
    of them, a group or a rule for any one. A node whose wait is over tells its parents once.
    (Re-evaluating every rule until nothing changed took one pass per rule of a chain written in
    the wrong order: 4,000 rules took 25 s.)
    """

    def __init__(self, rules: dict[str, Node], *, empty: bool) -> None:
        self.empty = empty
        self.waiting: list[int] = []  # per node: parts still to derive before it does
        self.parents: list[list[int]] = []
        self.ready: list[int] = []
        self.rule = {name: self._node(1) for name in rules}
        for name, body in rules.items():
            checkpoint()
            self._link(body, self.rule[name])

    def _node(self, waiting: int) -> int:
        self.waiting.append(waiting)
        self.parents.append([])
        if waiting == 0:
            self.ready.append(len(self.waiting) - 1)
        return len(self.waiting) - 1

    def _link(self, node: Node, parent: int) -> None:
        """`parent` waits for `node` (one of its parts)."""
        kind = node[0]
        if kind == "ref":
            self.parents[self.rule[node[1]]].append(parent)
        elif kind == "repeat" and node[2] > 0:
            self._link(node[1], parent)
        elif kind == "group":
            group = self._node(1)
            for option in node[1]:
                sequence = self._node(len(option))
                for item in option:
                    self._link(item, sequence)
                self.parents[sequence].append(group)
            self.parents[group].append(parent)
        else:  # a literal, a class, or a repetition that may be empty
            derives = kind == "repeat" or not self.empty or (kind == "literal" and node[1] == "")
            self.parents[self._node(0 if derives else 1)].append(parent)

    def found(self) -> set[str]:
        while self.ready:
            for parent in self.parents[self.ready.pop()]:
                self.waiting[parent] -= 1
                if self.waiting[parent] == 0:
                    self.ready.append(parent)
        return {name for name, node in self.rule.items() if self.waiting[node] <= 0}


def _rules_deriving(rules: dict[str, Node], *, empty: bool) -> set[str]:
    """The rules that derive some finite string (or, with `empty`, the empty string)."""
    return _Derivations(rules, empty=empty).found()


def _check_repeated_items(rules: dict[str, Node]) -> set[str]:
    """Refuse a repetition of something that can be empty, like `(a{0,9}){0,9}` or `(a|b?)*`;
    returns the rules that derive the empty string.

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
    return nullable


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
    nullable = _check_repeated_items(rules)
    classes = literal_bytes = 0
    for body in rules.values():
        more_classes, more_bytes = _weight(body, rules)
        classes += more_classes
        literal_bytes += more_bytes
    return GrammarCost(
        bytes=len(text.encode()),
        rules=len(rules),
        classes=classes,
        literal_bytes=literal_bytes,
        closure_work=closure_work(rules, nullable),
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
            f"({cost.classes} character classes, {cost.literal_bytes} bytes of literal text, one state per "
            f"{LITERAL_BYTES_PER_STATE}, and {cost.closure_work} of closure work, one per {CLOSURE_WORK_PER_STATE}: "
            "long runs of optional items; once counted repetitions are written out; at most "
            f"{budget.max_states}: the engine compiles them while every stream of the model waits). Use fewer or "
            "shorter patterns, enum values and optional properties; lengths (`maxLength`) and `[a-z]{17,}`-style "
            "counts above 16 cost little."
        )
    return cost
