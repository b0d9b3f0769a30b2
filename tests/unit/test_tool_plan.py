"""Whether a chat request's tools are in play is decided once, by `ToolPlan.of`."""

from __future__ import annotations

import msgspec
import pytest

from appliance.errors import InvalidRequest
from appliance.protocol.openai import ChatCompletionRequest
from appliance.service.tool_plan import ToolPlan
from tests.fakes import fake_graph

TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


def request(**fields: object) -> ChatCompletionRequest:
    body = {"model": "fake", "messages": [{"role": "user", "content": "hi"}], **fields}
    return msgspec.convert(body, ChatCompletionRequest)


def graph(tool_parser: str | None = "hermes"):
    return msgspec.structs.replace(fake_graph(), tool_parser=tool_parser)


@pytest.mark.parametrize(
    ("fields", "parser", "forced", "name"),
    [
        ({}, None, False, None),
        ({"tools": [TOOL]}, "hermes", False, None),
        ({"tools": [TOOL], "tool_choice": "auto"}, "hermes", False, None),
        ({"tools": [TOOL], "tool_choice": "none"}, None, False, None),
        ({"tools": [TOOL], "tool_choice": "required"}, "hermes", True, None),
        (
            {"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
            "hermes",
            True,
            "get_weather",
        ),
    ],
)
def test_one_rule_for_tools_in_play(fields: dict, parser: str | None, forced: bool, name: str | None) -> None:
    plan = ToolPlan.of(request(**fields), graph(), "hermes")
    assert (plan.parser, plan.forced, plan.forced_name) == (parser, forced, name)
    # The template shows exactly the tools whose calls are parsed.
    assert (plan.template_tools() is not None) == (parser is not None)


def test_tool_choice_none_needs_no_tool_parser() -> None:
    assert ToolPlan.of(request(tools=[TOOL], tool_choice="none"), graph(None), "hermes").parser is None
    # The parser the engine chose (graph file, chat template or generic) reads the calls.
    assert ToolPlan.of(request(tools=[TOOL]), graph(None), "mistral").parser == "mistral"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tools": [TOOL, TOOL]}, "tools"),
        (
            {"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "other"}}},
            "tool_choice.function.name",
        ),
    ],
)
def test_tools_that_do_not_fit_are_refused(fields: dict, param: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        ToolPlan.of(request(**fields), graph(), "hermes")
    assert refused.value.param == param
