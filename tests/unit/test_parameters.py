"""The OpenAI parameter surface at the HTTP layer, against the in-process fake engine: what reaches
the engine, what is refused (400 naming the parameter), and the response shapes for n, tools,
reasoning and logprobs."""

from __future__ import annotations

import json

import msgspec
import pytest
from litestar.testing import TestClient

from appliance.engine.messages import Delta, Finished, TokenLogprob
from appliance.graphfiles import Graph, Limits
from tests.apps import USER, app_client, chat
from tests.fakes import FakeEngineClient

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def graph(**fields) -> Graph:
    return Graph(name="fake", model_path="/nonexistent", limits=Limits(best_of_limit=4), **fields)


@pytest.fixture
def engine() -> FakeEngineClient:
    return FakeEngineClient(graph(tool_parser="hermes", reasoning_parser="think"))


@pytest.fixture
def client(engine: FakeEngineClient):
    with app_client(engine) as test_client:
        yield test_client


def events(response) -> list[dict]:
    blocks = [block.removeprefix("data: ") for block in response.text.split("\n\n") if block]
    assert blocks[-1] == "[DONE]"
    return [json.loads(block) for block in blocks[:-1]]


def test_every_sampling_parameter_reaches_the_engine(client: TestClient, engine: FakeEngineClient) -> None:
    response = chat(
        client,
        max_completion_tokens=9,
        temperature=0.7,
        top_p=0.9,
        seed=5,
        frequency_penalty=0.5,
        presence_penalty=-0.5,
        stop=["x", "y"],
        n=2,
        top_k=20,
        min_p=0.1,
        repetition_penalty=1.2,
        min_tokens=3,
        stop_token_ids=[7, 8],
        ignore_eos=True,
        skip_special_tokens=False,
        logprobs=True,
        top_logprobs=0,
    )
    assert response.status_code == 200, response.text
    params = engine.submitted[-1].params
    assert (params.max_new_tokens, params.temperature, params.top_p, params.seed) == (9, 0.7, 0.9, 5)
    assert (params.frequency_penalty, params.presence_penalty, params.repetition_penalty) == (0.5, -0.5, 1.2)
    assert (params.top_k, params.min_p, params.min_new_tokens, params.n, params.best_of) == (20, 0.1, 3, 2, 1)
    assert params.stop == ("x", "y") and params.stop_token_ids == (7, 8)
    assert params.ignore_eos and not params.skip_special_tokens and params.logprobs
    assert params.include_stop_str_in_output is False and params.grammar is None


def test_beam_search_parameters(client: TestClient, engine: FakeEngineClient) -> None:
    assert chat(client, n=2, best_of=3, length_penalty=0.5, temperature=0).status_code == 200
    params = engine.submitted[-1].params
    assert (params.n, params.best_of, params.length_penalty) == (2, 3, 0.5)


def test_include_stop_str_defaults_follow_ovms(client: TestClient, engine: FakeEngineClient) -> None:
    chat(client, stop="x")
    assert engine.submitted[-1].params.include_stop_str_in_output is False
    chat(client, stop="x", stream=True)
    assert engine.submitted[-1].params.include_stop_str_in_output is True
    chat(client, stop="x", include_stop_str_in_output=True)
    assert engine.submitted[-1].params.include_stop_str_in_output is True


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"n": 5}, "n"),
        ({"best_of": 5}, "best_of"),
        ({"n": 3, "best_of": 2}, "best_of"),
        ({"n": 2, "temperature": 0}, "n"),
        ({"best_of": 2, "temperature": 0.5}, "temperature"),
        ({"best_of": 2, "seed": 1}, "seed"),
        ({"length_penalty": 2.0}, "length_penalty"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"stop": "x" * 257}, "stop"),
        ({"stop": ["a", "x" * 257]}, "stop"),
        ({"stream": True, "include_stop_str_in_output": False}, "include_stop_str_in_output"),
        ({"min_tokens": 10, "max_tokens": 5}, "min_tokens"),
        ({"logit_bias": {"42": 10}}, "logit_bias"),
        ({"top_logprobs": 2, "logprobs": True}, "top_logprobs"),
        ({"top_logprobs": 0}, "top_logprobs"),
        ({"temperature": 2.5}, "temperature"),
        ({"top_p": 1.5}, "top_p"),
        ({"presence_penalty": -3}, "presence_penalty"),
        ({"frequency_penalty": 2.1}, "frequency_penalty"),
        ({"top_k": -5}, "top_k"),
        ({"min_p": 1.5}, "min_p"),
        ({"repetition_penalty": 0}, "repetition_penalty"),
        ({"seed": "1"}, "seed"),
        ({"stop_token_ids": [-1]}, "stop_token_ids[0]"),
        ({"tool_choice": "required"}, "tool_choice"),
        (
            {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "tool_choice.function.name",
        ),
        ({"tools": [WEATHER, WEATHER]}, "tools"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "bogus"}}}},
            "response_format.json_schema.schema.type",
        ),
        ({"response_format": {"type": "xml"}}, "response_format.type"),
        ({"structured_outputs": {"regex": "(a"}}, "structured_outputs.regex"),
        ({"structured_outputs": {"grammar": "root ::= missing"}}, "structured_outputs.grammar"),
        ({"structured_outputs": {"regex": "a", "choice": ["a"]}}, "structured_outputs"),
        ({"structured_outputs": {"regex": "a"}, "response_format": {"type": "json_object"}}, "structured_outputs"),
        ({"chat_template_kwargs": {"messages": []}}, "chat_template_kwargs.messages"),
        ({"continue_final_message": True}, "continue_final_message"),
        ({"functions": [{"name": "f"}]}, "functions"),
    ],
)
def test_refused_parameters_are_400_naming_them(client: TestClient, fields: dict, param: str) -> None:
    response = chat(client, **fields)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


def test_a_template_that_ignores_tools_gets_them_in_the_system_message() -> None:
    from appliance.engine.host.templates import ToolFormat
    from appliance.service.tool_prompt import TOOLS_INTRO

    engine = FakeEngineClient(graph())  # no tool_parser in the graph file: the generic format

    def generic_tools() -> None:
        engine.tools = ToolFormat("hermes", from_template=False, calls_from_template=False, source="generic")

    earlier_call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}  # fmt: skip
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "tool_calls": [earlier_call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
    ]
    with app_client(engine, on_start=generic_tools) as client:
        assert chat(client, tools=[WEATHER], messages=messages).status_code == 200
        prompt = engine.submitted[-1].prompt
        assert prompt.tools is None  # not handed to the template (nor to OpenVINO GenAI's fallback)
        system = prompt.messages[0]["content"]
        assert system.startswith("Be brief.\n\n" + TOOLS_INTRO) and '"name": "get_weather"' in system
        assert '<tool_call>\n{"name": "tool_name", "arguments": {"argument": "value"}}\n</tool_call>' in system
        assert (
            prompt.messages[2]["content"]
            == '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
        )
        assert "tool_calls" not in prompt.messages[2]
        assert prompt.messages[3] == {"role": "tool", "content": "Sunny"}
        # The same prompt for /tokenize; tool_choice none shows no tools.
        tokenized = client.post("/tokenize", json={"model": "fake", "messages": messages, "tools": [WEATHER]})
        assert tokenized.status_code == 200
        assert engine.asked[-1].prompt.messages == prompt.messages
        assert chat(client, tools=[WEATHER], tool_choice="none").status_code == 200
        assert engine.submitted[-1].prompt.messages[0]["role"] == "user"


def test_n_choices_non_stream_and_stream(client: TestClient) -> None:
    body = chat(client, n=3, seed=1).json()
    assert [choice["index"] for choice in body["choices"]] == [0, 1, 2]
    assert body["usage"] == {"completion_tokens": 9, "prompt_tokens": 3, "total_tokens": 12}
    chunks = events(chat(client, n=3, stream=True, stream_options={"include_usage": True}))
    texts: dict[int, str] = {}
    finished = set()
    for chunk in chunks[:-1]:
        for choice in chunk["choices"]:
            texts[choice["index"]] = texts.get(choice["index"], "") + choice["delta"].get("content", "")
            if choice["finish_reason"]:
                finished.add(choice["index"])
    assert texts == {0: " three two one", 1: " three two one", 2: " three two one"}
    assert finished == {0, 1, 2}
    assert chunks[-1]["usage"]["completion_tokens"] == 9


def test_tool_calls_are_parsed_streamed_and_finish_with_tool_calls(
    client: TestClient, engine: FakeEngineClient
) -> None:
    engine.script = 'Let me check. <tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    body = chat(client, tools=[WEATHER], max_tokens=200).json()
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Let me check. "
    (call,) = choice["message"]["tool_calls"]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Oslo"}'}
    # The template got the tools, and special tokens are kept for the parser.
    submitted = engine.submitted[-1]
    assert submitted.prompt.tools[0]["function"]["name"] == "get_weather"
    assert submitted.params.skip_special_tokens is False

    chunks = events(chat(client, tools=[WEATHER], stream=True, max_tokens=200))
    deltas = [choice["delta"] for chunk in chunks for choice in chunk["choices"]]
    content = "".join(delta.get("content") or "" for delta in deltas)
    assert content == "Let me check. " and "<tool_call>" not in content
    (tool_delta,) = [call for delta in deltas for call in delta.get("tool_calls", [])]
    assert tool_delta["index"] == 0 and tool_delta["function"]["name"] == "get_weather"
    assert json.loads(tool_delta["function"]["arguments"]) == {"city": "Oslo"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_tool_choice_none_hides_tools_and_parses_nothing(client: TestClient, engine: FakeEngineClient) -> None:
    engine.script = '<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>'
    body = chat(client, tools=[WEATHER], tool_choice="none", max_tokens=200).json()
    assert body["choices"][0]["message"]["content"] == engine.script
    assert engine.submitted[-1].prompt.tools is None


def test_forced_tool_choice_sends_a_grammar(client: TestClient, engine: FakeEngineClient) -> None:
    chat(client, tools=[WEATHER], tool_choice="required")
    assert 'tool_call_block ::= "<tool_call>"' in engine.submitted[-1].params.grammar
    chat(client, tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert "get_weather" in engine.submitted[-1].params.grammar


def test_tools_and_a_response_format_together(client: TestClient, engine: FakeEngineClient) -> None:
    answer = {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object", "properties": {"temperature_c": {"type": "integer"}}}}}  # fmt: skip
    # A forced call is this turn's output: the grammar is the call's alone.
    assert chat(client, tools=[WEATHER], tool_choice="required", response_format=answer).status_code == 200
    forced = engine.submitted[-1].params.grammar
    assert "tool_call_block" in forced and "temperature_c" not in forced
    # auto: either calls or the answer's JSON.
    assert chat(client, tools=[WEATHER], tool_choice="auto", response_format=answer).status_code == 200
    either = engine.submitted[-1].params.grammar
    assert "tool_call_block" in either and "temperature_c" in either
    assert either.startswith("root ::= (tool_call_block")
    # auto without a format writes no grammar: a tool schema none could express is no error.
    unique = {"type": "function", "function": {"name": "tags", "parameters": {"type": "array", "uniqueItems": True}}}
    assert chat(client, tools=[unique], tool_choice="auto").status_code == 200
    assert engine.submitted[-1].params.grammar is None
    refused = chat(client, tools=[unique], tool_choice="required")
    assert refused.status_code == 400 and refused.json()["error"]["param"].endswith("uniqueItems")
    # structured_outputs still stands alone.
    refused = chat(client, tools=[WEATHER], tool_choice="required", structured_outputs={"regex": "a+"})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "structured_outputs"


def test_tool_round_trip_messages_reach_the_template(client: TestClient, engine: FakeEngineClient) -> None:
    messages = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "sunny"}]},
    ]
    response = client.post("/v1/chat/completions", json={"model": "fake", "messages": messages, "tools": [WEATHER]})
    assert response.status_code == 200, response.text
    rendered = engine.submitted[-1].prompt.messages
    assert rendered[1]["tool_calls"][0]["function"]["arguments"] == {"city": "Oslo"}
    assert rendered[2] == {"role": "tool", "content": "sunny", "tool_call_id": "call_1"}
    messages[1]["tool_calls"][0]["function"]["arguments"] = "not json"
    bad = client.post("/v1/chat/completions", json={"model": "fake", "messages": messages, "tools": [WEATHER]})
    assert bad.json()["error"]["param"] == "messages[1].tool_calls[0].function.arguments"


def test_reasoning_content_is_split_out(client: TestClient, engine: FakeEngineClient) -> None:
    engine.script = "<think>Let me think.</think>\n\nThe answer."
    message = chat(client).json()["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "The answer.", "reasoning_content": "Let me think."}
    deltas = [c["delta"] for chunk in events(chat(client, stream=True)) for c in chunk["choices"]]
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "Let me think."
    assert "".join(d.get("content", "") for d in deltas) == "The answer."


def test_template_options_reach_the_engine(client: TestClient, engine: FakeEngineClient) -> None:
    messages = [*USER, {"role": "assistant", "content": "Well"}]
    response = client.post(
        "/v1/chat/completions",
        json={
            "model": "fake",
            "messages": messages,
            "continue_final_message": True,
            "chat_template_kwargs": {"enable_thinking": False},
        },
    )
    assert response.status_code == 200, response.text
    prompt = engine.submitted[-1].prompt
    assert prompt.continue_final_message and not prompt.add_generation_prompt
    assert prompt.template_kwargs == {"enable_thinking": False}


def test_logprobs_shape(client: TestClient, engine: FakeEngineClient) -> None:
    original = engine._dispatch

    def with_logprobs(message):
        for index, event in enumerate(message.events):
            if isinstance(event, Delta | Finished) and event.text:
                entry = TokenLogprob(token=event.text, logprob=-1.5, bytes=list(event.text.encode()))
                message.events[index] = msgspec.structs.replace(event, logprobs=[entry])
        original(message)

    engine._dispatch = with_logprobs
    choice = chat(client, logprobs=True).json()["choices"][0]
    content = choice["logprobs"]["content"]
    assert [entry["token"] for entry in content] == [" three", " two", " one"]
    assert content[0] == {"token": " three", "logprob": -1.5, "bytes": list(b" three"), "top_logprobs": []}
    streamed = [c["logprobs"] for chunk in events(chat(client, logprobs=True, stream=True)) for c in chunk["choices"]]
    assert [entry["token"] for lp in streamed if lp for entry in lp["content"]] == [" three", " two", " one"]


def test_graph_file_parser_and_limit_keys(tmp_path) -> None:
    from appliance.errors import ConfigError
    from appliance.graphfiles import load_graph

    path = tmp_path / "g.toml"
    path.write_text(
        'name = "g"\nmodel_path = "."\ntool_parser = "mistral"\nreasoning_parser = "think"\n[limits]\nbest_of_limit = 8\nmax_stop_sequences = 16\n'
        "max_stop_sequence_chars = 1024\n"
    )
    loaded = load_graph(path)
    assert (
        loaded.tool_parser,
        loaded.reasoning_parser,
        loaded.limits.best_of_limit,
        loaded.limits.max_stop_sequences,
        loaded.limits.max_stop_sequence_chars,
    ) == ("mistral", "think", 8, 16, 1024)
    path.write_text('name = "g"\nmodel_path = "."\ntool_parser = "hermes3"\n')
    with pytest.raises(ConfigError, match="`tool_parser`"):
        load_graph(path)
