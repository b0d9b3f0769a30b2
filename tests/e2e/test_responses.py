"""The Responses API through the real `openai` SDK against the real server: create and the stream
helper agreeing under greedy decoding, a function-call round trip (stored and stateless), json_schema
output, an image on the vision demo, refusals, stored responses per API key; Hugging Face's
InferenceClient by a model alias; and the real demo model answering.

The demo-chat model's words are random: answers are checked for structure and for agreeing with
each other (greedy decoding makes two runs of one request equal), not for sense.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonschema
import openai
import pytest

from tests.conftest import RunningServer, copy_demo_graphs, running_server
from tests.images import data_url, encode, noise

MODEL = "demo-chat"
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 12},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}
TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather forecast", "parameters": WEATHER_SCHEMA}]
# A schema whose every answer is short: the grammar ends the answer, so the response completes.
CHOICE_SCHEMA = {
    "type": "object",
    "properties": {"city": {"enum": ["Oslo", "Paris", "Rome"]}, "rain": {"type": "boolean"}},
    "required": ["city", "rain"],
    "additionalProperties": False,
}
CHOICE_FORMAT = {"format": {"type": "json_schema", "name": "weather", "schema": CHOICE_SCHEMA}}


def without_ids(response) -> dict:
    """A response as JSON, without what differs between two runs of one request."""
    body = response.model_dump(mode="json", exclude={"id", "created_at", "completed_at"})
    for item in body["output"]:
        item.pop("id", None)
        item.pop("call_id", None)
        for part in item.get("content") or ():
            part.pop("parsed", None)
    return body


def test_create_and_stream_helper_agree_under_greedy(openai_client: openai.OpenAI) -> None:
    fields = dict(model=MODEL, input="Weather in Oslo?", text=CHOICE_FORMAT, max_output_tokens=64, temperature=0)
    created = openai_client.responses.create(**fields)
    assert created.status == "completed" and created.id.startswith("resp_")
    jsonschema.validate(json.loads(created.output_text), CHOICE_SCHEMA)
    with openai_client.responses.stream(**fields) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert without_ids(final) == without_ids(created)
    assert [event.sequence_number for event in events] == list(range(len(events)))
    kinds = [event.type for event in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    deltas = "".join(event.delta for event in events if event.type == "response.output_text.delta")
    assert deltas == created.output_text


def test_plain_text_cut_by_max_output_tokens(openai_client: openai.OpenAI) -> None:
    fields = dict(model=MODEL, input="Tell me a story", max_output_tokens=12, temperature=0)
    created = openai_client.responses.create(**fields)
    assert created.status == "incomplete" and created.incomplete_details.reason == "max_output_tokens"
    assert created.usage.output_tokens == 12 and created.usage.input_tokens > 0
    assert created.usage.total_tokens == created.usage.input_tokens + 12
    events = list(openai_client.responses.create(stream=True, **fields))
    assert events[-1].type == "response.incomplete"
    assert without_ids(events[-1].response) == without_ids(created)
    chat = openai_client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Tell me a story"}], max_tokens=12, temperature=0
    )
    assert created.output_text == chat.choices[0].message.content
    assert created.usage.input_tokens == chat.usage.prompt_tokens


def test_function_call_round_trip(openai_client: openai.OpenAI) -> None:
    first = openai_client.responses.create(
        model=MODEL,
        input="What is the weather in Oslo?",
        tools=TOOLS,
        tool_choice="required",
        parallel_tool_calls=False,
        max_output_tokens=200,
        temperature=0,
    )
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert call.name == "get_weather" and call.call_id and call.status == "completed"
    jsonschema.validate(json.loads(call.arguments), WEATHER_SCHEMA)
    result = {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 21 C"}
    stored = openai_client.responses.create(
        model=MODEL, previous_response_id=first.id, input=[result], tools=TOOLS, max_output_tokens=8, temperature=0
    )
    stateless = openai_client.responses.create(
        model=MODEL,
        input=[{"role": "user", "content": "What is the weather in Oslo?"}, *first.output, result],
        tools=TOOLS,
        max_output_tokens=8,
        temperature=0,
        store=False,
    )
    # The same conversation either way: the same prompt, the same greedy answer.
    assert stored.usage.input_tokens == stateless.usage.input_tokens > first.usage.input_tokens
    assert stored.output_text == stateless.output_text
    assert stored.previous_response_id == first.id


def test_streamed_function_call(openai_client: openai.OpenAI) -> None:
    with openai_client.responses.stream(
        model=MODEL,
        input="What is the weather in Oslo?",
        tools=TOOLS,
        tool_choice={"type": "function", "name": "get_weather"},
        parallel_tool_calls=False,
        max_output_tokens=200,
        temperature=0,
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    (call,) = [item for item in final.output if item.type == "function_call"]
    done = [event for event in events if event.type == "response.function_call_arguments.done"]
    assert [event.arguments for event in done] == [call.arguments]
    jsonschema.validate(json.loads(call.arguments), WEATHER_SCHEMA)


def test_a_deferred_function_is_not_shown_to_the_model(openai_client: openai.OpenAI) -> None:
    """`defer_loading` (the SDK's FunctionToolParam allows it): only a tool search would load the
    function, and `tool_search` is a hosted tool, not served: the model reads the request as if
    the function were not there (same input tokens), and the answer echoes the tools as sent."""
    deferred = {**TOOLS[0], "name": "get_forecast", "defer_loading": True}

    def ask(tools: list[dict]) -> openai.types.responses.Response:
        return openai_client.responses.create(
            model=MODEL, input="What is the weather in Oslo?", tools=tools, max_output_tokens=8, temperature=0
        )

    plain, with_deferred = ask(TOOLS), ask([*TOOLS, {"type": "tool_search"}, deferred])
    assert with_deferred.usage.input_tokens == plain.usage.input_tokens
    shown = ask([*TOOLS, {**deferred, "defer_loading": False}])  # the template does show tools
    assert shown.usage.input_tokens > plain.usage.input_tokens
    assert with_deferred.output_text == plain.output_text
    assert [tool.type for tool in with_deferred.tools] == ["function", "tool_search", "function"]
    assert with_deferred.tools[2].defer_loading is True


def test_json_schema_output(openai_client: openai.OpenAI) -> None:
    reply = openai_client.responses.create(
        model=MODEL,
        input="Weather in Oslo as JSON",
        text={"format": {"type": "json_schema", "name": "weather", "schema": WEATHER_SCHEMA, "strict": True}},
        max_output_tokens=100,
        temperature=0,
    )
    assert reply.status == "completed"
    jsonschema.validate(json.loads(reply.output_text), WEATHER_SCHEMA)
    assert reply.text.format.type == "json_schema"


def test_image_input_on_the_vision_demo(openai_client: openai.OpenAI) -> None:
    url = data_url(encode(noise(96, 64, seed=3)))
    content = [{"type": "input_text", "text": "What is in the picture?"}, {"type": "input_image", "image_url": url}]
    reply = openai_client.responses.create(
        model="demo-vision", input=[{"role": "user", "content": content}], max_output_tokens=12, temperature=0
    )
    chat = openai_client.chat.completions.create(
        model="demo-vision",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in the picture?"},
                    {"type": "image_url", "image_url": {"url": url}},
                ],
            }
        ],
        max_tokens=12,
        temperature=0,
    )
    assert reply.output_text == chat.choices[0].message.content
    assert reply.usage.input_tokens == chat.usage.prompt_tokens


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"tool_choice": {"type": "web_search_preview"}}, "tool_choice.type"),
        ({"input": [{"role": "user", "content": [{"type": "input_text", "text": "x"},
                                                 {"type": "input_image", "image_url": "data:image/png;base64,AA=="}]}]},
         "input[0].content[1]"),
        ({"previous_response_id": "resp_unknown"}, "previous_response_id"),
        ({"max_output_tokens": 5000}, "max_output_tokens"),
        ({"background": True}, "background"),
    ],
)  # fmt: skip
def test_refusals_name_the_field(openai_client: openai.OpenAI, fields: dict, param: str) -> None:
    fields = {"input": "hi", **fields}
    with pytest.raises(openai.BadRequestError) as info:
        openai_client.responses.create(model=MODEL, max_output_tokens=fields.pop("max_output_tokens", 4), **fields)
    assert info.value.param == param
    assert info.value.body["message"]


def test_stored_responses_belong_to_their_api_key(server: RunningServer, openai_client: openai.OpenAI) -> None:
    created = openai_client.responses.create(
        model=MODEL, input="hi", max_output_tokens=4, metadata={"ticket": "16"}, temperature=0
    )
    assert openai_client.responses.retrieve(created.id) == created
    other = openai.OpenAI(base_url=f"{server.url}/v1", api_key="someone-else", max_retries=0)
    with pytest.raises(openai.NotFoundError):
        other.responses.retrieve(created.id)
    with pytest.raises(openai.BadRequestError) as info:
        other.responses.create(model=MODEL, input="hi", previous_response_id=created.id, max_output_tokens=4)
    assert info.value.code == "previous_response_not_found"
    openai_client.responses.delete(created.id)
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.retrieve(created.id)
    unstored = openai_client.responses.create(model=MODEL, input="hi", max_output_tokens=4, store=False)
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.retrieve(unstored.id)


def test_leaving_a_stream_cancels_it(server: RunningServer) -> None:
    body = {"model": MODEL, "input": "hi", "max_output_tokens": 1000, "stream": True, "ignore_eos": True}
    with httpx.stream("POST", f"{server.url}/v1/responses", json=body, timeout=30) as response:
        lines = response.iter_lines()
        assert next(lines) == "event: response.created"
    status = server.wait_idle(MODEL)
    assert status["in_flight"] == 0 and status["running"] == 0
    metrics = httpx.get(f"{server.url}/metrics", timeout=5).text
    assert 'route="/v1/responses"' in metrics


@pytest.fixture(scope="module")
def aliased_server(demo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """demo-chat alone, answering to Hugging Face InferenceClient's placeholder names too."""
    base = tmp_path_factory.mktemp("aliased")
    graphs = copy_demo_graphs(demo_root, base, [MODEL])
    path = graphs / f"{MODEL}.toml"
    path.write_text(path.read_text().replace(f'name = "{MODEL}"\n', f'name = "{MODEL}"\naliases = ["tgi", "dummy"]\n'))
    with running_server(graphs, base / "server.log") as running:
        yield running


def test_hugging_face_inference_client(aliased_server: RunningServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import InferenceClient, constants

    # The suite runs with HF_HUB_OFFLINE=1 (no downloads), which the client also applies to every
    # request it makes; this one only talks to 127.0.0.1.
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

    messages = [{"role": "user", "content": "Hi"}]
    client = InferenceClient(base_url=f"{aliased_server.url}/v1")  # sends model "dummy"
    reply = client.chat_completion(messages, max_tokens=8, temperature=0)
    assert reply.choices[0].message.content and reply.usage.completion_tokens == 8
    streamed = "".join(
        chunk.choices[0].delta.content or ""
        for chunk in client.chat_completion(messages, max_tokens=8, temperature=0, stream=True)
        if chunk.choices
    )
    assert streamed == reply.choices[0].message.content
    shaped = client.chat_completion(
        messages,
        max_tokens=64,
        temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "weather", "schema": CHOICE_SCHEMA}},
    )
    jsonschema.validate(json.loads(shaped.choices[0].message.content), CHOICE_SCHEMA)
    named = InferenceClient(base_url=f"{aliased_server.url}/v1").chat_completion(messages, model=MODEL, max_tokens=4)
    assert named.model == MODEL


@pytest.fixture(scope="module")
def smol_server(smol_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    base = tmp_path_factory.mktemp("smol-responses")
    with running_server(copy_demo_graphs(smol_root, base, ["demo-smol"]), base / "server.log") as running:
        yield running


def test_the_real_model_answers_and_remembers(smol_server: RunningServer) -> None:
    client = openai.OpenAI(base_url=f"{smol_server.url}/v1", api_key="unused", max_retries=0, timeout=120)
    fields = dict(model="demo-smol", input="What is the capital of France?", max_output_tokens=64, temperature=0)
    first = client.responses.create(**fields)
    assert first.status == "completed" and "Paris" in first.output_text
    with client.responses.stream(**fields) as stream:
        assert stream.get_final_response().output_text == first.output_text
    follow = client.responses.create(
        model="demo-smol", previous_response_id=first.id, input="And of Germany?", max_output_tokens=64, temperature=0
    )
    assert "Berlin" in follow.output_text
