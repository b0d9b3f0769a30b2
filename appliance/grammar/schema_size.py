"""A JSON schema's own size, measured before it is converted (`RuleSet.count`'s limits).

Converting a schema takes time in proportion to what it holds, so the walk here counts its
subschemas, properties, `enum` and `const` values, `anyOf`/`oneOf`/`allOf` branches, nesting and
the text of its names and values first, without converting anything, and stops at the first
limit passed: an 8,000-property schema is refused at once instead of after its grammar is
written. The walk visits only where subschemas sit (annotations such as `description` are never
read), and each object adds its counts before its members are visited, so it does work in
proportion to what the limits allow, whatever the schema's size. Definitions (`$defs`) are
walked where a `$ref` leads, as the converter converts them (a reference into an annotation is
counted too; a definition no reference uses is not).
"""

from __future__ import annotations

import json
from typing import Any

from appliance.grammar.bounds import checkpoint
from appliance.grammar.ebnf import GrammarError, RuleSet

__all__ = ["MAX_DEPTH", "count_schema", "resolve"]

MAX_DEPTH = 24
"""Deepest nesting of schemas (each level adds at most two groups; the grammar allows 64)."""

_DEFINITIONS = ("$defs", "definitions")
"""Keywords holding definitions: converted only where a `$ref` leads, so walked from there."""
_LISTED = ("prefixItems", "anyOf", "oneOf", "allOf")
"""Keywords holding lists of subschemas."""


def _join(path: str, *parts: str) -> str:
    return ".".join(part for part in (path, *parts) if part)


def _text(value: Any) -> int:
    """Characters of `value` as the grammar writes it (compact JSON)."""
    return len(json.dumps(value, separators=(", ", ": "), ensure_ascii=False))


def resolve(root: Any, ref: str) -> Any:
    """The subschema of `root` a local `$ref` ("#/$defs/name", "#") points to; KeyError if none."""
    target = root
    for part in filter(None, ref[1:].split("/")):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(target, dict) or part not in target:
            raise KeyError(ref)
        target = target[part]
    return target


def count_schema(schema: Any, rules: RuleSet, path: str = "") -> None:
    """Count what `schema` holds into `rules` (see `RuleSet.count`): GrammarError at the path where
    a limit was passed (or where it nests more than MAX_DEPTH levels). The walk visits what the
    converter converts: the schema's tree, and each `$ref`'s target once. Shapes the converter
    refuses (a `properties` that is not an object, a `$ref` that does not resolve, ...) are left
    for it to name."""
    stack: list[tuple[Any, str, int]] = [(schema, path, 1)]
    followed: set[str] = set()
    while stack:
        node, where, depth = stack.pop()
        if not isinstance(node, dict):
            continue
        checkpoint()
        rules.count("schemas", 1, where)
        if depth > MAX_DEPTH:
            raise GrammarError(f"The schema nests more than {MAX_DEPTH} levels deep here.", where)
        members = node.get("properties")
        if isinstance(members, dict):
            rules.count("properties", len(members), where)
            rules.count("text", sum(len(name) for name in members), where)
            stack.extend((sub, _join(where, "properties", name), depth + 1) for name, sub in members.items())
        required = node.get("required")
        if isinstance(required, list):
            _count_required(required, members, rules, where)
        for keyword in _DEFINITIONS:
            if isinstance(node.get(keyword), dict):
                rules.count("text", sum(len(name) for name in node[keyword]), _join(where, keyword))
        for keyword in _LISTED:
            branches = node.get(keyword)
            if isinstance(branches, list):
                rules.count("properties" if keyword == "prefixItems" else "alternatives", len(branches), where)
                stack.extend(
                    (sub, f"{_join(where, keyword)}[{index}]", depth + 1) for index, sub in enumerate(branches)
                )
        for keyword in ("items", "additionalProperties"):
            stack.append((node.get(keyword), _join(where, keyword), depth + 1))
        if "const" in node:
            rules.count("values", 1, where)
            rules.count("text", _text(node["const"]), _join(where, "const"))
        values = node.get("enum")
        if isinstance(values, list):
            rules.count("values", len(values), _join(where, "enum"))
            rules.count("text", sum(_text(value) for value in values), _join(where, "enum"))
        ref = node.get("$ref")
        if isinstance(ref, str):
            rules.count("text", len(ref), _join(where, "$ref"))
            if ref.startswith("#") and ref not in followed:
                followed.add(ref)
                try:
                    # The converter nests a target where it is first referred to; its own depth
                    # check counts through references, so the walk starts a target afresh.
                    stack.append((resolve(schema, ref), ref, 1))
                except KeyError:
                    pass


def _count_required(required: list, properties: Any, rules: RuleSet, path: str) -> None:
    """Required names that are not among `properties` are properties of their own (any value)."""
    declared = properties if isinstance(properties, dict) else {}
    try:
        extra = set(required).difference(declared)
    except TypeError:  # an unhashable entry: the converter names it
        return
    names = [name for name in extra if isinstance(name, str)]
    rules.count("properties", len(names), path)
    rules.count("text", sum(len(name) for name in names), path)
