"""Anthropic's Messages API on the fake engine: the message and its stream events (validated with
the `anthropic` SDK's own types), thinking, tool use, what reaches the chat template, refusals
naming the Messages field, an engine failure mid-stream, and the gate's API key from x-api-key."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
import pytest
from anthropic.types import Message as SdkMessage
from anthropic.types import RawMessageStreamEvent
from litestar.testing import TestClient
from pydantic import TypeAdapter

from appliance.api.gate import Gate
from appliance.engine.messages import Finished
from appliance.graphfiles import Graph
from appliance.protocol.anthropic import MessagesRequest
from tests.apps import fake_app
from tests.fakes import FakeEngineClient

KEY = "k1"
HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
WEATHER = {
    "name": "get_weather",
    "description": "Weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
SDK_EVENT = TypeAdapter(RawMessageStreamEvent)


@pytest.fixture
def engine() -> FakeEngineClient:
    return FakeEngineClient(
        Graph(name="fake", model_path="/nonexistent", tool_parser="hermes", reasoning_parser="think")
    )


@pytest.fixture
def client(engine: FakeEngineClient):
    with TestClient(Gate(fake_app(engine), api_keys=[KEY])) as test_client:
        yield test_client


def create(client: TestClient, **fields):
    body = {"model": "fake", "max_tokens": 32, "messages": [{"role": "user", "content": "one two three"}], **fields}
    return client.post("/v1/messages", json=body, headers=HEADERS)


def stream(client: TestClient, **fields) -> list[dict]:
    response = create(client, stream=True, **fields)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = []
    for block in response.text.split("\n\n"):
        if block:
            name, data = block.split("\n")
            event = json.loads(data.removeprefix("data: "))
            assert name == f"event: {event['type']}"
            if event["type"] not in ("error", "ping"):  # the SDK has no type for these two
                SDK_EVENT.validate_python(event)
            events.append(event)
    return events


def test_message_shape(client: TestClient) -> None:
    response = create(client)
    assert response.status_code == 200 and response.headers["request-id"]
    message = SdkMessage.model_validate(response.json())
    assert message.id.startswith("msg_") and message.stop_reason == "end_turn" and message.stop_sequence is None
    assert message.content[0].type == "text" and message.content[0].text == " three two one"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (3, 3)


def test_stream_events_add_up_to_the_message(client: TestClient) -> None:
    events = stream(client)
    kinds = [event["type"] for event in events]
    assert kinds[:3] == ["message_start", "ping", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert events[0]["message"]["usage"]["input_tokens"] == 3
    text = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
    assert text == create(client).json()["content"][0]["text"]
    assert events[-2]["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert events[-2]["usage"] == {"output_tokens": 3}


def test_max_tokens_and_stop_sequence(client: TestClient, engine: FakeEngineClient) -> None:
    assert create(client, max_tokens=1).json()["stop_reason"] == "max_tokens"
    engine.script = "alpha beta gamma"
    stopped = create(client, stop_sequences=["beta"]).json()
    assert (
        list(engine.submitted[-1].params.stop) == ["beta"]
        and not engine.submitted[-1].params.include_stop_str_in_output
    )
    assert stopped["stop_reason"] in ("stop_sequence", "end_turn")  # the fake engine does not match stop strings


def test_thinking_text_and_tool_use_blocks(client: TestClient, engine: FakeEngineClient) -> None:
    engine.script = f"<think>Hm.</think>Checking. {CALL}"
    message = SdkMessage.model_validate(create(client, tools=[WEATHER], thinking={"type": "adaptive"}).json())
    assert [block.type for block in message.content] == ["thinking", "text", "tool_use"]
    assert message.content[0].thinking == "Hm." and message.stop_reason == "tool_use"
    use = message.content[2]
    assert use.id.startswith("toolu_") and use.name == "get_weather" and use.input == {"city": "Oslo"}
    events = stream(client, tools=[WEATHER])
    deltas = [e["delta"]["type"] for e in events if e["type"] == "content_block_delta"]
    assert "signature_delta" in deltas and deltas[-1] == "input_json_delta"
    starts = [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"]
    assert starts == ["thinking", "text", "tool_use"]


def test_what_reaches_the_chat_template(client: TestClient, engine: FakeEngineClient) -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Weather?", "cache_control": {"type": "ephemeral"}}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Call it.", "signature": "x"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "Rain"}]},
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "down", "is_error": True},
                {"type": "text", "text": "And tomorrow?"},
            ],
        },
        {"role": "assistant", "content": "Tomorrow"},
    ]
    response = create(
        client,
        system=[{"type": "text", "text": "Be brief."}],
        messages=messages,
        tools=[WEATHER],
        tool_choice={"type": "auto", "disable_parallel_tool_use": True},
        metadata={"user_id": "u1"},
        temperature=0.5,
        top_k=5,
        top_p=0.9,
    )
    assert response.status_code == 200, response.text
    submitted = engine.submitted[-1]
    sent = [(m["role"], m.get("content")) for m in submitted.prompt.messages]
    assert sent == [
        ("system", "Be brief."),
        ("user", "Weather?"),
        ("assistant", ""),
        ("tool", "Rain"),
        ("tool", "Error: down"),
        ("user", "And tomorrow?"),
        ("assistant", "Tomorrow"),
    ]
    assistant = submitted.prompt.messages[2]
    assert assistant["reasoning_content"] == "Call it."
    assert assistant["tool_calls"][0]["function"]["arguments"] == {"city": "Oslo"}  # templates take an object
    assert submitted.prompt.continue_final_message and not submitted.prompt.add_generation_prompt
    params = submitted.params
    assert (params.temperature, params.top_k, params.top_p) == (0.5, 5, 0.9)


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"container": "c1"}, "container"),
        ({"mcp_servers": [{"type": "url", "url": "https://x", "name": "x"}]}, "mcp_servers"),
        (
            {"context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]}},
            "context_management.edits[0].type",
        ),
        ({"context_management": {"edits": [{"type": "compact_20260112"}]}}, "context_management.edits[0].type"),
        (
            {"context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "some"}]}},
            "context_management.edits[0].keep",
        ),
        (
            {"messages": [{"role": "system", "content": [{"type": "image", "source": {"type": "url", "url": "x"}}]}]},
            "messages[0].content[0].type",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "source": {"type": "url", "url": "https://example.com/a.png"},
                                "transformations": {"oversized_image": "error"},
                            }
                        ],
                    }
                ]
            },
            "messages[0].content[0].transformations.oversized_image",
        ),
        # A hosted tool is taken out: an error about a later tool still names it as the request does.
        (
            {
                "tools": [
                    {"type": "web_search_20250305", "name": "web_search"},
                    {"name": "bad name", "input_schema": {}},
                ]
            },
            "tools[1].name",
        ),
        (
            {
                "tools": [{"type": "web_search_20250305", "name": "w"}, WEATHER],
                "tool_choice": {"type": "tool", "name": "w"},
            },
            "tool_choice.name",
        ),
        ({"tools": [WEATHER], "tool_choice": {"type": "tool", "name": "other"}}, "tool_choice.name"),
        (
            {"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]},
            "messages[0].content[0].type",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}]}
                ]
            },
            "messages[0].content[0].source",
        ),
        (
            {"messages": [{"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]},
            "messages[0].content[0].type",
        ),
        ({"messages": [{"role": "user", "content": "x"}], "stop_sequences": [""]}, "stop_sequences[0]"),
        ({"temperature": 1.5}, "temperature"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"surprise": 1}, "surprise"),
        # Nested objects are as strict as the request (issue 40, L1).
        ({"cache_control": {"type": "persistent"}}, "cache_control.type"),
        ({"cache_control": {"type": "ephemeral", "ttl": "1d"}}, "cache_control.ttl"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "scope": "global"}}
                        ],
                    }
                ]
            },
            "messages[0].content[0].cache_control.scope",
        ),
        ({"tools": [{**WEATHER, "cache_control": {}}]}, "tools[0].cache_control.type"),
    ],
)
def test_refusals_name_the_messages_field(client: TestClient, fields: dict, param: str) -> None:
    response = create(client, **fields)
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith(f"{param}:"), body


USE = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}


def _result(tool_use_id: str) -> dict:
    return {
        "role": "user",
        "content": [{"type": "text", "text": "so"}, {"type": "tool_result", "tool_use_id": tool_use_id}],
    }


@pytest.mark.parametrize(
    "messages",
    [
        [_result("toolu_1")],  # no assistant turn at all
        [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": [USE]}, _result("toolu_2")],
        # a call of an earlier assistant turn, not of the one right before
        [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": [USE]},
            _result("toolu_1"),
            {"role": "assistant", "content": "Anything else?"},
            _result("toolu_1"),
        ],
    ],
)
def test_a_tool_result_must_answer_a_call_of_the_turn_before(client: TestClient, messages: list[dict]) -> None:
    where = f"messages[{len(messages) - 1}].content[1].tool_use_id"
    for path, body in [
        ("/v1/messages", {"model": "fake", "max_tokens": 8, "messages": messages}),
        ("/v1/messages/count_tokens", {"model": "fake", "messages": messages}),
    ]:
        refused = client.post(path, json=body, headers=HEADERS)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["message"].startswith(f"{where}:"), refused.json()


def test_tool_results_answer_calls_of_consecutive_assistant_turns(client: TestClient) -> None:
    second = {**USE, "id": "toolu_2"}
    messages = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [USE]},
        {"role": "assistant", "content": [second]},
        _result("toolu_1"),
        _result("toolu_2"),  # consecutive user turns are one turn too
    ]
    assert create(client, messages=messages).status_code == 200
    counted = client.post("/v1/messages/count_tokens", json={"model": "fake", "messages": messages}, headers=HEADERS)
    assert counted.status_code == 200, counted.text


def test_cache_control_as_anthropic_documents_it_is_accepted(client: TestClient) -> None:
    ephemeral = {"type": "ephemeral", "ttl": "1h"}
    text = {"type": "text", "text": "one two three", "cache_control": {"type": "ephemeral"}}
    response = create(
        client,
        cache_control=ephemeral,
        system=[{"type": "text", "text": "Be brief.", "cache_control": ephemeral}],
        tools=[{**WEATHER, "cache_control": {"type": "ephemeral", "ttl": "5m"}}],
        messages=[{"role": "user", "content": [text]}],
    )
    assert response.status_code == 200, response.text


def test_thinking_needs_a_reasoning_parser() -> None:
    engine = FakeEngineClient(Graph(name="fake", model_path="/nonexistent"))
    with TestClient(Gate(fake_app(engine))) as client:
        refused = create(client, thinking={"type": "enabled", "budget_tokens": 1024})
        assert refused.status_code == 400 and refused.json()["error"]["message"].startswith("thinking:")
        assert create(client, thinking={"type": "disabled"}).status_code == 200


def test_count_tokens(client: TestClient) -> None:
    body = {"model": "fake", "messages": [{"role": "user", "content": "one two three"}]}
    counted = client.post("/v1/messages/count_tokens", json=body, headers=HEADERS)
    assert counted.status_code == 200 and counted.json() == {
        "input_tokens": create(client).json()["usage"]["input_tokens"]
    }


def test_engine_failure_mid_stream(client: TestClient, engine: FakeEngineClient) -> None:
    original = engine._dispatch

    def failing(message):
        events = message.events
        for index, event in enumerate(events):
            if isinstance(event, Finished):
                events[index] = msgspec.structs.replace(event, finish_reason="error", error="boom")
        original(message)

    engine._dispatch = failing
    events = stream(client)
    assert events[-1] == {"type": "error", "error": {"type": "api_error", "message": "boom"}}
    failed = create(client)
    assert failed.status_code == 500 and failed.json()["error"] == {"type": "api_error", "message": "boom"}


def test_the_gate_reads_the_key_from_x_api_key_or_bearer(client: TestClient) -> None:
    refused = client.post("/v1/messages", json={}, headers={"x-api-key": "wrong"})
    assert refused.status_code == 401 and refused.json()["type"] == "error"
    assert refused.json()["error"]["type"] == "authentication_error" and refused.headers["request-id"]
    wrong_method = client.get("/v1/messages", headers=HEADERS)  # Litestar's own error, in Anthropic's shape too
    assert wrong_method.status_code == 405 and wrong_method.json()["error"]["type"] == "invalid_request_error"
    # Other routes keep OpenAI's envelope, and take the key either way too.
    chat = {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}
    assert client.post("/v1/chat/completions", json=chat, headers={"x-api-key": "wrong"}).json()["error"]["code"] == (
        "invalid_api_key"
    )
    assert client.post("/v1/chat/completions", json=chat, headers={"x-api-key": KEY}).status_code == 200
    assert create(client).status_code == 200
    bearer = client.post(
        "/v1/messages",
        json={"model": "fake", "max_tokens": 4, "messages": chat["messages"]},
        headers={"Authorization": f"Bearer {KEY}"},
    )
    assert bearer.status_code == 200


def test_the_docs_table_names_every_request_field() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    table = docs.split("## Messages API (Anthropic)", 1)[1].split("\n## ", 1)[0]
    documented = {
        name.split(".")[0]
        for line in table.splitlines()
        if line.startswith("| `")
        for name in re.findall(r"`([^`]+)`", line.split("|")[1])
    }
    assert set(MessagesRequest.__struct_fields__) <= documented


# --- what coding agents send (issue 50): Claude Code 2.1.328's fields ------------------------------

# The shape of Claude Code's first request (captured from the real binary: `claude -p`), its texts
# shortened: system blocks with cache_control, a system message after the user's, adaptive thinking
# shown as omitted, a clear_thinking edit, effort, a user_id holding JSON, a deferred placeholder tool.
CLAUDE_CODE = {
    "model": "fake",
    "max_tokens": 32000,
    "stream": False,
    "thinking": {"type": "adaptive", "display": "omitted"},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "output_config": {"effort": "high"},
    "metadata": {"user_id": json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": "s1"})},
    "system": [
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.328.f86; cc_entrypoint=sdk-cli;"},
        {"type": "text", "text": "You are an agent.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Use the tools.", "cache_control": {"type": "ephemeral"}},
    ],
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<system-reminder>x</system-reminder>"},
                {"type": "text", "text": "Hi?"},
            ],
        },
        {
            "role": "system",
            "content": [{"type": "text", "text": "# Environment\nlinux", "cache_control": {"type": "ephemeral"}}],
        },
    ],
    "tools": [
        WEATHER,
        {
            "name": "DeferredToolPlaceholder",
            "description": "Reserved placeholder; never call this tool.",
            "input_schema": {"type": "object", "properties": {}},
            "defer_loading": True,
        },
    ],
}


def test_claude_code_request_is_answered(client: TestClient, engine: FakeEngineClient) -> None:
    response = client.post("/v1/messages", json=CLAUDE_CODE, headers=HEADERS)
    assert response.status_code == 200, response.text
    prompt = engine.submitted[-1].prompt
    roles = [(m["role"], m["content"]) for m in prompt.messages]
    assert roles[0][0] == "system" and roles[0][1].startswith("x-anthropic-billing-header")
    assert roles[1:] == [("user", roles[1][1]), ("system", "# Environment\nlinux")]  # not hoisted
    assert [tool["function"]["name"] for tool in prompt.tools] == ["get_weather"]  # the deferred one is not shown
    assert prompt.template_kwargs == {"enable_thinking": True, "reasoning_effort": "high"}
    assert "x-dropped-tools" not in response.headers
    # 32,000 is above the graph's max_tokens_limit: as many as fit (None), not a 400.
    assert engine.submitted[-1].params.max_new_tokens is None
    assert create(client, max_tokens=7) and engine.submitted[-1].params.max_new_tokens == 7


def test_a_system_message_stays_where_it_is_and_is_counted(client: TestClient, engine: FakeEngineClient) -> None:
    first = {"role": "user", "content": "one two"}
    environment = {"role": "system", "content": "three four five"}
    later = [{"role": "assistant", "content": "six"}, {"role": "user", "content": "seven"}]
    create(client, system="zero", messages=[first, environment, *later])
    sent = [(m["role"], m["content"]) for m in engine.submitted[-1].prompt.messages]
    assert sent == [
        ("system", "zero"),
        ("user", "one two"),
        ("system", "three four five"),
        *[(m["role"], m["content"]) for m in later],
    ]
    body = {"model": "fake", "system": "zero", "messages": [first, environment, *later]}
    counted = client.post("/v1/messages/count_tokens", json=body, headers=HEADERS).json()["input_tokens"]
    without = {**body, "messages": [first, *later]}
    assert counted == client.post("/v1/messages/count_tokens", json=without, headers=HEADERS).json()["input_tokens"] + 3


def test_tool_results_may_follow_a_system_message(client: TestClient) -> None:
    messages = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [USE]},
        {"role": "system", "content": "Reminder."},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Rain"}]},
    ]
    assert create(client, tools=[WEATHER], messages=messages).status_code == 200


def test_adaptive_thinking_thinks_only_where_the_model_can() -> None:
    engine = FakeEngineClient(Graph(name="fake", model_path="/nonexistent"))
    with TestClient(Gate(fake_app(engine))) as plain:
        for thinking in ({"type": "adaptive"}, {"type": "adaptive", "display": "omitted"}, {"type": "between_tools"}):
            response = create(plain, thinking=thinking, output_config={"effort": "max"})
            assert response.status_code == 200, response.text
            # No reasoning parser: no thinking, and effort has no effect (nothing reaches the template).
            assert engine.submitted[-1].prompt.template_kwargs == {}


@pytest.mark.parametrize(("effort", "sent"), [("low", "low"), ("high", "high"), ("xhigh", "high"), ("max", "high")])
def test_effort_is_the_templates_reasoning_effort(
    client: TestClient, engine: FakeEngineClient, effort: str, sent: str
) -> None:
    assert create(client, output_config={"effort": effort}).status_code == 200
    assert engine.submitted[-1].prompt.template_kwargs == {"reasoning_effort": sent}
    body = {"model": "fake", "messages": [{"role": "user", "content": "x"}], "output_config": {"effort": effort}}
    assert client.post("/v1/messages/count_tokens", json=body, headers=HEADERS).status_code == 200


def test_display_omitted_sends_thinking_without_its_text(client: TestClient, engine: FakeEngineClient) -> None:
    engine.script = "<think>Secret.</think>Paris."
    message = create(client, thinking={"type": "adaptive", "display": "omitted"}).json()
    assert [(b["type"], b.get("thinking", b.get("text"))) for b in message["content"]] == [
        ("thinking", ""),
        ("text", "Paris."),
    ]
    events = stream(client, thinking={"type": "adaptive", "display": "omitted"})
    deltas = [e["delta"]["type"] for e in events if e["type"] == "content_block_delta"]
    assert "thinking_delta" not in deltas and "signature_delta" in deltas
    shown = create(client, thinking={"type": "adaptive", "display": "summarized"}).json()
    assert shown["content"][0]["thinking"] == "Secret."


def _turn(thought: str, text: str) -> dict:
    return {
        "role": "assistant",
        "content": [{"type": "thinking", "thinking": thought, "signature": ""}, {"type": "text", "text": text}],
    }


@pytest.mark.parametrize(
    ("keep", "kept"),
    [
        ("all", ["A", "B"]),
        ({"type": "all"}, ["A", "B"]),
        ({"type": "thinking_turns", "value": 1}, [None, "B"]),
        (None, [None, "B"]),
        ({"type": "thinking_turns", "value": 0}, [None, None]),
    ],
)
def test_clear_thinking_keeps_the_last_turns_thinking(
    client: TestClient, engine: FakeEngineClient, keep: object, kept: list
) -> None:
    edit = {"type": "clear_thinking_20251015", **({"keep": keep} if keep is not None else {})}
    messages = [
        {"role": "user", "content": "a"},
        _turn("A", "a"),
        {"role": "user", "content": "b"},
        _turn("B", "b"),
        {"role": "user", "content": "c"},
    ]
    assert create(client, messages=messages, context_management={"edits": [edit]}).status_code == 200
    turns = [m for m in engine.submitted[-1].prompt.messages if m["role"] == "assistant"]
    assert [turn.get("reasoning_content") for turn in turns] == kept


def test_hosted_tools_are_not_offered_and_named_in_a_header(client: TestClient, engine: FakeEngineClient) -> None:
    tools = [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
        WEATHER,
        {"type": "bash_20250124", "name": "bash"},
    ]
    for streamed in (False, True):
        response = client.post(
            "/v1/messages", json={**CLAUDE_CODE, "tools": tools, "stream": streamed}, headers=HEADERS
        )
        assert response.status_code == 200, response.text
        assert response.headers["x-dropped-tools"] == "tools[0]=web_search_20250305, tools[2]=bash_20250124"
        assert [tool["function"]["name"] for tool in engine.submitted[-1].prompt.tools] == ["get_weather"]
    body = {"model": "fake", "messages": [{"role": "user", "content": "x"}], "tools": tools}
    assert client.post("/v1/messages/count_tokens", json=body, headers=HEADERS).status_code == 200


def test_fields_the_sdk_allows_are_accepted(client: TestClient) -> None:
    """Every field of the installed `anthropic` SDK's message and count params (and their blocks) that
    the appliance accepts without an effect."""
    tool = {
        **WEATHER,
        "eager_input_streaming": True,
        "input_examples": [{"city": "Oslo"}],
        "allowed_callers": ["direct"],
        "strict": True,
    }
    use = {**USE, "caller": {"type": "direct"}, "toolset_name": "t", "cache_control": {"type": "ephemeral"}}
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": "Rain",
        "toolset_name": "t",
        "cache_control": {"type": "ephemeral"},
    }
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
        "transformations": {"oversized_image": "downsize"},
    }
    messages = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
    ]
    extras = {
        "speed": "standard",
        "user_profile_id": "p",
        "workspace_id": "w",
        "service_tier": "auto",
        "inference_geo": "us",
        "diagnostics": {},
    }
    assert create(client, tools=[tool], messages=messages, **extras).status_code == 200
    body = {
        "model": "fake",
        "messages": messages,
        "tools": [tool],
        "speed": "fast",
        "user_profile_id": "p",
        "workspace_id": "w",
    }
    assert client.post("/v1/messages/count_tokens", json=body, headers=HEADERS).status_code == 200
    assert msgspec.convert(
        {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [image]}]}, MessagesRequest
    )
