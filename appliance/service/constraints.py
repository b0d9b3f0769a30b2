"""What a request constrains its output to, as a grammar: `response_format`, `structured_outputs`
(regex, grammar, choice, json) or a forced tool call (`tool_choice` required or named).

At most one source per request; a schema, regex or grammar that cannot be honoured is a 400
naming the field (the path inside it too).
"""

from __future__ import annotations

from appliance.config import Graph
from appliance.errors import InvalidRequest
from appliance.grammar import (
    GrammarError,
    json_object_grammar,
    json_schema_grammar,
    parse_grammar,
    regex_grammar,
)
from appliance.grammar.ebnf import RuleSet, literal
from appliance.protocol.openai import (
    ChatCompletionRequest,
    CompletionRequest,
    NamedToolChoice,
    ResponseFormatJSONObject,
    ResponseFormatJSONSchema,
    StructuredOutputs,
)
from appliance.service.tools import forced_call_grammar

__all__ = ["check_tools", "output_grammar"]


def _invalid(exc: GrammarError, param: str) -> InvalidRequest:
    return InvalidRequest(exc.message, param=".".join(part for part in (param, exc.path) if part) or None)


def check_tools(request: ChatCompletionRequest, graph: Graph) -> None:
    """tools/tool_choice make sense together and for this graph."""
    choice = request.tool_choice
    if not request.tools:
        if choice == "required" or isinstance(choice, NamedToolChoice):
            raise InvalidRequest("tool_choice requires tools.", param="tool_choice")
        return
    names = [tool.function.name for tool in request.tools]
    if len(set(names)) != len(names):
        raise InvalidRequest("Each tool needs its own function name.", param="tools")
    if isinstance(choice, NamedToolChoice) and choice.function.name not in names:
        raise InvalidRequest(
            f"tool_choice names the function {choice.function.name!r}, which is not among the tools.",
            param="tool_choice.function.name",
        )
    if choice != "none" and graph.tool_parser is None:
        raise InvalidRequest(
            f"Model '{graph.name}' has no tool parser in its graph file (`tool_parser`), so it cannot "
            "return tool calls; send tool_choice \"none\" or leave out tools.",
            param="tools",
            code="unsupported_parameter",
        )


def _structured(outputs: StructuredOutputs) -> str:
    given = [name for name in ("json", "regex", "choice", "grammar") if getattr(outputs, name) is not None]
    if len(given) != 1:
        raise InvalidRequest(
            "structured_outputs takes exactly one of json, regex, choice, grammar.", param="structured_outputs"
        )
    name = given[0]
    param = f"structured_outputs.{name}"
    try:
        if name == "json":
            return json_schema_grammar(outputs.json)
        if name == "regex":
            return regex_grammar(outputs.regex)
        if name == "grammar":
            return parse_grammar(outputs.grammar)
        return RuleSet().render("(" + " | ".join(literal(option) for option in outputs.choice) + ")")
    except GrammarError as exc:
        raise _invalid(exc, param) from None


def output_grammar(request: ChatCompletionRequest | CompletionRequest, graph: Graph) -> str | None:
    """The grammar the output must follow, or None."""
    found: list[tuple[str, str]] = []
    if isinstance(request, ChatCompletionRequest):
        response_format = request.response_format
        if isinstance(response_format, ResponseFormatJSONObject):
            found.append(("response_format", json_object_grammar()))
        elif isinstance(response_format, ResponseFormatJSONSchema):
            schema = response_format.json_schema.schema
            param = "response_format.json_schema.schema"
            try:
                grammar = json_object_grammar() if schema is None else json_schema_grammar(schema)
            except GrammarError as exc:
                raise _invalid(exc, param) from None
            found.append(("response_format", grammar))
        choice = request.tool_choice
        if request.tools and (choice == "required" or isinstance(choice, NamedToolChoice)):
            name = choice.function.name if isinstance(choice, NamedToolChoice) else None
            try:
                grammar = forced_call_grammar(graph.tool_parser, request.tools, name, request.parallel_tool_calls)
            except GrammarError as exc:
                raise _invalid(exc, "") from None
            found.append(("tool_choice", grammar))
    if request.structured_outputs is not None:
        found.append(("structured_outputs", _structured(request.structured_outputs)))
    if len(found) > 1:
        raise InvalidRequest(
            f"{found[0][0]} and {found[1][0]} both constrain the output; send one of them.", param=found[1][0]
        )
    return found[0][1] if found else None
