"""The bounds of one grammar build: its size, what its inputs may hold, and its client leaving.

A build is bounded before it starts (INPUT_LIMITS, counted by `ebnf.RuleSet.count` before each
part of a constraint is converted), while it runs (MAX_GRAMMAR_BYTES, checked as it is written),
and stops when its client leaves (`checkpoint`, in every loop of the writers and of the cost
check, once `abandoned_when`'s flag is set).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["INPUT_LIMITS", "MAX_GRAMMAR_BYTES", "BuildAbandoned", "abandoned_when", "checkpoint"]

MAX_GRAMMAR_BYTES = 256 * 1024
"""Largest grammar written: a build stops as soon as its rules pass this (`RuleSet.define`)."""

INPUT_LIMITS = {
    "schemas": (20_000, "schemas (the schema and every subschema in it)"),
    "properties": (5_000, "properties (object properties and `prefixItems` entries)"),
    "values": (1_000, "`enum` and `const` values"),
    "alternatives": (1_000, "alternatives (`anyOf`/`oneOf`/`allOf` branches, `|` in patterns and grammars, choices)"),
    "text": (120_000, "characters of property and definition names, `enum` and `const` values and patterns"),
}
"""What one grammar's inputs (a request's schemas, patterns and grammars together) may hold, by
`RuleSet.count`'s names: (at most, what is counted). Counted before each part is converted, so
the work of writing a grammar is bounded by the request's own size, not found out afterwards.
The schema limits are the ones OpenAI documents for its structured outputs (5,000 properties,
1,000 enum values, 120,000 characters of names and values), so a schema written for OpenAI is
never refused by them; the graph's compile budget (`cost`) may still find its grammar too costly."""


class BuildAbandoned(Exception):
    """The client that asked for a grammar has left: its build stopped at a `checkpoint`."""


_abandoned: ContextVar[threading.Event | None] = ContextVar("grammar_abandoned", default=None)


@contextmanager
def abandoned_when(flag: threading.Event) -> Iterator[None]:
    """Grammar builds in this block stop with BuildAbandoned at their next `checkpoint` once `flag`
    is set (by the thread that waits for the build, when its client leaves)."""
    token = _abandoned.set(flag)
    try:
        yield
    finally:
        _abandoned.reset(token)


def checkpoint() -> None:
    """Raise BuildAbandoned if the build running here has been abandoned. Called once per rule,
    subschema, pattern group and grammar rule: cheap (a context variable and an event)."""
    flag = _abandoned.get()
    if flag is not None and flag.is_set():
        raise BuildAbandoned
