"""tool_choice auto: free text, each call held to the tools' schemas (`constraints.auto_constraint`).

For every call format: the structure handed to the engine (a trigger, one tag beginning with it,
as xgrammar requires), calls as the model writes them matching the tag's grammar and read back by
the parser, a call outside the schema not matching, and the fallbacks that leave the answer free
as it was (several sequences, a budget the tools pass, another constraint on the whole output).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import msgspec
import pytest

from appliance.engine import TriggeredGrammar
from appliance.grammar.cost import grammar_cost
from appliance.grammar.ebnf import parse_grammar
from appliance.graphfiles import Limits
from appliance.protocol.openai import ChatCompletionRequest, Tool
from appliance.service.constraints import auto_constraint, output_constraint
from appliance.service.tool_parsers import auto_calls, tool_parser
from appliance.service.tool_plan import ToolPlan
from tests.fakes import fake_graph
from tests.unit.test_grammar import to_regex
from tests.unit.test_tool_formats import SCHEMAS, call, run

FORMATS = ["hermes", "llama3_json", "mistral", "phi4_mini", "qwen3_coder", "glm45", "deepseek_r1", "harmony"]
MARKED = [parser for parser in FORMATS if parser != "llama3_json"]
CALLS = [("get_weather", {"city": "Paris", "days": 3, "units": "metric"}), ("get_time", {"zone": "UTC"})]
WRONG = [("get_weather", {"city": "Paris", "days": "three"})]
CLAUDE_CODE_TOOLS = json.loads((Path(__file__).parent.parent / "data" / "claude_code_tools.json").read_text())
"""Claude Code 2.1.328's 21 tools as its first request sent them (59 KB), every description
replaced by filler of the same length: their names, types, enums, bounds and required lists, all
a grammar reads, are Claude Code's."""


def _request(tools: list[dict] | None = None, **fields: object) -> ChatCompletionRequest:
    if tools is None:
        tools = [
            {"type": "function", "function": {"name": name, "parameters": schema}} for name, schema in SCHEMAS.items()
        ]
    body = {"model": "fake", "messages": [{"role": "user", "content": "hi"}], "tools": tools, **fields}
    return msgspec.convert(body, ChatCompletionRequest)


def _constraint(parser: str, request: ChatCompletionRequest | None = None, **limits: int):
    request = request or _request()
    graph = msgspec.structs.replace(fake_graph(), tool_parser=parser, limits=Limits(**limits))
    return output_constraint(request, graph, ToolPlan.of(request, graph, parser))


def _written(parser: str, calls: list) -> str:
    return tool_parser(parser).write_calls(calls).removesuffix("<|call|>")


def _claude_code_tools() -> list[Tool]:
    return [
        msgspec.convert(
            {"type": "function", "function": {"name": tool["name"], "parameters": tool["input_schema"]}}, Tool
        )
        for tool in CLAUDE_CODE_TOOLS
    ]


@pytest.mark.parametrize("parser", MARKED)
def test_each_call_the_model_starts_is_held_to_the_schemas(parser: str) -> None:
    triggered = _constraint(parser)
    assert isinstance(triggered, TriggeredGrammar)
    marker = tool_parser(parser).marker
    # What xgrammar requires, or it fails inside the step (measured): non-empty triggers, each
    # tag beginning with exactly one of them.
    (tag,) = triggered.tags
    assert triggered.triggers == (marker,) and tag.begin == marker
    assert sum(tag.begin.startswith(trigger) for trigger in triggered.triggers) == 1
    parse_grammar(tag.grammar)  # what we write reads back as a valid grammar
    content = to_regex(tag.grammar)

    def inside(block: str) -> str:
        assert block.startswith(tag.begin) and block.endswith(tag.end), block
        return block[len(tag.begin) : len(block) - len(tag.end)]

    calls = CALLS[:1] if parser == "harmony" else CALLS  # harmony: one call per turn
    if tool_parser(parser).end and not triggered.stop_after_first:
        # One call per block, each block a tag of its own: free text (a newline) between them.
        blocks = [_written(parser, [one]) for one in calls]
    else:
        blocks = [_written(parser, calls)]
    for block in blocks:
        assert content.fullmatch(inside(block)), block
    assert not content.fullmatch(inside(_written(parser, WRONG)))
    text = "Let me look that up.\n" + "\n".join(blocks)
    assert run(parser, text, 5) == ("Let me look that up.\n", [call(name, **arguments) for name, arguments in calls])


def test_llama3_json_answers_are_calls_or_text_that_does_not_start_like_one() -> None:
    grammar = _constraint("llama3_json")
    assert isinstance(grammar, str)
    answer = to_regex(grammar)
    calls = _written("llama3_json", CALLS)
    for text in (calls, f"  <|python_tag|>{calls}", "It is sunny.", "<b>sunny</b> {not a call}", "<|python", " ", ""):
        assert answer.fullmatch(text), text
    for text in (_written("llama3_json", WRONG), '{"name": "nope", "parameters": {}}', "{}", " {", "<|python_tag|>hi"):
        assert not answer.fullmatch(text), text


@pytest.mark.parametrize("parser", FORMATS)
def test_a_single_call_or_the_blocks_that_hold_every_call_end_the_answer(parser: str) -> None:
    single = _constraint(parser, _request(parallel_tool_calls=False))
    many = _constraint(parser)
    if parser == "llama3_json":
        assert '("; " tool_call){0,7}' in many and '("; "' not in single  # limits.max_parallel_tool_calls: 8
        return
    assert single.stop_after_first
    # Formats whose one block holds every call of the turn (or whose calls run to the answer's
    # end) end the answer with it; the others may write several blocks.
    assert many.stop_after_first == (parser in ("mistral", "phi4_mini", "deepseek_r1", "harmony"))


def test_tools_none_required_named_and_other_constraints_keep_their_grammars() -> None:
    assert _constraint("hermes", _request(tool_choice="none")) is None
    for choice in ("required", {"type": "function", "function": {"name": "get_time"}}):
        forced = _constraint("hermes", _request(tool_choice=choice))
        assert isinstance(forced, str) and to_regex(forced).fullmatch(_written("hermes", CALLS[1:]))
    answer = {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMAS["get_time"]}}
    either = _constraint("hermes", _request(response_format=answer))
    assert isinstance(either, str) and to_regex(either).fullmatch(_written("hermes", CALLS[:1]))
    regex = _constraint("hermes", _request(structured_outputs={"regex": "[a-z]+"}))
    assert isinstance(regex, str) and to_regex(regex).fullmatch("abc")


def test_where_calls_cannot_be_held_the_answer_stays_free() -> None:
    # Several sequences share one grammar matcher in the engine.
    assert _constraint("hermes", _request(n=2, temperature=1)) is None
    assert _constraint("hermes", _request(best_of=2)) is None
    # Past the graph's compile budget.
    assert _constraint("hermes", max_grammar_states=2) is None
    graph = msgspec.structs.replace(fake_graph(), tool_parser="hermes")
    assert auto_constraint(_request(), graph, ToolPlan()) is None  # no tools in play


@pytest.mark.parametrize("parser", FORMATS)
def test_a_tool_no_grammar_expresses_is_called_with_any_arguments(parser: str) -> None:
    refused = {"type": "object", "properties": {"to": {"type": "string", "maxLength": 20_000}}}  # counts: 10,000
    tools = [
        {"type": "function", "function": {"name": "send", "parameters": refused}},
        {"type": "function", "function": {"name": "get_weather", "parameters": SCHEMAS["get_weather"]}},
    ]
    found = auto_calls(parser, [msgspec.convert(tool, Tool) for tool in tools], 1)
    assert found.loose == (0,)
    # Any JSON value nests without end; scalars are enough to read the grammar as a regex here.
    grammar = to_regex(found.grammar.replace("json-value ::= json-object | json-array | ", "json-value ::= "))
    block = found.block
    for calls, allowed in (
        ([("send", {"to": "x", "n": 1})], True),
        (WRONG, False),
        ([("get_weather", {"city": "X", "units": "K"})], False),
    ):
        written = _written(parser, calls)
        inside = written[len(block.begin) : len(written) - len(block.end)] if block else written
        assert bool(grammar.fullmatch(inside)) == allowed, written


@pytest.mark.parametrize("parser", FORMATS)
def test_claude_code_tools_compile_budget(parser: str) -> None:
    """Claude Code's 21 tools in auto mode: written in milliseconds; their cost against the
    graph's budget (`limits.max_grammar_states`, default 256) decides whether the calls are held
    (docs/api.md, Tools, records these numbers)."""
    tools = _claude_code_tools()
    started = time.thread_time()
    found = auto_calls(parser, tools, 8)
    took = time.thread_time() - started
    cost = grammar_cost(found.grammar)
    print(f"{parser}: {len(found.grammar)} bytes, {cost.states} states, {took * 1000:.0f} ms, loose {found.loose}")
    assert took < 1.0
    # SendMessage (`allOf` of two patterns), WebFetch (`format: uri`) and Workflow (`maxLength:
    # 524288`) cannot be written: called with any arguments; the other 18 are held to their schemas.
    names = {tools[index].function.name for index in found.loose}
    assert names <= {"SendMessage", "WebFetch", "Workflow"} and "Workflow" in names
    assert cost.states <= 512
    request = _request([tool.to_dict() if hasattr(tool, "to_dict") else msgspec.to_builtins(tool) for tool in tools])
    assert _constraint(parser, request, max_grammar_states=512) is not None


def test_the_engine_gets_structural_tags() -> None:
    from appliance.engine import SamplingParams
    from appliance.engine.worker.generation import generation_config

    triggered = _constraint("hermes")
    config = generation_config(SamplingParams(max_new_tokens=8, triggered=triggered), 8, eos_token_id=2)
    written = repr(config.structured_output_config)
    assert 'TriggeredTags(triggers=["<tool_call>"]' in written and 'end="</tool_call>"' in written
    assert "grammar=None" in written  # the tags, not a grammar for the whole output
