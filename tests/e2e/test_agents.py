"""Agents: tools and structured output together, in the loops agent frameworks run (issue 29), on
demo-smol (SmolLM2-135M-Instruct, greedy) through the real client libraries: the OpenAI Agents SDK
(chat-completions and Responses models), instructor (TOOLS, TOOLS_STRICT, RESPONSES_TOOLS), Vercel's
AI SDK (Node), and the `openai` client with the exact requests of each item.

SmolLM2's chat template ignores `tools`, so every tool here reaches the model through the system
message the appliance writes (`service/tool_prompt.py`), in the hermes format its parser reads.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonschema
import openai
import pytest
from pydantic import BaseModel

from tests.conftest import RunningServer, copy_demo_graphs, running_server

MODEL = "demo-smol"
JS = Path(__file__).resolve().parents[1] / "js"
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": WEATHER_SCHEMA,
    },
}
# The weather tool once it has gained a required `days`: the calls of FEW_SHOT lack it.
WEATHER_WITH_DAYS = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather in a city for the next days.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
            "required": ["city", "days"],
            "additionalProperties": False,
        },
    },
}
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temperature_c": {"type": "integer"}},
    "required": ["city", "temperature_c"],
    "additionalProperties": False,
}
ANSWER_FORMAT = {"type": "json_schema", "json_schema": {"name": "Weather", "strict": True, "schema": ANSWER_SCHEMA}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
MARKUP = ("<tool_call", "</tool_call", "<|im_end|>", "<|im_start|>")


def _call(call_id: str, city: str) -> dict:
    function = {"name": "get_weather", "arguments": json.dumps({"city": city})}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


# Two earlier turns in which the assistant called the tool: the calls are written into the prompt in
# the parser's format (the template cannot render them), and the model follows the example.
FEW_SHOT = [
    {"role": "user", "content": "What is the weather in Oslo?"},
    _call("c1", "Oslo"),
    {"role": "tool", "tool_call_id": "c1", "content": "Cloudy, 8 degrees C."},
    {"role": "assistant", "content": "It is cloudy and 8 degrees C in Oslo."},
    {"role": "user", "content": "What is the weather in Rome?"},
    _call("c2", "Rome"),
    {"role": "tool", "tool_call_id": "c2", "content": "Sunny, 25 degrees C."},
    {"role": "assistant", "content": "It is sunny and 25 degrees C in Rome."},
    {"role": "user", "content": "What is the weather in Paris?"},
]


class Weather(BaseModel):
    city: str
    temperature_c: int


@pytest.fixture(scope="module")
def smol_server(smol_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    base = tmp_path_factory.mktemp("agents")
    graphs = base / "graphs"
    graphs.mkdir()
    copy_demo_graphs(smol_root, graphs, [MODEL])
    # Without prefix caching a greedy answer does not depend on which requests ran before (cached
    # blocks are computed in other chunks, and this model's choice between calling a tool again
    # and answering is a near tie that rounding can flip).
    graph = graphs / f"{MODEL}.toml"
    graph.write_text(graph.read_text().replace("enable_prefix_caching = true", "enable_prefix_caching = false"))
    assert "enable_prefix_caching = false" in graph.read_text()
    with running_server(graphs, base / "server.log") as running:
        yield running


@pytest.fixture(scope="module")
def client(smol_server: RunningServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{smol_server.url}/v1", api_key="unused", max_retries=0, timeout=120)


def _chat(client: openai.OpenAI, **fields: object):
    return client.chat.completions.create(model=MODEL, temperature=0, **fields)


def _streamed(client: openai.OpenAI, **fields: object) -> tuple[str, list[dict], str]:
    """(content, tool call deltas, finish reason) of a streamed chat completion."""
    content, calls, finish = "", [], ""
    for chunk in client.chat.completions.create(model=MODEL, temperature=0, stream=True, **fields):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            calls += [call.model_dump() for call in choice.delta.tool_calls or ()]
            finish = choice.finish_reason or finish
    return content, calls, finish


def streamed_answer(client: openai.OpenAI, **fields: object) -> tuple[str, dict[int, str], str]:
    """(content, each call's arguments by index, finish reason) of a streamed chat completion,
    every call named get_weather."""
    content, arguments, finish = "", {}, ""
    for chunk in client.chat.completions.create(stream=True, **fields):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for call in choice.delta.tool_calls or ():
                assert call.function.name in (None, "get_weather")
                arguments[call.index] = arguments.get(call.index, "") + (call.function.arguments or "")
            finish = choice.finish_reason or finish
    return content, arguments, finish


def _responses_both(client: openai.OpenAI, **fields: object) -> list:
    """The response of a Responses request sent streamed and not, each checked free of call
    markup (the streamed one in every output_text delta too); the two responses."""
    answer = client.responses.create(model=MODEL, temperature=0, **fields)
    _no_markup(answer.output_text)
    deltas, final = "", None
    for event in client.responses.create(model=MODEL, temperature=0, stream=True, **fields):
        if event.type == "response.output_text.delta":
            deltas += event.delta
        elif event.type in ("response.completed", "response.incomplete"):
            final = event.response
    assert final is not None
    _no_markup(deltas)
    assert deltas == final.output_text
    return [answer, final]


def _no_markup(text: str | None) -> None:
    assert not any(marker in (text or "") for marker in MARKUP), text


# --- the frameworks ------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_agents_sdk_agent_with_a_tool_and_an_output_type(smol_server: RunningServer, api: str) -> None:
    from agents import (
        Agent,
        ModelSettings,
        OpenAIChatCompletionsModel,
        OpenAIResponsesModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )

    set_tracing_disabled(True)
    sdk_client = openai.AsyncOpenAI(base_url=f"{smol_server.url}/v1", api_key="unused", max_retries=0, timeout=120)
    cities: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """Get the current weather in a city."""
        cities.append(city)
        return f"It is sunny and 21 degrees C in {city}."

    model_class = OpenAIChatCompletionsModel if api == "chat" else OpenAIResponsesModel
    agent = Agent(
        name="weather",
        instructions="Use the get_weather tool, then answer.",
        tools=[get_weather],
        output_type=Weather,
        model=model_class(model=MODEL, openai_client=sdk_client),
        # The first turn must call the tool; the SDK then resets tool_choice to auto, where the
        # answer is either more calls or the output type's JSON (one grammar, both branches).
        model_settings=ModelSettings(tool_choice="required", temperature=0, max_tokens=400),
    )
    result = asyncio.run(Runner.run(agent, "What is the weather in Paris?", max_turns=4))
    assert cities and set(cities) == {"Paris"}
    assert isinstance(result.final_output, Weather)
    assert result.final_output.model_dump() == {"city": "Paris", "temperature_c": 21}


@pytest.mark.parametrize("mode", ["TOOLS", "TOOLS_STRICT", "RESPONSES_TOOLS"])
def test_instructor_returns_a_validated_object(client: openai.OpenAI, mode: str) -> None:
    import instructor

    patched = instructor.from_openai(client, mode=getattr(instructor.Mode, mode))
    weather = patched.create(
        model=MODEL,
        response_model=Weather,
        messages=[{"role": "user", "content": "Paris is at 21 degrees C. Extract the city and temperature."}],
        temperature=0,
        max_tokens=200,
        max_retries=0,
    )
    assert isinstance(weather, Weather) and weather.model_dump() == {"city": "Paris", "temperature_c": 21}


def test_ai_sdk_tool_loop_and_object(smol_server: RunningServer) -> None:
    if shutil.which("node") is None or not (JS / "node_modules" / "ai").is_dir():
        pytest.skip("Node or tests/js/node_modules is missing (setup.sh runs npm ci there when npm is present)")
    run = subprocess.run(
        ["node", str(JS / "agent_loop.mjs"), f"{smol_server.url}/v1", MODEL],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["calls"] and set(result["calls"]) == {"Paris"}
    # A tool step, then a text answer (tool_choice none): the loop ran to completion.
    assert result["finishReasons"][0] == "tool-calls" and len(result["finishReasons"]) == 2
    assert result["text"].strip()
    assert result["object"] == {"city": "Paris", "temperature_c": 21}


def test_auto_calls_a_tool_the_template_never_showed(client: openai.OpenAI, smol_server: RunningServer) -> None:
    answer = _chat(client, messages=FEW_SHOT, tools=[WEATHER], max_tokens=60)
    (call,) = answer.choices[0].message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "Paris"})
    assert answer.choices[0].finish_reason == "tool_calls" and not answer.choices[0].message.content
    # What the model saw: the tool list and the call format in the system message, the earlier
    # calls in the parser's format; nothing of OpenVINO GenAI's own `{"tool_calls": [...]}` syntax.
    with_tools = httpx.post(
        f"{smol_server.url}/tokenize", json={"model": MODEL, "messages": ASK, "tools": [WEATHER]}, timeout=30
    ).json()
    without = httpx.post(f"{smol_server.url}/tokenize", json={"model": MODEL, "messages": ASK}, timeout=30).json()
    prompt = httpx.post(
        f"{smol_server.url}/detokenize", json={"model": MODEL, "tokens": with_tools["tokens"]}, timeout=30
    ).json()["prompt"]
    assert '"name": "get_weather"' in prompt and "<tool_call>" in prompt and '"tool_calls"' not in prompt
    print(
        f"tool list injection: {with_tools['count'] - without['count']} tokens ({without['count']} -> {with_tools['count']})"
    )


def test_auto_call_arguments_match_the_schema(client: openai.OpenAI) -> None:
    """tool_choice auto: each call the model starts is held to the tool's schema (issue 50). Before
    (measured on 2 EPYC cores), SmolLM2 copied the earlier calls' `{"city": "Paris"}`, which the
    schema refuses (`days` is required); now it adds `days` within its bounds."""
    schema = WEATHER_WITH_DAYS["function"]["parameters"]
    fields = {"model": MODEL, "messages": FEW_SHOT, "tools": [WEATHER_WITH_DAYS], "temperature": 0, "max_tokens": 100}
    answer = client.chat.completions.create(tool_choice="auto", **fields).choices[0]
    (call,) = answer.message.tool_calls
    assert call.function.name == "get_weather" and answer.finish_reason == "tool_calls"
    jsonschema.validate(json.loads(call.function.arguments), schema)
    assert json.loads(call.function.arguments)["city"] == "Paris"
    content, calls, finish = streamed_answer(client, tool_choice="auto", **fields)
    assert finish == "tool_calls" and list(calls.values()) == [call.function.arguments]
    _no_markup(content)


# --- items 1-4 and 6-8, with the exact requests -------------------------------------------------


def test_item1_a_forced_call_with_a_response_format(client: openai.OpenAI) -> None:
    for tool_choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        answer = _chat(
            client,
            messages=ASK,
            tools=[WEATHER],
            tool_choice=tool_choice,
            response_format=ANSWER_FORMAT,
            max_tokens=300,
        )
        assert answer.choices[0].message.tool_calls and answer.choices[0].finish_reason == "tool_calls"
        _no_markup(answer.choices[0].message.content)
        content, calls, finish = _streamed(
            client,
            messages=ASK,
            tools=[WEATHER],
            tool_choice=tool_choice,
            response_format=ANSWER_FORMAT,
            max_tokens=300,
        )
        assert calls and finish == "tool_calls"
        _no_markup(content)
    for response in _responses_both(
        client,
        input="What is the weather in Paris?",
        tools=[{"type": "function", **WEATHER["function"]}],
        tool_choice="required",
        text={"format": {"type": "json_schema", "name": "Weather", "schema": ANSWER_SCHEMA, "strict": True}},
        max_output_tokens=300,
    ):
        assert [item.type for item in response.output][:1] == ["function_call"]
        assert not response.output_text


def test_item2_auto_with_a_response_format_takes_either_branch(client: openai.OpenAI) -> None:
    # The system message, as agents write one: without it SmolLM2 on a CPU without AVX-512 (f32
    # inference, where AVX-512 machines compute in bf16) calls get_weather here instead.
    extract = [
        {
            "role": "system",
            "content": "Answer from the user's text when it holds the facts; call a tool only for facts you lack.",
        },
        {"role": "user", "content": "Paris is at 21 degrees C. Extract the city and temperature."},
    ]
    fields = {"tools": [WEATHER], "tool_choice": "auto", "response_format": ANSWER_FORMAT, "max_tokens": 100}
    # Given the facts, the model answers in the schema's JSON...
    answer = _chat(client, messages=extract, **fields)
    assert not answer.choices[0].message.tool_calls and answer.choices[0].finish_reason == "stop"
    assert json.loads(answer.choices[0].message.content) == {"city": "Paris", "temperature_c": 21}
    content, calls, finish = _streamed(client, messages=extract, **fields)
    assert not calls and json.loads(content) == {"city": "Paris", "temperature_c": 21}
    # ...asked for the weather, it calls the tool: one grammar admits both branches.
    called = _chat(client, messages=FEW_SHOT, **fields)
    assert called.choices[0].message.tool_calls and called.choices[0].finish_reason == "tool_calls"
    assert not called.choices[0].message.content
    content, calls, finish = _streamed(client, messages=FEW_SHOT, **fields)
    assert calls and finish == "tool_calls"
    _no_markup(content)
    text_format = {"format": {"type": "json_schema", "name": "Weather", "schema": ANSWER_SCHEMA, "strict": True}}
    tools = [{"type": "function", **WEATHER["function"]}]
    for response in _responses_both(client, input=extract, tools=tools, text=text_format, max_output_tokens=100):
        assert json.loads(response.output_text) == {"city": "Paris", "temperature_c": 21}
    for response in _responses_both(
        client, input="What is the weather in Paris?", tools=tools, text=text_format, max_output_tokens=300
    ):
        assert response.output and all(item.type == "function_call" for item in response.output)


def test_item3_a_named_tool_choice_yields_exactly_one_call(client: openai.OpenAI) -> None:
    named = {"type": "function", "function": {"name": "get_weather"}}
    answer = _chat(client, messages=ASK, tools=[WEATHER], tool_choice=named, max_tokens=300)
    assert len(answer.choices[0].message.tool_calls) == 1 and answer.choices[0].finish_reason == "tool_calls"
    _, calls, finish = _streamed(client, messages=ASK, tools=[WEATHER], tool_choice=named, max_tokens=300)
    assert len(calls) == 1 and finish == "tool_calls"
    # required with parallel calls: at most limits.max_parallel_tool_calls (8), the turn ends after one.
    many = _chat(client, messages=ASK, tools=[WEATHER], tool_choice="required", max_tokens=400)
    assert 1 <= len(many.choices[0].message.tool_calls) <= 8 and many.choices[0].finish_reason == "tool_calls"
    for response in _responses_both(
        client,
        input="What is the weather in Paris?",
        tools=[{"type": "function", **WEATHER["function"]}],
        tool_choice={"type": "function", "name": "get_weather"},
        max_output_tokens=300,
    ):
        assert [item.type for item in response.output] == ["function_call"] and response.status == "completed"


def test_item4_a_call_cut_by_max_tokens_leaves_no_markup(client: openai.OpenAI) -> None:
    # The first call takes ~20 tokens: 30 cut the second one in half.
    answer = _chat(client, messages=ASK, tools=[WEATHER], tool_choice="required", max_tokens=30)
    choice = answer.choices[0]
    assert choice.finish_reason == "length"
    assert len(choice.message.tool_calls or []) == 1
    _no_markup(choice.message.content)
    content, calls, finish = _streamed(client, messages=ASK, tools=[WEATHER], tool_choice="required", max_tokens=30)
    assert finish == "length" and len(calls) == 1
    _no_markup(content)
    for response in _responses_both(
        client,
        input="What is the weather in Paris?",
        tools=[{"type": "function", **WEATHER["function"]}],
        tool_choice="required",
        max_output_tokens=30,
    ):
        assert response.status == "incomplete"


def test_item6_real_tool_schemas_with_annotations(client: openai.OpenAI) -> None:
    annotated = {
        "type": "object",
        "strict": True,
        "$comment": "from an MCP server",
        "x-mcp-source": "weather",
        "properties": {
            "city": {"type": "string", "example": "Paris", "examples": ["Oslo"], "deprecated": False, "readOnly": True}
        },
        "required": ["city"],
        "additionalProperties": False,
    }
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": annotated}}
    answer = _chat(
        client, messages=ASK, tools=[tool], tool_choice="required", parallel_tool_calls=False, max_tokens=100
    )
    assert json.loads(answer.choices[0].message.tool_calls[0].function.arguments) == {"city": "Paris"}
    _, calls, _ = _streamed(
        client, messages=ASK, tools=[tool], tool_choice="required", parallel_tool_calls=False, max_tokens=100
    )
    assert len(calls) == 1
    response = client.responses.create(
        model=MODEL,
        input="What is the weather in Paris?",
        tools=[{"type": "function", "name": "get_weather", "parameters": annotated}],
        tool_choice="required",
        parallel_tool_calls=False,
        temperature=0,
        max_output_tokens=100,
    )
    assert json.loads(response.output[0].arguments) == {"city": "Paris"}
    # A keyword that would constrain the output but cannot be enforced is still refused, by name.
    refused = {**annotated, "properties": {"city": {"type": "string", "not": {"const": "Oslo"}}}}
    with pytest.raises(openai.BadRequestError) as info:
        _chat(
            client,
            messages=ASK,
            tools=[{"type": "function", "function": {"name": "f", "parameters": refused}}],
            tool_choice="required",
        )
    assert info.value.body["param"] == "tools[0].function.parameters.properties.city.not"


def test_item7_no_end_of_turn_token_after_a_forced_call(client: openai.OpenAI, smol_server: RunningServer) -> None:
    for tool_choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        content, calls, finish = _streamed(
            client, messages=ASK, tools=[WEATHER], tool_choice=tool_choice, max_tokens=300
        )
        assert calls and finish == "tool_calls" and content == ""
    body = {
        "model": MODEL,
        "input": "What is the weather in Paris?",
        "tools": [{"type": "function", **WEATHER["function"]}],
        "tool_choice": "required",
        "stream": True,
        "temperature": 0,
        "max_output_tokens": 300,
    }
    with httpx.stream("POST", f"{smol_server.url}/v1/responses", json=body, timeout=120) as stream:
        events = [json.loads(line[6:]) for line in stream.iter_lines() if line.startswith("data: ")]
    assert not [event for event in events if event["type"] == "response.output_text.delta"]
    final = events[-1]["response"]
    assert final["status"] == "completed" and {item["type"] for item in final["output"]} == {"function_call"}


def test_item8_namespace_tools(client: openai.OpenAI) -> None:
    namespace = {
        "type": "namespace",
        "name": "weather",
        "description": "Weather tools",
        "tools": [{"type": "function", **WEATHER["function"]}],
    }
    for stream in (False, True):
        response = client.responses.create(
            model=MODEL,
            input="What is the weather in Paris?",
            tools=[namespace],
            tool_choice="required",
            parallel_tool_calls=False,
            temperature=0,
            max_output_tokens=100,
            stream=stream,
        )
        if stream:
            response = [event for event in response if event.type == "response.completed"][0].response
        (call,) = response.output
        assert (call.type, call.name, call.namespace) == ("function_call", "get_weather", "weather")
