"""Tool-call parsers and the reasoning splitter: whole answers and every way of chunking them."""

from __future__ import annotations

import json

import pytest

from appliance.grammar.ebnf import parse_grammar
from appliance.protocol.openai import FunctionDefinition, Tool
from appliance.service.reasoning import ReasoningStream
from appliance.service.tool_parsers import ParsedCall, ToolCallStream, forced_call_grammar, new_call_id, tool_parser


def run(parser: str, text: str, chunk: int) -> tuple[str, list[ParsedCall]]:
    stream = ToolCallStream(tool_parser(parser))
    content, calls = [], []
    for start in range(0, len(text), chunk):
        piece, found = stream.feed(text[start : start + chunk])
        content.append(piece)
        calls += found
    piece, found = stream.finish()
    return "".join(content + [piece]), calls + found


F = ParsedCall("f", '{"a": 1}')
G = ParsedCall("g", "{}")
CASES = [
    (
        "hermes",
        'Hi <tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>\n<tool_call>{"name": "g", "arguments": {}}</tool_call>',
        "Hi ",
        [F, G],
    ),
    ("hermes", 'a < b <tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call> c', "a < b  c", [F]),
    ("hermes", "Hi <tool_call>{oops}</tool_call>", "Hi <tool_call>{oops}</tool_call>", []),
    ("hermes", 'Cut <tool_call>{"name": "f", "argu', "Cut ", []),
    ("hermes", "no calls <tool", "no calls <tool", []),
    ("llama3_json", ' {"name": "f", "parameters": {"a": 1}}; {"name": "g", "parameters": {}}', "", [F, G]),
    ("llama3_json", '<|python_tag|>{"name": "f", "parameters": {"a": 1}}', "", [F]),
    ("llama3_json", 'Sure: {"name": "f", "parameters": {}}', 'Sure: {"name": "f", "parameters": {}}', []),
    ("llama3_json", '{"name": "f"', '{"name": "f"', []),
    ("mistral", 'Ok [TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}]', "Ok ", [F, G]),
    ("mistral", '[TOOL_CALLS]f[ARGS]{"a": 1}[TOOL_CALLS]g[ARGS]{}', "", [F, G]),
    ("mistral", "[TOOL_CALLS] nope", "", []),
    # Cut off by max_tokens: the complete calls count, the call cut short is dropped (no markup in content).
    ("hermes", '<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>\n<tool_call>{"name": "g"', "", [F]),
    ("hermes", '<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>\n<tool', "", [F]),
    ("llama3_json", '{"name": "f", "parameters": {"a": 1}}; {"name": "g", "param', "", [F]),
    ("mistral", '[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}, {"name": "g", "argu', "", [F]),
]


@pytest.mark.parametrize(("parser", "text", "content", "calls"), CASES)
@pytest.mark.parametrize("chunk", [1, 3, 1000])
def test_parsers_split_content_and_calls(parser: str, text: str, content: str, calls: list, chunk: int) -> None:
    assert run(parser, text, chunk) == (content, calls)


def test_hermes_streams_content_before_the_marker_and_holds_a_partial_marker() -> None:
    stream = ToolCallStream(tool_parser("hermes"))
    assert stream.feed("Hello <tool") == ("Hello ", [])
    assert stream.feed('_call>{"name": "f", "arguments": {}}') == ("", [])
    assert stream.feed("</tool_call>") == ("", [ParsedCall("f", "{}")])
    assert stream.feed(" then text") == (" then text", [])


def test_call_ids() -> None:
    assert new_call_id(tool_parser("hermes")).startswith("call_")
    mistral_id = new_call_id(tool_parser("mistral"))
    assert len(mistral_id) == 9 and mistral_id.isalnum()


def test_forced_call_grammar_names_only_the_chosen_tool() -> None:
    tools = [
        Tool(
            function=FunctionDefinition(
                name="get_weather",
                parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            )
        ),
        Tool(function=FunctionDefinition(name="no_args")),
    ]
    named = forced_call_grammar("hermes", tools, "no_args", max_calls=8)
    assert "no_args" in named and "get_weather" not in named
    assert named.startswith("root ::= tool_call_block\n")
    assert 'tool_call_block ::= "<tool_call>"' in named
    any_tool = forced_call_grammar("mistral", tools, None, max_calls=8)
    assert "get_weather" in any_tool and "no_args" in any_tool and '"[TOOL_CALLS]"' in any_tool
    assert "parameters" in forced_call_grammar("llama3_json", tools, None, max_calls=1)
    # A named function: exactly one call, whatever max_calls says; otherwise 1 to max_calls.
    assert "{0," not in named
    assert "{0,2}" in forced_call_grammar("hermes", tools, None, max_calls=3)
    # What we write reads back as a valid grammar.
    parse_grammar(named)


@pytest.mark.parametrize(
    ("text", "tail", "reasoning", "content"),
    [
        ("<think>hmm <x> ok</think>\n\nAnswer <b>", "", "hmm <x> ok", "Answer <b>"),
        ("  <think>cut off", "", "cut off", ""),
        ("plain <think>x</think> y", "", "", "plain <think>x</think> y"),
        ("inside</think>\nout", "<|im_start|>assistant\n<think>\n", "inside", "out"),
        ("<thi", "", "", "<thi"),
    ],
)
@pytest.mark.parametrize("chunk", [1, 2, 1000])
def test_reasoning_split(text: str, tail: str, reasoning: str, content: str, chunk: int) -> None:
    stream = ReasoningStream(prompt_tail=tail)
    parts = [stream.feed(text[start : start + chunk]) for start in range(0, len(text), chunk)] + [stream.finish()]
    assert ("".join(part[0] for part in parts), "".join(part[1] for part in parts)) == (reasoning, content)


def test_parsed_arguments_are_json_text() -> None:
    _, calls = run("hermes", '<tool_call>{"name": "f", "arguments": {"city": "Zürich"}}</tool_call>', 5)
    assert json.loads(calls[0].arguments) == {"city": "Zürich"}
