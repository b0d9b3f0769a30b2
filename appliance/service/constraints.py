"""What a request constrains its output to, as a grammar: `response_format`, `structured_outputs`
(regex, grammar, choice, json) or a forced tool call (`tool_choice` required or named).

At most one source per request; a schema, regex or grammar that cannot be honoured, or that would
cost the engine more than the graph's budget to compile (`limits.max_grammar_states`), is a 400
naming the field (the path inside it too).

Grammars are built off the event loop and remembered (clients send the same tools and schemas
again and again); the engine keeps its own compiled copy of each, so a repeated grammar costs
nothing the second time.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

import msgspec

from appliance.errors import InvalidRequest
from appliance.grammar import (
    GrammarError,
    json_object_grammar,
    json_schema_grammar,
    parse_grammar,
    refused_part,
    regex_grammar,
)
from appliance.grammar.cost import GrammarBudget, check_grammar
from appliance.grammar.ebnf import RuleSet, literal
from appliance.graphfiles import Graph
from appliance.protocol.openai import (
    ChatCompletionRequest,
    CompletionRequest,
    ResponseFormatJSONObject,
    ResponseFormatJSONSchema,
    StructuredOutputs,
)
from appliance.service.tool_plan import NO_TOOLS, ToolPlan
from appliance.service.tools import forced_call_grammar

__all__ = ["constrained_output", "output_grammar"]

_REMEMBERED = 256
"""Grammars (or their errors) kept, by the request fields they come from."""
_remembered: OrderedDict[bytes, str | None | InvalidRequest] = OrderedDict()


def _invalid(exc: GrammarError, param: str) -> InvalidRequest:
    return InvalidRequest(exc.message, param=".".join(part for part in (param, exc.path) if part) or None)


def _structured(outputs: StructuredOutputs, graph: Graph) -> str:
    given = [name for name in ("json", "regex", "choice", "grammar") if getattr(outputs, name) is not None]
    if len(given) != 1:
        raise InvalidRequest(
            "structured_outputs takes exactly one of json, regex, choice, grammar.", param="structured_outputs"
        )
    name = given[0]
    param = f"structured_outputs.{name}"
    try:
        if name == "json":
            grammar = json_schema_grammar(outputs.json)
        elif name == "regex":
            grammar = regex_grammar(outputs.regex)
        elif name == "grammar":
            grammar = parse_grammar(outputs.grammar)
        else:
            grammar = RuleSet().render("(" + " | ".join(literal(option) for option in outputs.choice) + ")")
    except GrammarError as exc:
        raise _invalid(exc, param) from None
    return _budgeted(grammar, param, graph, {param: outputs.json} if name == "json" else None)


def _budgeted(grammar: str, param: str, graph: Graph, schemas: dict[str, object] | None = None) -> str:
    """`grammar` if the engine can compile it within the graph's budget, else a 400 naming `param`,
    or the part of one of `schemas` (by their params) that the refusal comes from."""
    budget = GrammarBudget(max_states=graph.limits.max_grammar_states)
    try:
        check_grammar(grammar, budget)
    except GrammarError as exc:
        for where, schema in (schemas or {}).items():
            if schema is None:
                continue
            try:
                check_grammar(json_schema_grammar(schema), budget)
            except GrammarError:
                path = refused_part(schema, lambda part: check_grammar(part, budget))
                raise _invalid(GrammarError(exc.message, path), where) from None
        raise _invalid(exc, param) from None
    return grammar


async def constrained_output(
    request: ChatCompletionRequest | CompletionRequest, graph: Graph, tools: ToolPlan = NO_TOOLS
) -> str | None:
    """`output_grammar`, built on a worker thread (a large schema takes a while) and remembered."""
    chat = isinstance(request, ChatCompletionRequest)
    fields = [request.response_format, request.tools, request.tool_choice, request.parallel_tool_calls] if chat else []
    if not any(fields) and request.structured_outputs is None:
        return None
    key = msgspec.json.encode(
        [graph.name, graph.tool_parser, graph.limits.max_grammar_states, request.structured_outputs, *fields]
    )
    if key not in _remembered:
        try:
            _remembered[key] = await asyncio.to_thread(output_grammar, request, graph, tools)
        except InvalidRequest as exc:
            _remembered[key] = exc
        while len(_remembered) > _REMEMBERED:
            _remembered.popitem(last=False)
    _remembered.move_to_end(key)
    found = _remembered[key]
    if isinstance(found, InvalidRequest):
        raise found
    return found


def output_grammar(
    request: ChatCompletionRequest | CompletionRequest, graph: Graph, tools: ToolPlan = NO_TOOLS
) -> str | None:
    """The grammar the output must follow, or None. Runs in time linear in the constraint's size.
    `tools`: the request's tool plan (a forced call is one source of a grammar)."""
    found: list[tuple[str, str]] = []
    if isinstance(request, ChatCompletionRequest):
        response_format = request.response_format
        if isinstance(response_format, ResponseFormatJSONObject) and response_format.value is None:
            found.append(("response_format", json_object_grammar()))
        elif isinstance(response_format, ResponseFormatJSONObject | ResponseFormatJSONSchema):
            if isinstance(response_format, ResponseFormatJSONSchema):
                schema, param = response_format.json_schema.schema, "response_format.json_schema.schema"
            else:
                schema, param = response_format.value, "response_format.value"
            try:
                grammar = json_object_grammar() if schema is None else json_schema_grammar(schema)
            except GrammarError as exc:
                raise _invalid(exc, param) from None
            found.append(("response_format", _budgeted(grammar, param, graph, {param: schema})))
        if tools.forced and tools.parser is not None:
            name = tools.forced_name
            try:
                grammar = forced_call_grammar(tools.parser, list(tools.tools), name, tools.parallel)
            except GrammarError as exc:
                raise _invalid(exc, "") from None
            schemas = {
                f"tools[{index}].function.parameters": tool.function.parameters
                for index, tool in enumerate(tools.tools)
                if name in (None, tool.function.name) and tool.function.parameters is not None
            }
            found.append(("tool_choice", _budgeted(grammar, "tools", graph, schemas)))
    if request.structured_outputs is not None:
        found.append(("structured_outputs", _structured(request.structured_outputs, graph)))
    if len(found) > 1:
        raise InvalidRequest(
            f"{found[0][0]} and {found[1][0]} both constrain the output; send one of them.", param=found[1][0]
        )
    return found[0][1] if found else None
