"""The Responses API at the HTTP layer, against the in-process fake engine: shapes checked against
the `openai` SDK's own types, the event sequence, tools, reasoning, the chat plan's errors named in
Responses terms, refusals, and stored responses."""

from __future__ import annotations

import json

import msgspec
import pytest
from litestar.testing import TestClient
from openai.types.responses import Response as SdkResponse
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from appliance.api.gate import Gate
from appliance.engine.messages import Finished
from appliance.graphfiles import Graph, Limits
from tests.apps import app_client, fake_app
from tests.fakes import FakeEngineClient

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
SDK_EVENT = TypeAdapter(ResponseStreamEvent)


@pytest.fixture
def engine() -> FakeEngineClient:
    graph = Graph(name="fake", model_path="/nonexistent", tool_parser="hermes", reasoning_parser="think")
    return FakeEngineClient(graph)


@pytest.fixture
def client(engine: FakeEngineClient):
    # Behind the gate, which reads the API key a stored response belongs to.
    with TestClient(Gate(fake_app(engine))) as test_client:
        yield test_client


def create(client: TestClient, key: str = "k1", **fields):
    body = {"model": "fake", "input": "one two three", **fields}
    return client.post("/v1/responses", json=body, headers={"Authorization": f"Bearer {key}"})


def stream(client: TestClient, **fields) -> list[dict]:
    response = create(client, stream=True, **fields)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = []
    for block in response.text.split("\n\n"):
        if not block:
            continue
        name, data = block.split("\n")
        event = json.loads(data.removeprefix("data: "))
        assert name == f"event: {event['type']}"
        SDK_EVENT.validate_python(event)
        events.append(event)
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    return events


def comparable(response: dict) -> dict:
    """A response without what differs between two runs (ids, times)."""
    output = [{key: value for key, value in item.items() if key != "id"} for item in response["output"]]
    skip = ("id", "created_at", "completed_at")
    return {**{key: value for key, value in response.items() if key not in skip}, "output": output}


def test_text_response_shape(client: TestClient) -> None:
    response = create(client, max_output_tokens=8, metadata={"ticket": "42"}, instructions="Be brief.")
    assert response.status_code == 200, response.text
    body = response.json()
    SdkResponse.model_validate(body)
    assert body["id"].startswith("resp_") and body["object"] == "response" and body["status"] == "completed"
    (message,) = body["output"]
    assert message["type"] == "message" and message["id"].startswith("msg_") and message["status"] == "completed"
    assert message["content"] == [{"type": "output_text", "text": " three two one", "annotations": [], "logprobs": []}]
    assert body["usage"]["input_tokens"] == 3 and body["usage"]["output_tokens"] == 3
    assert body["usage"]["total_tokens"] == 6
    assert (body["metadata"], body["instructions"], body["max_output_tokens"]) == ({"ticket": "42"}, "Be brief.", 8)


def test_stream_events_add_up_to_the_response(client: TestClient) -> None:
    events = stream(client)
    types = [event["type"] for event in events]
    # Deltas that waited for the stream come merged (the fake engine sends them at once): one or more.
    assert [
        kind
        for position, kind in enumerate(types)
        if kind != "response.output_text.delta" or types[position - 1] != kind
    ] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert "".join(event["delta"] for event in events if event["type"].endswith(".delta")) == " three two one"
    assert comparable(events[-1]["response"]) == comparable(create(client).json())


def test_max_output_tokens_makes_it_incomplete(client: TestClient) -> None:
    body = create(client, max_output_tokens=2).json()
    assert body["status"] == "incomplete"
    assert body["incomplete_details"] == {"reason": "max_output_tokens"}
    assert body["output"][0]["status"] == "incomplete"
    assert stream(client, max_output_tokens=2)[-1]["type"] == "response.incomplete"


def test_function_call_items(client: TestClient, engine: FakeEngineClient) -> None:
    engine.script = f"Let me check. {CALL}"
    body = create(client, tools=[WEATHER], max_output_tokens=100).json()
    SdkResponse.model_validate(body)
    message, call = body["output"]
    assert message["content"][0]["text"] == "Let me check. "
    assert call["type"] == "function_call" and call["id"].startswith("fc_") and call["call_id"].startswith("call")
    assert (call["name"], json.loads(call["arguments"]), call["status"]) == (
        "get_weather",
        {"city": "Oslo"},
        "completed",
    )
    assert body["tools"] == [WEATHER]
    events = stream(client, tools=[WEATHER], max_output_tokens=100)
    arguments = [event for event in events if event["type"] == "response.function_call_arguments.done"]
    assert json.loads(arguments[0]["arguments"]) == {"city": "Oslo"} and arguments[0]["name"] == "get_weather"


def test_namespace_tools_are_functions_whose_calls_carry_the_namespace(
    client: TestClient, engine: FakeEngineClient
) -> None:
    engine.script = CALL
    namespace = {"type": "namespace", "name": "weather", "description": "Weather tools", "tools": [WEATHER]}
    body = create(client, tools=[namespace], max_output_tokens=100).json()
    SdkResponse.model_validate(body)
    (call,) = body["output"]
    assert (call["name"], call["namespace"]) == ("get_weather", "weather")
    assert engine.submitted[-1].prompt.tools[0]["function"]["name"] == "get_weather"
    events = stream(client, tools=[namespace], max_output_tokens=100)
    done = [event for event in events if event["type"] == "response.output_item.done"]
    assert done[0]["item"]["namespace"] == "weather"
    # Plain function tools carry no namespace; a custom tool inside a namespace is refused as what it is.
    assert "namespace" not in create(client, tools=[WEATHER], max_output_tokens=100).json()["output"][0]
    custom = {**namespace, "tools": [{"type": "custom", "name": "x"}]}
    refused = create(client, tools=[custom]).json()["error"]
    assert refused["param"] == "tools[0].tools[0].type" and "'custom'" in refused["message"]
    twice = create(client, tools=[WEATHER, namespace]).json()["error"]
    assert twice["param"] == "tools[1].tools[0].name"


def test_function_call_output_goes_back_as_a_tool_message(client: TestClient, engine: FakeEngineClient) -> None:
    items = [
        {"role": "user", "content": "Weather in Oslo?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "Sunny"},
    ]
    assert create(client, input=items, tools=[WEATHER], instructions="Be brief.").status_code == 200
    messages = engine.submitted[-1].prompt.messages
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assert messages[2]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": {"city": "Oslo"}}
    assert messages[3] == {"role": "tool", "content": "Sunny", "tool_call_id": "call_1"}


def test_an_earlier_answer_sent_back_is_one_assistant_turn(client: TestClient, engine: FakeEngineClient) -> None:
    engine.script = f"<think>Hm.</think>Checking. {CALL}"
    first = create(client, tools=[WEATHER], max_output_tokens=100).json()
    assert [item["type"] for item in first["output"]] == ["reasoning", "message", "function_call"]
    items = [{"role": "user", "content": "one two three"}, *first["output"]]
    items.append({"type": "function_call_output", "call_id": first["output"][2]["call_id"], "output": "Sunny"})
    assert create(client, input=items, tools=[WEATHER]).status_code == 200
    assistant = engine.submitted[-1].prompt.messages[1]
    assert (assistant["content"], assistant["reasoning_content"]) == ("Checking. ", "Hm.")
    assert assistant["tool_calls"][0]["id"] == first["output"][2]["call_id"]


def test_reasoning_item(client: TestClient, engine: FakeEngineClient) -> None:
    engine.script = "<think>Let me think.</think>\n\nThe answer."
    body = create(client).json()
    reasoning, message = body["output"]
    assert reasoning["type"] == "reasoning" and reasoning["id"].startswith("rs_")
    assert reasoning["content"] == [{"type": "reasoning_text", "text": "Let me think."}]
    assert message["content"][0]["text"] == "The answer."
    kinds = [event["type"] for event in stream(client)]
    assert kinds.index("response.reasoning_text.done") < kinds.index("response.output_text.delta")


def test_options_reach_the_chat_plan(client: TestClient, engine: FakeEngineClient) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    response = create(
        client,
        temperature=0.5,
        top_p=0.9,
        max_output_tokens=7,
        text={"format": {"type": "json_schema", "name": "a", "schema": schema}},
        reasoning={"effort": "low", "summary": "auto"},
        seed=3,
        top_k=5,
        stop=["x"],
    )
    assert response.status_code == 200, response.text
    submitted = engine.submitted[-1]
    params = submitted.params
    assert (params.temperature, params.top_p, params.max_new_tokens, params.seed, params.top_k) == (0.5, 0.9, 7, 3, 5)
    assert params.stop == ("x",) and params.grammar is not None
    assert submitted.prompt.template_kwargs == {"reasoning_effort": "low"}


def test_logprobs_with_include(client: TestClient) -> None:
    body = create(client, include=["message.output_text.logprobs"]).json()
    assert body["output"][0]["content"][0]["logprobs"] is not None


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "data:,", "detail": "auto"}]}]},
         "input[0].content[0]"),
        ({"max_output_tokens": 100000}, "max_output_tokens"),
        ({"text": {"format": {"type": "json_schema", "name": "a", "schema": {"type": "object", "properties": {"a": {"type": "string", "minLength": 5, "maxLength": 2}}}}}},
         "text.format.schema.properties.a"),
        ({"tools": [{**WEATHER, "parameters": {"type": "object", "properties": {"c": {"pattern": "(a?)*"}}}}],
          "tool_choice": "required"}, "tools[0].parameters.properties.c.pattern"),
        ({"tool_choice": {"type": "function", "name": "nope"}, "tools": [WEATHER]}, "tool_choice.name"),
        ({"input": [{"role": "user", "content": "x"}, {"type": "function_call", "call_id": "c", "name": "f",
                                                     "arguments": "[1]"}]}, "input[1].arguments"),
        ({"input": [{"role": "wizard", "content": "x"}]}, "input[0].role"),
        ({"temperature": 3}, "temperature"),
        ({"top_logprobs": 2}, "top_logprobs"),
    ],
)  # fmt: skip
def test_chat_plan_errors_name_the_responses_field(client: TestClient, fields: dict, param: str) -> None:
    response = create(client, **fields)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


def test_chat_plan_error_texts_name_the_responses_field() -> None:
    """The chat plan writes a field's name in its message with the dialect's names: nothing renames
    the text afterwards."""
    graph = Graph(name="fake", model_path="/nonexistent", limits=Limits(max_tokens_limit=50))
    with app_client(FakeEngineClient(graph)) as client:
        above = create(client, max_output_tokens=60).json()["error"]
        below = create(client, max_output_tokens=40, min_tokens=45).json()["error"]
    assert above["message"] == "max_output_tokens is 60, above this model's limit of 50."
    assert (below["param"], below["message"]) == ("min_tokens", "min_tokens (45) is above max_output_tokens (40).")


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"tools": [{"type": "namespace", "name": "n", "tools": [{"type": "web_search"}]}]}, "tools[0].tools[0].type"),
        ({"tool_choice": {"type": "web_search_preview"}}, "tool_choice.type"),
        ({"input": [{"type": "web_search_call", "id": "ws", "status": "completed"}]}, "input[0].type"),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0]"),
        ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}, "input[0].content[0]"),
        ({"background": True}, "background"),
        ({"conversation": "conv_1"}, "conversation"),
        ({"truncation": "auto"}, "truncation"),
        ({"prompt": {"id": "pmpt_1"}}, "prompt"),
        ({"text": {"verbosity": "low"}}, "text.verbosity"),
        ({"reasoning": {"mode": "pro"}}, "reasoning.mode"),
        ({"context_management": [{"type": "compaction"}]}, "context_management"),
    ],
)
def test_refused_with_a_reason(client: TestClient, fields: dict, param: str) -> None:
    error = create(client, **fields).json()["error"]
    assert (error["param"], error["code"]) == (param, "unsupported_parameter"), error


def test_informative_fields_are_accepted(client: TestClient) -> None:
    plain = create(client).json()
    informed = create(
        client,
        service_tier="auto",
        prompt_cache_key="k",
        prompt_cache_retention="24h",
        safety_identifier="u",
        max_tool_calls=3,
        background=False,
        truncation="disabled",
        include=["reasoning.encrypted_content"],
        text={"format": {"type": "text"}, "verbosity": "medium"},
        user="someone",
        client_metadata={"root_turn_id": "t1", "x-codex-turn-metadata": "{}"},
        reasoning={"summary": "auto"},
        store=False,
    )
    assert informed.status_code == 200, informed.text
    assert informed.json()["output"][0]["content"] == plain["output"][0]["content"]


def test_unknown_fields_keep_their_400(client: TestClient) -> None:
    assert create(client, inputs="x").json()["error"]["code"] == "unknown_parameter"


def test_stored_responses_per_api_key(client: TestClient, engine: FakeEngineClient) -> None:
    first = create(client, key="alice").json()
    headers = {"Authorization": "Bearer alice"}
    assert client.get(f"/v1/responses/{first['id']}", headers=headers).json() == first
    assert client.get(f"/v3/responses/{first['id']}", headers={"Authorization": "Bearer bob"}).status_code == 404
    follow = create(client, key="alice", input="four five", previous_response_id=first["id"]).json()
    assert follow["previous_response_id"] == first["id"]
    messages = engine.submitted[-1].prompt.messages
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "one two three"),
        ("assistant", " three two one"),
        ("user", "four five"),
    ]
    refused = create(client, key="bob", input="x", previous_response_id=first["id"]).json()["error"]
    assert (refused["param"], refused["code"]) == ("previous_response_id", "previous_response_not_found")
    deleted = client.delete(f"/v1/responses/{first['id']}", headers=headers)
    assert deleted.json() == {"id": first["id"], "object": "response.deleted", "deleted": True}
    assert client.get(f"/v1/responses/{first['id']}", headers=headers).status_code == 404
    unstored = create(client, key="alice", store=False).json()
    assert unstored["store"] is False
    assert client.get(f"/v1/responses/{unstored['id']}", headers=headers).status_code == 404


def test_stored_stream(client: TestClient) -> None:
    final = stream(client)[-1]["response"]
    assert client.get(f"/v1/responses/{final['id']}", headers={"Authorization": "Bearer k1"}).json() == final


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
    assert [event["type"] for event in events][-2:] == ["error", "response.failed"]
    assert events[-1]["response"]["status"] == "failed"
    assert events[-1]["response"]["error"] == {"code": "server_error", "message": "boom"}
    failed = create(client)
    assert failed.status_code == 500 and failed.json()["error"]["message"] == "boom"


def test_vision_graph_takes_input_images() -> None:
    graph = Graph(name="fake", model_path="/nonexistent", pipeline="VLM_CB", limits=Limits())
    engine = FakeEngineClient(graph)
    pixel = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    content = [{"type": "input_text", "text": "what"}, {"type": "input_image", "image_url": pixel, "detail": "low"}]
    with app_client(engine) as test_client:
        response = test_client.post(
            "/v1/responses", json={"model": "fake", "input": [{"role": "user", "content": content}]}
        )
    assert response.status_code == 200, response.text
    assert len(engine.submitted[-1].prompt.images) == 1


# --- what coding agents send (issue 50): Codex 0.169.0's request -----------------------------------

# The shape of Codex's first request (captured from the real binary: `codex exec`), its texts shortened:
# two developer messages then two user messages, function tools, a namespace, web_search, include,
# prompt_cache_key, client_metadata, reasoning.summary, store false.
CODEX = {
    "model": "fake",
    "instructions": None,
    "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "<permissions>"}, {"type": "input_text", "text": "x"}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Capital of France?"}]},
    ],
    "tools": [
        {**WEATHER, "strict": False},
        {
            "type": "namespace",
            "name": "multi_agent_v1",
            "description": "Tools for sub-agents.",
            "tools": [{**WEATHER, "name": "close_agent", "strict": False}],
        },
        {"type": "web_search", "external_web_access": False},
    ],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "reasoning": {"summary": "auto"},
    "store": False,
    "stream": True,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "01a22758-9e0a-77b3-8e03-109adcec066a",
    "client_metadata": {"root_turn_id": "t1", "x-codex-turn-metadata": json.dumps({"session_id": "s"})},
}


def test_codex_request_is_answered(client: TestClient, engine: FakeEngineClient) -> None:
    body = {key: value for key, value in CODEX.items() if value is not None}
    response = client.post("/v1/responses", json=body, headers={"Authorization": "Bearer k1"})
    assert response.status_code == 200, response.text
    assert response.headers["x-dropped-tools"] == "tools[2]=web_search"
    prompt = engine.submitted[-1].prompt
    # Developer messages reach chat templates as system messages (no template here knows "developer").
    assert [m["role"] for m in prompt.messages] == ["system", "system", "user", "user"]
    assert [tool["function"]["name"] for tool in prompt.tools] == ["get_weather", "close_agent"]
    events = [
        json.loads(line.removeprefix("data: ")) for line in response.text.splitlines() if line.startswith("data: ")
    ]
    assert events[-1]["type"] == "response.completed"
    assert events[-1]["response"]["tools"][2] == {"type": "web_search", "external_web_access": False}  # echoed as sent


def test_hosted_tools_are_not_offered_and_named_in_a_header(client: TestClient, engine: FakeEngineClient) -> None:
    tools = [{"type": "web_search"}, WEATHER, {"type": "file_search", "vector_store_ids": ["v"]}]
    response = create(client, tools=tools)
    assert response.status_code == 200, response.text
    assert response.headers["x-dropped-tools"] == "tools[0]=web_search, tools[2]=file_search"
    assert [tool["function"]["name"] for tool in engine.submitted[-1].prompt.tools] == ["get_weather"]
    assert response.json()["tools"] == [{"type": "web_search"}, WEATHER, tools[2]]
    # allowed_tools may list them: they are skipped as they are in `tools`.
    allowed = {
        "type": "allowed_tools",
        "mode": "auto",
        "tools": [{"type": "web_search"}, {"type": "function", "name": "get_weather"}],
    }
    assert create(client, tools=tools, tool_choice=allowed).status_code == 200
    assert "x-dropped-tools" not in create(client, tools=[WEATHER]).headers


def test_errors_name_tools_as_the_request_does_after_hosted_ones(client: TestClient) -> None:
    bad = {**WEATHER, "name": "bad name"}
    decoded = create(client, tools=[{"type": "web_search"}, WEATHER, bad]).json()["error"]
    assert decoded["param"] == "tools[2].name" and "'tools[2].name'" in decoded["message"], decoded
    planned = create(client, tools=[{"type": "web_search"}, WEATHER, WEATHER]).json()["error"]
    assert planned["param"] == "tools[2].name", planned


def test_many_hosted_tools_make_a_bounded_header(client: TestClient) -> None:
    tools = [{"type": f"web_search\r\nx-evil: {n}"} for n in range(40)]
    header = create(client, tools=tools).headers["x-dropped-tools"]
    assert header.endswith("and 24 more") and "\n" not in header and header.count("tools[") == 16
