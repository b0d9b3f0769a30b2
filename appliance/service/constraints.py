"""What a request constrains its output to: `response_format`, `structured_outputs` (regex,
grammar, choice, json) or a forced tool call (`tool_choice` required or named), each as a grammar
for the whole output; else, with tools in play under `tool_choice: auto`, each call the model
starts in its free text (`auto_constraint`: the text is free, the calls match the tools' schemas).

At most one source per request; a schema, regex or grammar that cannot be honoured, that holds
more than structured output takes (`grammar.bounds.INPUT_LIMITS`, counted before it is converted),
or that would cost the engine more than the graph's budget to compile
(`limits.max_grammar_states`), is a 400 naming the field (the path inside it too).

Grammars are built on a pool of threads of their own (`grammar_builds`: never the event loop's
default executor), once per distinct constraint in flight, abandoned when every client waiting
for one has left, and remembered (clients send the same tools and schemas again and again); the
engine keeps its own compiled copy of each, so a repeated grammar costs nothing the second time.
"""

from __future__ import annotations

import hashlib
import logging

import msgspec

from appliance.engine import TaggedGrammar, TriggeredGrammar
from appliance.errors import InvalidRequest
from appliance.grammar import (
    GrammarError,
    json_object_expression,
    json_schema_grammar,
    parse_grammar,
    refused_part,
    regex_grammar,
    schema_expression,
)
from appliance.grammar.cost import GrammarBudget, check_grammar
from appliance.grammar.ebnf import RuleSet, choice_grammar
from appliance.graphfiles import Graph
from appliance.protocol.openai import (
    ChatCompletionRequest,
    CompletionRequest,
    ResponseFormatJSONObject,
    ResponseFormatJSONSchema,
    StructuredOutputs,
)
from appliance.service.grammar_builds import GrammarBuilds, OutputConstraint
from appliance.service.tool_parsers import auto_calls, call_expression
from appliance.service.tool_plan import NO_TOOLS, ToolPlan

__all__ = ["OutputConstraint", "auto_constraint", "builds", "constrained_output", "output_grammar"]

log = logging.getLogger("appliance.requests")

builds = GrammarBuilds()
"""The server's grammar builds: two threads, eight builds pending at most, 256 results kept."""


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
            grammar = choice_grammar(outputs.choice)
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
) -> OutputConstraint:
    """`output_grammar`, built on the grammar pool (`builds`) and remembered. A client that
    leaves while it waits (its task cancelled) stops the build unless others wait for it too."""
    chat = isinstance(request, ChatCompletionRequest)
    fields = [request.response_format, request.tools, request.tool_choice, request.parallel_tool_calls] if chat else []
    if not any(fields) and request.structured_outputs is None:
        return None
    fingerprint = msgspec.json.encode(
        [
            graph.name,
            tools.parser,
            request.n,
            request.best_of,
            graph.limits.max_grammar_states,
            graph.limits.max_parallel_tool_calls,
            request.structured_outputs,
            *fields,
        ]
    )
    # A digest, not the fields themselves: 256 remembered keys of a 30 MB body each would be 8 GB.
    key = hashlib.blake2b(fingerprint, digest_size=16).digest()
    return await builds.build(key, lambda: output_constraint(request, graph, tools))


def output_constraint(
    request: ChatCompletionRequest | CompletionRequest, graph: Graph, tools: ToolPlan = NO_TOOLS
) -> OutputConstraint:
    """`output_grammar`, else (nothing constrains the whole output) `auto_constraint`."""
    grammar = output_grammar(request, graph, tools)
    if grammar is not None or not isinstance(request, ChatCompletionRequest):
        return grammar
    return auto_constraint(request, graph, tools)


def auto_constraint(request: ChatCompletionRequest, graph: Graph, tools: ToolPlan) -> TriggeredGrammar | str | None:
    """With tools in play under `tool_choice: auto`: each call the model starts is held to the
    tools' schemas, the rest of the answer free (a `TriggeredGrammar` from the format's marker;
    for llama3_json, whose calls have none, a grammar of the whole answer: calls, or text that
    does not start like one). A tool whose schema no grammar expresses is called with any
    arguments (`CallFormat.loose_call`).

    Never a refusal: where the calls cannot be held (several sequences in one request, which
    share one grammar matcher in the engine; tools past a size bound or the graph's compile
    budget), the answer is free as it was before (None), and the log says why."""
    if not tools.tools or tools.parser is None or tools.forced:
        return None
    if request.n > 1 or (request.best_of or 1) > 1:
        return None
    try:
        calls = auto_calls(tools.parser, list(tools.tools), tools.max_calls)
        check_grammar(calls.grammar, GrammarBudget(max_states=graph.limits.max_grammar_states))
    except GrammarError as exc:
        log.info("tool calls left unconstrained on model %s: %s", graph.name, exc.message[:200])
        return None
    if calls.loose:
        log.info(
            "on model %s, calls of %d of %d tools take any arguments: no grammar expresses their schemas "
            "(tools[%d].function.parameters the first)",
            graph.name,
            len(calls.loose),
            len(tools.tools),
            calls.loose[0],
        )
    block = calls.block
    if block is None:
        return calls.grammar
    return TriggeredGrammar(
        triggers=(block.begin,),
        tags=(TaggedGrammar(begin=block.begin, grammar=calls.grammar, end=block.end),),
        stop_after_first=block.last,
    )


def output_grammar(
    request: ChatCompletionRequest | CompletionRequest, graph: Graph, tools: ToolPlan = NO_TOOLS
) -> str | None:
    """The grammar the output must follow, or None. Runs in time linear in the constraint's size,
    which is bounded before each part is converted (`RuleSet.count`); stops with BuildAbandoned
    at a checkpoint once its client has left (see `grammar_builds`).

    `tools`: the request's tool plan. A forced call (tool_choice "required" or named) is this
    turn's whole output: a response format then governs the text answer of a later turn, as at
    OpenAI. With tools in play but not forced, a response format allows either branch: tool calls
    in the graph's format, or text valid against the format (the answer is parsed by the branch
    the model took)."""
    found: list[tuple[str, str]] = []
    if isinstance(request, ChatCompletionRequest):
        rules = RuleSet()
        schemas: dict[str, object] = {}
        text = None if tools.forced else _response_format(request, rules, schemas)
        # Calls are written only where they constrain the output: with tool_choice auto and no
        # format the model writes freely (and a tool schema no grammar can express is no error).
        in_grammar = bool(tools.tools) and tools.parser is not None and (tools.forced or text is not None)
        calls = _calls(tools, rules, schemas) if in_grammar else None
        if calls is not None:
            expression = calls if text is None else f"({calls}) | ({text})"
            param = "tool_choice" if tools.forced else "response_format"
            found.append((param, _budgeted(_rendered(rules, expression, "tools"), "tools", graph, schemas)))
        elif text is not None:
            param = next(iter(schemas), "response_format")
            found.append(("response_format", _budgeted(_rendered(rules, text, param), param, graph, schemas)))
    if request.structured_outputs is not None:
        found.append(("structured_outputs", _structured(request.structured_outputs, graph)))
    if len(found) > 1:
        raise InvalidRequest(
            f"{found[0][0]} and {found[1][0]} both constrain the output; send one of them.", param=found[1][0]
        )
    return found[0][1] if found else None


def _calls(tools: ToolPlan, rules: RuleSet, schemas: dict[str, object]) -> str:
    """The expression of an answer made of tool calls; the schemas it holds are added to
    `schemas` (by their params, to name the part a refusal comes from)."""
    assert tools.parser is not None
    name = tools.forced_name
    try:
        expression = call_expression(tools.parser, list(tools.tools), name, tools.max_calls, rules)
    except GrammarError as exc:  # a schema's own path, or the calls as a whole (too large)
        raise _invalid(exc, "" if exc.path else "tools") from None
    for index, tool in enumerate(tools.tools):
        if name in (None, tool.function.name) and tool.function.parameters is not None:
            schemas[f"tools[{index}].function.parameters"] = tool.function.parameters
    return expression


def _response_format(request: ChatCompletionRequest, rules: RuleSet, schemas: dict[str, object]) -> str | None:
    """The expression of a text answer in the request's JSON response format (None: free text)."""
    response_format = request.response_format
    if isinstance(response_format, ResponseFormatJSONSchema):
        schema, param = response_format.json_schema.schema, "response_format.json_schema.schema"
    elif isinstance(response_format, ResponseFormatJSONObject):
        schema, param = response_format.value, "response_format.value"
    else:
        return None
    if schema is not None:
        schemas[param] = schema
    try:
        return json_object_expression(rules) if schema is None else schema_expression(schema, rules)
    except GrammarError as exc:
        raise _invalid(exc, param) from None


def _rendered(rules: RuleSet, expression: str, param: str) -> str:
    """The whole grammar of `expression`; a 400 naming `param` if it passes the byte budget."""
    try:
        return rules.render(expression)
    except GrammarError as exc:
        raise _invalid(exc, param) from None
