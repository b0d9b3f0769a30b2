"""The model families' formats end to end: each forced through a graph file on the random demo
model, driven with the `openai` SDK, streamed and not.

The demo model's words are random, so two things are checked per format: a forced call (the
grammar written in the format) comes back as `tool_calls` valid against the tool's schema; and an
answer scripted in the format by a grammar (`structured_outputs`, as the family's model would
write it: reasoning, text, calls) comes back split into `reasoning_content`, `content` and
`tool_calls`, with no markup in `content` (also when an argument holds the format's closing
marker); a scripted call whose JSON is not strict (NaN) is no call.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import openai
import pytest

from appliance.grammar.ebnf import literal
from tests.conftest import running_server
from tests.e2e.test_tools import QUESTION, SCHEMAS, TOOLS

GRAPHS = {
    "demo-qwen3-coder": 'tool_parser = "qwen3_coder"',
    "demo-glm45": 'tool_parser = "glm45"\nreasoning_parser = "think"',
    "demo-phi4-mini": 'tool_parser = "phi4_mini"',
    "demo-deepseek-r1": 'tool_parser = "deepseek_r1"\nreasoning_parser = "think"',
    "demo-gpt-oss": 'tool_parser = "harmony"\nreasoning_parser = "harmony"',
}
MARKUP = (
    "<tool_call>",
    "<function=",
    "<|tool_call|>",
    "tool▁call",
    "<|channel|>",
    "<|message|>",
    "<think>",
    "</think>",
)
DS_CALL = (
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n"
    '{"zone": "UTC"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
)
# (model, the answer as the family's model writes it, reasoning, content, calls)
SCRIPTS = [
    (
        "demo-qwen3-coder",
        "Let me look.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
        "<parameter=unit>\ncelsius\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
        "",
        "Let me look.\n",
        [("get_weather", {"city": "Oslo", "unit": "celsius", "days": 3})],
    ),
    (
        "demo-glm45",
        "<think>Oslo, then.</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"
        "<arg_key>unit</arg_key>\n<arg_value>celsius</arg_value>\n</tool_call>",
        "Oslo, then.",
        "",
        [("get_weather", {"city": "Oslo", "unit": "celsius"})],
    ),
    (
        "demo-phi4-mini",
        'Sure.<|tool_call|>[{"name": "get_time", "arguments": {"zone": "UTC"}}, '
        '{"name": "get_time", "arguments": {"zone": "CET"}}]<|/tool_call|>',
        "",
        "Sure.",
        [("get_time", {"zone": "UTC"}), ("get_time", {"zone": "CET"})],
    ),
    (
        "demo-deepseek-r1",
        f"<think>\nThe user wants the time.\n</think>\n\n{DS_CALL}",
        "\nThe user wants the time.\n",
        "",
        [("get_time", {"zone": "UTC"})],
    ),
    (
        "demo-gpt-oss",
        "<|channel|>analysis<|message|>Need the time.<|end|><|start|>assistant<|channel|>commentary "
        'to=functions.get_time <|constrain|>json<|message|>{"zone": "UTC"}',
        "Need the time.",
        "",
        [("get_time", {"zone": "UTC"})],
    ),
    (
        "demo-gpt-oss",
        "<|channel|>analysis<|message|>Easy one.<|end|><|start|>assistant<|channel|>final<|message|>It is noon.",
        "Easy one.",
        "It is noon.",
        [],
    ),
    # Model output is untrusted: a closing marker inside an argument (a JSON string, a tag value)
    # is text of the argument.
    (
        "demo-phi4-mini",
        '<|tool_call|>[{"name": "get_time", "arguments": {"zone": "UTC<|/tool_call|>"}}]<|/tool_call|>',
        "",
        "",
        [("get_time", {"zone": "UTC<|/tool_call|>"})],
    ),
    (
        "demo-gpt-oss",
        '<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{"zone": "<|call|>UTC"}',
        "",
        "",
        [("get_time", {"zone": "<|call|>UTC"})],
    ),
    (
        "demo-qwen3-coder",
        "<tool_call>\n<function=get_time>\n<parameter=zone>\nUTC</tool_call>\n</parameter>\n</function>\n</tool_call>",
        "",
        "",
        [("get_time", {"zone": "UTC</tool_call>"})],
    ),
]


@pytest.fixture(scope="module")
def families(demo_root: Path, tmp_path_factory: pytest.TempPathFactory):
    graphs = tmp_path_factory.mktemp("family-graphs")
    model = demo_root / "models" / "demo-chat"
    for name, parsers in GRAPHS.items():
        (graphs / f"{name}.toml").write_text(
            f'name = "{name}"\nmodel_path = "{model}"\npipeline = "LM_CB"\n{parsers}\n\n'
            '[scheduler]\ncache_size = 0\nmax_num_batched_tokens = 2048\n\n[plugin_config]\nINFERENCE_PRECISION_HINT = "f32"\n'
        )
    with running_server(graphs, tmp_path_factory.mktemp("family-server") / "server.log") as running:
        yield running.client()


def answer(client: openai.OpenAI, stream: bool, **fields) -> tuple[str, str, list, str]:
    """(reasoning, content, [(name, arguments)], finish_reason) of one choice, streamed or not."""
    if not stream:
        choice = client.chat.completions.create(**fields).choices[0]
        message = choice.message
        calls = [(call.function.name, json.loads(call.function.arguments)) for call in message.tool_calls or []]
        assert all(call.id for call in message.tool_calls or [])
        return (
            (message.model_extra or {}).get("reasoning_content") or "",
            message.content or "",
            calls,
            choice.finish_reason,
        )
    reasoning = content = ""
    calls, finish = [], ""
    for chunk in client.chat.completions.create(stream=True, **fields):
        for choice in chunk.choices:
            delta = choice.delta
            reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
            content += delta.content or ""
            for call in delta.tool_calls or []:
                assert call.index == len(calls) and call.id  # each call whole, in order
                calls.append((call.function.name, json.loads(call.function.arguments)))
            finish = choice.finish_reason or finish
    return reasoning, content, calls, finish


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("model", list(GRAPHS))
def test_a_forced_call_in_each_format(families: openai.OpenAI, model: str, stream: bool) -> None:
    named = {"type": "function", "function": {"name": "get_weather"}}
    for choice in (named, "required"):
        reasoning, content, calls, finish = answer(
            families, stream, model=model, messages=QUESTION, tools=TOOLS, tool_choice=choice, max_tokens=160, seed=3
        )
        assert calls and finish == "tool_calls" and content == "" and reasoning == ""
        for name, arguments in calls:
            assert name == "get_weather" or choice == "required"
            jsonschema.validate(arguments, SCHEMAS[name])


def scripted(client: openai.OpenAI, stream: bool, model: str, text: str, tools: bool) -> tuple[str, str, list, str]:
    """`answer` of the demo model made to write `text` by a grammar, as the family's model would."""
    return answer(
        client,
        stream,
        model=model,
        messages=QUESTION,
        tools=TOOLS if tools else None,
        max_tokens=200,
        extra_body={"structured_outputs": {"grammar": f"root ::= {literal(text)}"}},
    )


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("model", "text", "reasoning", "content", "calls"), SCRIPTS)
def test_each_format_is_split_into_reasoning_content_and_calls(
    families: openai.OpenAI, model: str, text: str, reasoning: str, content: str, calls: list, stream: bool
) -> None:
    got = scripted(families, stream, model, text, tools=bool(calls))
    assert got == (reasoning, content, calls, "tool_calls" if calls else "stop")
    assert not any(marker in got[1] for marker in MARKUP)


@pytest.mark.parametrize("stream", [False, True])
def test_a_call_whose_json_is_not_strict_is_no_call(families: openai.OpenAI, stream: bool) -> None:
    """Arguments are strict JSON: a NaN makes the block malformed, left in content as any is."""
    text = 'Sure.<|tool_call|>[{"name": "get_time", "arguments": {"zone": NaN}}]<|/tool_call|>'
    assert scripted(families, stream, "demo-phi4-mini", text, tools=True) == ("", text, [], "stop")
