"""Tools, forced tool calls, the tool round trip, the other tool parsers and reasoning content,
through the real `openai` client against the real server and the demo model (Hermes-style template).

The demo model's words are random, so forced calls are checked for structure: a parsable call of a
named tool whose arguments validate against the tool's schema.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import openai
import pytest

from tests.conftest import running_server

MODEL = "demo-chat"
QUESTION = [{"role": "user", "content": "What is the weather in Oslo?"}]
WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 12},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TOOLS = [
    {
        "type": "function",
        "function": {"name": "get_weather", "description": "Weather forecast", "parameters": WEATHER_PARAMETERS},
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Local time",
            "parameters": {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"]},
        },
    },
]
SCHEMAS = {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}
# Exactly one call, written the Hermes way: lets `tool_choice: auto` parsing be tested for real.
SCRIPTED_CALL = (
    'root ::= "<tool_call>\\n{\\"name\\": \\"get_time\\", \\"arguments\\": {\\"zone\\": \\"UTC\\"}}\\n</tool_call>"'
)


def check_call(call) -> dict:
    assert call.type == "function" and call.id
    arguments = json.loads(call.function.arguments)
    jsonschema.validate(arguments, SCHEMAS[call.function.name])
    return arguments


def test_required_tool_choice_yields_a_valid_call(openai_client: openai.OpenAI) -> None:
    reply = openai_client.chat.completions.create(
        model=MODEL,
        messages=QUESTION,
        tools=TOOLS,
        tool_choice="required",
        parallel_tool_calls=False,
        max_tokens=120,
        temperature=0,
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    check_call(call)
    assert choice.message.content is None


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_named_tool_choice_calls_that_tool(openai_client: openai.OpenAI, seed: int) -> None:
    reply = openai_client.chat.completions.create(
        model=MODEL,
        messages=QUESTION,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        parallel_tool_calls=False,
        max_tokens=120,
        seed=seed,
    )
    (call,) = reply.choices[0].message.tool_calls
    assert call.function.name == "get_weather"
    assert set(check_call(call)) >= {"city", "unit"}


def test_parallel_calls_are_all_parsed(openai_client: openai.OpenAI) -> None:
    reply = openai_client.chat.completions.create(
        model=MODEL,
        messages=QUESTION,
        tools=TOOLS,
        tool_choice="required",
        max_tokens=300,
        seed=4,
    )
    calls = reply.choices[0].message.tool_calls
    assert calls and len({call.id for call in calls}) == len(calls)
    for call in calls:
        check_call(call)


def test_streamed_tool_call_deltas(openai_client: openai.OpenAI) -> None:
    chunks = list(
        openai_client.chat.completions.create(
            model=MODEL,
            messages=QUESTION,
            tools=TOOLS,
            tool_choice="required",
            parallel_tool_calls=False,
            max_tokens=120,
            temperature=0,
            stream=True,
        )
    )
    deltas = [choice.delta for chunk in chunks for choice in chunk.choices]
    assert "<tool_call>" not in "".join(delta.content or "" for delta in deltas)
    calls = [call for delta in deltas for call in delta.tool_calls or []]
    assert [call.index for call in calls] == [0]
    assert calls[0].id and calls[0].type == "function"
    assert calls[0].function.name in SCHEMAS
    jsonschema.validate(json.loads(calls[0].function.arguments), SCHEMAS[calls[0].function.name])
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_tool_round_trip(openai_client: openai.OpenAI) -> None:
    first = openai_client.chat.completions.create(
        model=MODEL,
        messages=QUESTION,
        tools=TOOLS,
        tool_choice="required",
        parallel_tool_calls=False,
        max_tokens=120,
        temperature=0,
    )
    message = first.choices[0].message
    call = message.tool_calls[0]
    # The SDK's message object goes back as is, then the tool's answer.
    messages = [*QUESTION, message, {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 degrees"}]
    answer = openai_client.chat.completions.create(
        model=MODEL, messages=messages, tools=TOOLS, max_tokens=16, temperature=0
    )
    assert answer.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert answer.usage.prompt_tokens > first.usage.prompt_tokens + len(call.function.arguments) // 4
    forced = openai_client.chat.completions.create(
        model=MODEL,
        messages=messages,
        tools=TOOLS,
        max_tokens=32,
        tool_choice="none",
        extra_body={"structured_outputs": {"choice": ["It is sunny in Oslo."]}},
    )
    assert forced.choices[0].message.content == "It is sunny in Oslo."
    assert forced.choices[0].message.tool_calls is None


def test_auto_tool_choice_parses_what_the_model_writes(openai_client: openai.OpenAI) -> None:
    fields = {
        "model": MODEL,
        "messages": QUESTION,
        "tools": TOOLS,
        "max_tokens": 60,
        "extra_body": {"structured_outputs": {"grammar": SCRIPTED_CALL}},
    }
    reply = openai_client.chat.completions.create(**fields)
    (call,) = reply.choices[0].message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_time", {"zone": "UTC"})
    assert reply.choices[0].finish_reason == "tool_calls"
    chunks = list(openai_client.chat.completions.create(stream=True, **fields))
    streamed = [c for chunk in chunks for choice in chunk.choices for c in choice.delta.tool_calls or []]
    assert [(c.index, c.function.name) for c in streamed] == [(0, "get_time")]
    # With tool_choice "none" the same text is plain content (<tool_call> is a special token).
    fields["extra_body"]["skip_special_tokens"] = False
    plain = openai_client.chat.completions.create(tool_choice="none", **fields)
    assert plain.choices[0].message.tool_calls is None
    assert "<tool_call>" in plain.choices[0].message.content


def test_tools_reach_the_chat_template(openai_client: openai.OpenAI) -> None:
    def prompt_tokens(**fields) -> int:
        return openai_client.chat.completions.create(
            model=MODEL, messages=QUESTION, max_tokens=1, **fields
        ).usage.prompt_tokens

    without = prompt_tokens()
    assert prompt_tokens(tools=TOOLS) > without + 40
    assert prompt_tokens(tools=TOOLS, tool_choice="none") == without


def test_tool_errors(openai_client: openai.OpenAI) -> None:
    cases = [
        ({"tool_choice": "required"}, "tool_choice"),
        (
            {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "tool_choice.function.name",
        ),
        ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools[0].function.name"),
        (
            {
                "tools": [
                    {
                        "type": "function",
                        "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"not": {}}}}},
                    }
                ],
                "tool_choice": "required",
            },
            "tools[0].function.parameters.properties.x.not",
        ),
    ]
    for fields, param in cases:
        with pytest.raises(openai.BadRequestError) as info:
            openai_client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=4, **fields)
        assert info.value.param == param


# -- other parsers and reasoning: the demo model under graphs that declare them ------------------


@pytest.fixture(scope="module")
def parsers_server(demo_root: Path, tmp_path_factory: pytest.TempPathFactory):
    graphs = tmp_path_factory.mktemp("parser-graphs")
    model = demo_root / "models" / MODEL
    for name, parsers in {
        "demo-mistral": 'tool_parser = "mistral"\nreasoning_parser = "think"',
        "demo-llama3": 'tool_parser = "llama3_json"',
    }.items():
        (graphs / f"{name}.toml").write_text(
            f'name = "{name}"\nmodel_path = "{model}"\npipeline = "LM_CB"\n{parsers}\n\n'
            '[scheduler]\ncache_size = 1\nmax_num_batched_tokens = 2048\n\n[plugin_config]\nINFERENCE_PRECISION_HINT = "f32"\n'
        )
    with running_server(graphs, tmp_path_factory.mktemp("parser-server") / "server.log") as running:
        yield running.client()


@pytest.mark.parametrize("model", ["demo-mistral", "demo-llama3"])
def test_other_tool_parsers_force_and_parse_calls(parsers_server: openai.OpenAI, model: str) -> None:
    reply = parsers_server.chat.completions.create(
        model=model,
        messages=QUESTION,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
        max_tokens=80,
        temperature=0,
    )
    calls = reply.choices[0].message.tool_calls
    assert calls and all(call.function.name == "get_time" for call in calls)
    check_call(calls[0])
    if model == "demo-mistral":
        assert len(calls[0].id) == 9  # Mistral templates require 9-character ids


def test_reasoning_content(parsers_server: openai.OpenAI) -> None:
    grammar = 'root ::= "<think>" [a-z ]{5,20} "</think>\\n\\n" [A-Za-z ]{3,12} "."'
    fields = {
        "model": "demo-mistral",
        "messages": QUESTION,
        "max_tokens": 60,
        "seed": 1,
        "extra_body": {"structured_outputs": {"grammar": grammar}},
    }
    message = parsers_server.chat.completions.create(**fields).choices[0].message
    reasoning = message.model_extra["reasoning_content"]
    assert 5 <= len(reasoning) <= 20 and "<think>" not in reasoning
    assert message.content.endswith(".") and "think>" not in message.content
    deltas = [c.delta for chunk in parsers_server.chat.completions.create(stream=True, **fields) for c in chunk.choices]
    assert "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas) == reasoning
    assert "".join(d.content or "" for d in deltas) == message.content
