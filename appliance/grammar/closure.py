"""How hard the engine's grammar compiler works at each position of a grammar (`closure_work`).

xgrammar works out, for every position of every rule, which tokens of the vocabulary may come
next: each token that gets past its first byte is walked through every item the parser holds at
that position. Those are the item there and, past optional ones, the items after it, with the
starts of the rules they refer to: a long run of optional items, or a chain of rules that may each
be empty, makes the parser hold many at once. A rule is compiled on its own, but an inline group
is not: a position within a token's reach (TOKEN_REACH bytes) of a group's end also holds what
follows the group, once for each byte of a literal there.

`closure_work` sums, over positions, the items held times the distinct first bytes among them
(times a literal's bytes). Measured on demo-smol (49k-token vocabulary, 2 cores), compile time
follows it within a factor of three where the items are rules (an object of N optional
properties, one rule per member: N = 200 406,000 and 0.26-0.56 s, N = 400 1.6 million and
1.2-1.6 s, N = 1,000 10 million and about 7 s; 200 optional one-word rules in a row, whose first
letters all differ: 2.6 million and about 3 s), and overestimates inline groups of literals (200
optional words in a row: 19 million, 5.6 s); it underestimates long runs of inline groups of
several items (one required and 400 optional properties written inline: 43 s), which this
package therefore never writes (`json_schema._members` names each optional member as a rule).
"""

from __future__ import annotations

from collections.abc import Iterator

from appliance.grammar.bounds import checkpoint
from appliance.grammar.ebnf import Node

__all__ = ["TOKEN_REACH", "closure_work"]

TOKEN_REACH = 32
"""Bytes a token may span (longer vocabulary entries are rare): a position this close to the end of
an inline group also holds what follows the group."""
_CAP = 10**15
"""Sizes are capped here: sums over shared rules can grow without bound in adversarial grammars."""

Held = tuple[int, int]
"""Items held at a position, and the bit mask of their possible first bytes."""
_NOTHING: Held = (0, 0)


def _merge(first: Held, second: Held) -> Held:
    return min(first[0] + second[0], _CAP), first[1] | second[1]


def _first_bytes(ranges: list[tuple[int, int]]) -> int:
    """The mask of the first UTF-8 bytes of the characters in `ranges`."""
    mask = 0
    for low, high in ranges:
        first, last = chr(low).encode(errors="surrogatepass")[0], chr(high).encode(errors="surrogatepass")[0]
        mask |= ((1 << (last + 1)) - 1) ^ ((1 << first) - 1)
    return mask


class _Closures:
    def __init__(self, rules: dict[str, Node], nullable: set[str]) -> None:
        self.rules, self.nullable = rules, nullable
        self.held: dict[int, Held] = {}  # by id(node)
        self.min_bytes: dict[int, int] = {}
        self.starts: dict[str, Held] = {}
        self.work = 0
        self._rule_starts()

    def is_nullable(self, node: Node) -> bool:
        kind = node[0]
        if kind == "ref":
            return node[1] in self.nullable
        if kind == "repeat":
            return node[2] == 0 or self.is_nullable(node[1])
        if kind == "group":
            return any(all(self.is_nullable(item) for item in option) for option in node[1])
        return kind == "literal" and node[1] == ""

    def shortest(self, node: Node) -> int:
        """Bytes `node` derives at least (a rule that cannot be empty: 1, to stay on the safe side)."""
        key = id(node)
        if key not in self.min_bytes:
            kind = node[0]
            if kind == "literal":
                found = len(node[1].encode(errors="surrogatepass"))
            elif kind == "class":
                found = 1
            elif kind == "ref":
                found = 0 if node[1] in self.nullable else 1
            elif kind == "repeat":
                found = min(node[2] * self.shortest(node[1]), _CAP)
            else:
                found = min(sum(self.shortest(item) for item in option) for option in node[1])
            self.min_bytes[key] = found
        return self.min_bytes[key]

    def start(self, node: Node) -> Held:
        """What the parser holds when it is about to read `node`."""
        key = id(node)
        if key not in self.held:
            kind = node[0]
            if kind == "literal":
                encoded = node[1].encode(errors="surrogatepass")
                found: Held = (1, 1 << encoded[0] if encoded else 0)
            elif kind == "class":
                found = (1, _first_bytes(node[1]))
            elif kind == "ref":
                found = _merge((1, 0), self.starts.get(node[1], _NOTHING))  # unknown yet: a cycle
            elif kind == "repeat":
                found = _merge((1, 0), self.start(node[1]))
            else:
                found = (1, 0)
                for option in node[1]:
                    found = _merge(found, self.sequence_start(option, 0))
            self.held[key] = found
        return self.held[key]

    def sequence_start(self, items: list[Node], position: int) -> Held:
        found = _NOTHING
        for item in items[position:]:
            found = _merge(found, self.start(item))
            if not self.is_nullable(item):
                break
        return found

    def _start_refs(self, node: Node) -> Iterator[str]:
        """The rules `node` may begin with (through optional items)."""
        kind = node[0]
        if kind == "ref":
            yield node[1]
        elif kind == "repeat":
            yield from self._start_refs(node[1])
        elif kind == "group":
            for option in node[1]:
                for item in option:
                    yield from self._start_refs(item)
                    if not self.is_nullable(item):
                        break

    def _rule_starts(self) -> None:
        """Each rule's start, the rules it begins with first (an iterative depth-first walk: a
        chain of 5,000 rules is no recursion)."""
        seen: set[str] = set()
        for name in self.rules:
            if name in seen:
                continue
            seen.add(name)
            stack = [(name, iter(list(self._start_refs(self.rules[name]))))]
            while stack:
                current, pending = stack[-1]
                for dependency in pending:
                    if dependency not in seen:
                        seen.add(dependency)
                        stack.append((dependency, iter(list(self._start_refs(self.rules[dependency])))))
                        break
                else:
                    stack.pop()
                    self.starts[current] = self.start(self.rules[current])

    def visit(self, node: Node, after: Held, *, inline: bool) -> None:
        """Add the work of the positions inside `node`; `after`: what follows it (inline only)."""
        if node[0] == "group":
            for option in node[1]:
                self.sequence(option, after, inline=inline)
        elif node[0] == "repeat":
            again = node[3] is None or node[3] > 1
            self.visit(node[1], _merge(self.start(node[1]), after) if again else after, inline=True)

    def sequence(self, items: list[Node], after: Held, *, inline: bool) -> None:
        ending = after if inline else _NOTHING
        tails: list[Held] = [ending] * (len(items) + 1)
        reach = [0] * (len(items) + 1)  # bytes at least from each position to the end
        empty = [True] * (len(items) + 1)  # whether the rest may be empty
        for position in range(len(items) - 1, -1, -1):
            item = items[position]
            nullable = self.is_nullable(item)
            tails[position] = _merge(self.start(item), tails[position + 1]) if nullable else self.start(item)
            empty[position] = nullable and empty[position + 1]
            reach[position] = min(reach[position + 1] + self.shortest(item), _CAP)
        for position, item in enumerate(items):
            held = tails[position]
            if inline and not empty[position] and reach[position] < TOKEN_REACH:
                held = _merge(held, ending)  # tokens that run past the group's end
            weight = len(item[1].encode(errors="surrogatepass")) if item[0] == "literal" else 1
            self.work = min(self.work + held[0] * held[1].bit_count() * max(weight, 1), _CAP)
            if item[0] in ("group", "repeat"):
                following = tails[position + 1]
                if inline and not empty[position + 1] and reach[position + 1] < TOKEN_REACH:
                    following = _merge(following, ending)
                self.visit(item, following, inline=True)


def closure_work(rules: dict[str, Node], nullable: set[str]) -> int:
    """The work of `rules` (`nullable`: the rules that derive the empty string), as the module's
    docstring describes: linear in the grammar's size."""
    closures = _Closures(rules, nullable)
    for body in rules.values():
        checkpoint()
        closures.visit(body, _NOTHING, inline=False)
    return closures.work
