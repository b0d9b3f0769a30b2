"""Cheap limits on a chat request's messages (`service.prompt_limits`): refused before the engine
renders anything, on every route that takes messages."""

from __future__ import annotations

import json

import pytest

from appliance.entry.decoding import decode_body
from appliance.errors import InvalidRequest
from appliance.graphfiles import Graph, Limits
from appliance.protocol.openai import ChatCompletionRequest
from appliance.service.prompt_limits import (
    CHARS_PER_TOKEN,
    check_messages,
    check_prompt,
    check_token_ids,
    prompt_chars,
)
from tests.apps import app_client
from tests.fakes import FakeEngineClient

GRAPH = Graph(name="fake", model_path="/nonexistent", limits=Limits(max_messages=3))
CONTEXT = 4096
"""A context large enough for every test that is not about the bound on text."""
TEXT = {"role": "user", "content": "hi"}


def _messages(*messages: dict) -> list:
    """Decoded as the routes decode them."""
    return decode_body(
        json.dumps({"model": "fake", "messages": list(messages)}).encode(), ChatCompletionRequest
    ).messages


def _refusal(
    messages: list, max_context: int = CONTEXT, tools: list | None = None, template_kwargs: dict | None = None
) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        check_messages(messages, GRAPH, max_context, tools, template_kwargs)
    assert info.value.status == 400 and info.value.param == "messages"
    return info.value


def test_default_is_documented() -> None:
    assert Limits().max_messages == 4096


def test_message_count() -> None:
    check_messages(_messages(TEXT, TEXT, TEXT), GRAPH, CONTEXT)
    error = _refusal(_messages(TEXT, TEXT, TEXT, TEXT))
    assert error.code == "array_above_max_length"
    assert "4" in error.message and "at most 3" in error.message and "limits.max_messages" in error.message


def test_content_parts_and_tool_calls_count_together() -> None:
    parts = {"role": "user", "content": [{"type": "text", "text": "a"}] * 2}
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    check_messages(_messages(parts, {"role": "assistant", "tool_calls": [call]}), GRAPH, CONTEXT)
    error = _refusal(_messages(parts, {"role": "assistant", "tool_calls": [call, call]}))
    assert error.code == "array_above_max_length" and "4 over all messages" in error.message


def test_text_is_bounded_by_the_context() -> None:
    bound = 10 * CHARS_PER_TOKEN
    fits = [
        {"role": "user", "content": "x" * (bound - 4)},
        {"role": "assistant", "content": [{"type": "text", "text": "yyyy"}]},
    ]
    check_messages(_messages(*fits), GRAPH, 10)
    error = _refusal(_messages(*fits, {"role": "user", "content": "z"}), max_context=10)
    assert error.code == "context_length_exceeded" and "10 tokens" in error.message
    assert "refused without counting tokens" in error.message
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "a" * (bound + 1)}}
    _refusal(_messages({"role": "assistant", "tool_calls": [call]}), max_context=10)


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": "", "name": "N"},
        {"role": "system", "content": "", "name": "N"},
        {
            "role": "assistant",
            "tool_calls": [{"id": "N", "type": "function", "function": {"name": "f", "arguments": ""}}],
        },
        {
            "role": "assistant",
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "N", "arguments": ""}}],
        },
        {"role": "assistant", "content": "", "reasoning_content": "N"},
        {"role": "tool", "content": "", "tool_call_id": "N"},
    ],
)
def test_every_text_the_template_sees_is_counted(message: dict) -> None:
    """Names, tool call ids and function names, reasoning: chat templates render them all (a 30 MB
    function name used to reach the engine)."""
    bound = 10 * CHARS_PER_TOKEN
    fits = json.loads(json.dumps(message).replace('"N"', json.dumps("n" * (bound - 8))))
    check_messages(_messages(fits), GRAPH, 10)
    above = json.loads(json.dumps(message).replace('"N"', json.dumps("n" * (bound + 1))))
    _refusal(_messages(above), max_context=10)


def test_template_variables_are_counted() -> None:
    bound = 10 * CHARS_PER_TOKEN
    check_messages(_messages(TEXT), GRAPH, 10, template_kwargs={"k": "v" * (bound // 2)})
    _refusal(_messages(TEXT), max_context=10, template_kwargs={"k": "v" * bound})


def test_the_graph_may_set_the_bound() -> None:
    graph = Graph(name="fake", model_path="/nonexistent", limits=Limits(max_prompt_chars=100))
    assert prompt_chars(graph, 10) == 100 and prompt_chars(GRAPH, 10) == 10 * CHARS_PER_TOKEN
    check_prompt("x" * 100, graph, 10, "prompt")
    with pytest.raises(InvalidRequest) as info:
        check_prompt("x" * 101, graph, 10, "prompt[3]")
    assert info.value.param == "prompt[3]" and info.value.code == "context_length_exceeded"
    assert "limits.max_prompt_chars" in info.value.message and "101 characters" in info.value.message


def test_no_context_is_unbounded() -> None:
    """A context of 0 (none known) refuses every prompt rather than letting any through: the
    server reads each model's context from its files (`Graph.facts`), so it never passes one."""
    with pytest.raises(InvalidRequest):
        check_prompt("x", GRAPH, 0, "prompt")
    with pytest.raises(InvalidRequest):
        check_token_ids([1], 0)
    assert Graph(name="fake", model_path="/nonexistent").max_context == 4096  # files say nothing: the default


def test_token_ids_are_bounded_by_the_context() -> None:
    check_token_ids([1] * 10, 10)
    with pytest.raises(InvalidRequest) as info:
        check_token_ids([1] * 11, 10)
    assert info.value.param == "tokens" and info.value.code == "array_above_max_length"


@pytest.fixture
def client():
    engine = FakeEngineClient(GRAPH)
    with app_client(engine, max_body_size=1 << 20) as test_client:
        yield test_client, engine


@pytest.mark.parametrize(
    "path",
    [
        "/v1/chat/completions",
        "/v3/chat/completions",
        "/tokenize",
        "/invocations",
        "/_inference/chat_completion/x/_stream",
    ],
)
def test_every_route_that_takes_messages_refuses_before_the_engine(client, path: str) -> None:
    test_client, engine = client
    response = test_client.post(path, json={"model": "fake", "messages": [TEXT] * 4})
    assert response.status_code == 400
    if path.startswith("/_inference"):  # Elasticsearch's error body
        assert "limits.max_messages" in response.json()["error"]["reason"]
    else:
        assert response.json()["error"]["param"] == "messages"
        assert response.json()["error"]["code"] == "array_above_max_length"
    assert engine.submitted == []
    assert test_client.post(path, json={"model": "fake", "messages": [TEXT] * 3}).status_code == 200


def test_tools_are_counted_and_their_definitions_are_text() -> None:
    from appliance.service.prompt_limits import MAX_TOOLS

    def tools(count: int, description: str = "") -> list:
        request = {
            "model": "fake",
            "messages": [TEXT],
            "tools": [
                {"type": "function", "function": {"name": f"f{i}", "description": description}} for i in range(count)
            ],
        }
        return decode_body(json.dumps(request).encode(), ChatCompletionRequest).tools

    check_messages(_messages(TEXT), GRAPH, CONTEXT, tools(MAX_TOOLS))
    with pytest.raises(InvalidRequest) as info:
        check_messages(_messages(TEXT), GRAPH, CONTEXT, tools(MAX_TOOLS + 1))
    assert info.value.param == "tools" and info.value.code == "array_above_max_length"
    check_messages(_messages(TEXT), GRAPH, 10, tools(1, "d" * (5 * CHARS_PER_TOKEN)))
    error = _refusal(_messages(TEXT), max_context=10, tools=tools(1, "d" * (10 * CHARS_PER_TOKEN)))
    assert "tools and template variables" in error.message


BIG = "x" * (64 * CHARS_PER_TOKEN + 1)
CALL_NAMED_BIG = {"id": "c", "type": "function", "function": {"name": BIG, "arguments": "{}"}}


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/completions", {"prompt": BIG}, "prompt"),
        ("/v1/completions", {"prompt": ["ok", BIG]}, "prompt[1]"),
        ("/tokenize", {"prompt": BIG}, "prompt"),
        ("/tokenize", {"messages": [{"role": "user", "content": "hi", "name": BIG}]}, "messages"),
        ("/tokenize", {"messages": [TEXT], "chat_template_kwargs": {"k": BIG}}, "messages"),
        ("/v1/chat/completions", {"messages": [TEXT, {"role": "assistant", "tool_calls": [CALL_NAMED_BIG]}]}, "messages"),
        ("/v1/chat/completions", {"messages": [TEXT, {"role": "tool", "tool_call_id": BIG, "content": ""}]}, "messages"),
        ("/v1/responses", {"input": BIG}, "input"),
        ("/invocations", {"inputs": BIG}, None),
        ("/invocations", {"inputs": ["ok", BIG]}, None),
        ("/detokenize", {"tokens": [1] * 65}, "tokens"),
    ],
)  # fmt: skip
def test_every_route_bounds_the_prompt_before_the_engine(path: str, body: dict, param: str | None) -> None:
    engine = FakeEngineClient(Graph(name="fake", model_path="/nonexistent"))

    def small_context() -> None:
        engine.max_context = 64

    with app_client(engine, on_start=small_context, max_body_size=1 << 20) as test_client:
        # LMI's body names no model: the route chooses it.
        response = test_client.post(path, json=body if path == "/invocations" else {"model": "fake", **body})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    if param is None:  # LMI's error body: the message only
        assert "limits.max_prompt_chars" in error
    else:
        assert (error["param"], error["code"]) == (
            param,
            body.get("tokens") and "array_above_max_length" or "context_length_exceeded",
        )
    assert engine.submitted == [] and engine.asked == []
