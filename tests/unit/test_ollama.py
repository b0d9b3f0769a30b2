"""Ollama's API on the fake engine: answers and streams (validated with the `ollama` library's own
types), tool calls and thinking, what reaches the chat template and the engine, options mapped or
refused by name, keep_alive, load and unload requests, the model routes, an engine failure
mid-stream, and errors in Ollama's shape."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import msgspec
import pytest
from litestar.testing import TestClient
from ollama import ChatResponse as SdkChatResponse
from ollama import GenerateResponse as SdkGenerateResponse
from ollama import ListResponse as SdkListResponse
from ollama import ProcessResponse as SdkProcessResponse
from ollama import ShowResponse as SdkShowResponse

from appliance.api.gate import Gate
from appliance.dialects.ollama.plan import KEEP, UNLOAD, keep_alive_seconds
from appliance.engine.messages import Finished
from appliance.errors import InvalidRequest
from appliance.graphfiles import Graph
from appliance.protocol.ollama import ChatRequest, EmbedRequest, GenerateRequest, Options
from tests.apps import fake_app
from tests.fakes import FakeEngineClient

KEY = "k1"
AUTH = {"Authorization": f"Bearer {KEY}"}
ASK = [{"role": "user", "content": "one two three"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'


@pytest.fixture
def engine() -> FakeEngineClient:
    return FakeEngineClient(
        Graph(name="fake", model_path="/nonexistent", tool_parser="hermes", reasoning_parser="think")
    )


@pytest.fixture
def client(engine: FakeEngineClient):
    with TestClient(Gate(fake_app(engine), api_keys=[KEY])) as test_client:
        yield test_client


def post(client: TestClient, path: str, **fields):
    return client.post(f"/api/{path}", json={"model": "fake", **fields}, headers=AUTH)


def lines(client: TestClient, path: str, **fields) -> list[dict]:
    answer = post(client, path, **fields)
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/x-ndjson", answer.text
    return [json.loads(line) for line in answer.text.splitlines()]


def test_chat_whole_and_streamed(client: TestClient) -> None:
    whole = SdkChatResponse(**post(client, "chat", messages=ASK, stream=False).json())
    assert whole.message.role == "assistant" and whole.message.content == " three two one"
    assert whole.done and whole.done_reason == "stop" and (whole.prompt_eval_count, whole.eval_count) == (3, 3)
    assert whole.total_duration >= whole.load_duration >= 0 and whole.created_at.endswith("Z")
    parts = [SdkChatResponse(**line) for line in lines(client, "chat", messages=ASK)]  # streamed by default
    assert [part.done for part in parts] == [False] * (len(parts) - 1) + [True]
    assert "".join(part.message.content for part in parts) == whole.message.content
    assert parts[-1].message.content == "" and parts[-1].eval_count == 3 and parts[-1].done_reason == "stop"
    cut = post(client, "chat", messages=ASK, stream=False, options={"num_predict": 1}).json()
    assert cut["done_reason"] == "length" and cut["eval_count"] == 1


def test_thinking_text_and_tool_calls(client: TestClient, engine: FakeEngineClient) -> None:
    engine.script = f"<think>Hm.</think>Checking. {CALL}"
    long = {"num_predict": 64}  # the fake answers 16 tokens by default
    whole = SdkChatResponse(
        **post(client, "chat", messages=ASK, tools=[WEATHER], think=True, stream=False, options=long).json()
    )
    assert whole.message.thinking == "Hm." and whole.message.content.strip() == "Checking."
    (call,) = whole.message.tool_calls
    assert call.function.name == "get_weather" and call.function.arguments == {"city": "Oslo"}
    assert whole.done_reason == "stop"  # Ollama says stop after calls too
    parts = lines(client, "chat", messages=ASK, tools=[WEATHER], think=True, options=long)
    assert [bool(p["message"].get("thinking")) for p in parts][:1] == [True]
    calls = [p["message"]["tool_calls"] for p in parts if "tool_calls" in p["message"]]
    assert calls == [
        [{"id": calls[0][0]["id"], "function": {"name": "get_weather", "arguments": {"city": "Oslo"}, "index": 0}}]
    ]
    assert engine.submitted[-1].prompt.template_kwargs == {"enable_thinking": True}


def test_what_reaches_the_chat_template_and_the_engine(client: TestClient, engine: FakeEngineClient) -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "",
            "thinking": "Call it.",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}],
        },
        {"role": "tool", "content": "Rain", "tool_name": "get_weather"},
        {"role": "user", "content": "And tomorrow?"},
    ]
    options = {"temperature": 0.5, "top_k": 5, "top_p": 0.9, "min_p": 0.1, "seed": 7, "stop": ["x"],
               "repeat_penalty": 1.1, "presence_penalty": 0.2, "frequency_penalty": 0.3, "num_predict": 9,
               "num_thread": 4, "num_gpu": 99, "use_mmap": True, "typical_p": 1.0, "mirostat": 0}  # fmt: skip
    answer = post(client, "chat", messages=messages, tools=[WEATHER], options=options, stream=False, think=False)
    assert answer.status_code == 200, answer.text
    submitted = engine.submitted[-1]
    sent = [(m["role"], m.get("content")) for m in submitted.prompt.messages]
    assert sent == [
        ("system", "Be brief."),
        ("user", "Weather?"),
        ("assistant", ""),
        ("tool", "Rain"),
        ("user", "And tomorrow?"),
    ]
    assistant, tool = submitted.prompt.messages[2], submitted.prompt.messages[3]
    assert assistant["reasoning_content"] == "Call it."
    assert assistant["tool_calls"][0]["function"]["arguments"] == {"city": "Oslo"}
    assert tool["tool_call_id"] == assistant["tool_calls"][0]["id"]  # matched by the tool's name
    assert submitted.prompt.template_kwargs == {"enable_thinking": False}
    params = submitted.params
    assert (params.temperature, params.top_k, params.top_p, params.min_p, params.seed) == (0.5, 5, 0.9, 0.1, 7)
    assert (params.repetition_penalty, params.presence_penalty, params.frequency_penalty) == (1.1, 0.2, 0.3)
    assert list(params.stop) == ["x"] and params.max_new_tokens == 9 and not params.include_stop_str_in_output


def test_generate_through_the_template_and_raw(client: TestClient, engine: FakeEngineClient) -> None:
    templated = SdkGenerateResponse(**post(client, "generate", prompt="a b c", system="Sys.", stream=False).json())
    assert templated.response == " c b a" and templated.done
    assert [m["role"] for m in engine.submitted[-1].prompt.messages] == ["system", "user"]
    raw = lines(client, "generate", prompt="a b c", raw=True, options={"num_ctx": 2})
    assert "".join(line["response"] for line in raw) == " c b"  # num_ctx caps the answer
    assert engine.submitted[-1].prompt.text == "a b c" and raw[-1]["done_reason"] == "length"
    for line in raw:
        SdkGenerateResponse(**line)
    formatted = post(client, "generate", prompt="a b c", raw=True, format="json", stream=False)
    assert formatted.status_code == 200 and engine.submitted[-1].params.grammar


@pytest.mark.parametrize(
    ("path", "fields", "where"),
    [
        ("chat", {"messages": ASK, "options": {"temperature": 9}}, "options.temperature"),
        ("chat", {"messages": ASK, "options": {"typical_p": 0.5}}, "options.typical_p"),
        ("chat", {"messages": ASK, "options": {"mirostat": 2}}, "options.mirostat"),
        ("chat", {"messages": ASK, "options": {"repeat_last_n": 64, "repeat_penalty": 1.2}}, "options.repeat_last_n"),
        ("chat", {"messages": ASK, "options": {"num_predict": 0}}, "options.num_predict"),
        ("chat", {"messages": ASK, "options": {"num_predict": 10**6}}, "options.num_predict"),
        ("chat", {"messages": ASK, "options": {"seed": 2**70}}, "options.seed"),
        ("chat", {"messages": ASK, "options": {"stop": [""]}}, "options.stop[0]"),
        ("chat", {"messages": ASK, "options": {"stop": ["a"] * 65}}, "options.stop"),
        ("chat", {"messages": ASK, "options": {"surprise": 1}}, "options.surprise"),
        ("chat", {"messages": ASK, "surprise": 1}, "surprise"),
        ("chat", {"messages": [{"role": "user", "content": "x", "extra": 1}]}, "messages[0].extra"),
        ("chat", {"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ("chat", {"messages": [{"role": "user", "content": "x", "images": ["aGk="]}]}, "messages[0].images[0]"),
        ("chat", {"messages": [{"role": "assistant", "content": "x", "images": ["aGk="]}]}, "messages[0].images"),
        ("chat", {"messages": ASK, "keep_alive": "soon"}, "keep_alive"),
        ("chat", {"messages": ASK, "format": "xml"}, "format"),
        ("chat", {"messages": ASK, "top_logprobs": 2, "logprobs": True}, "top_logprobs"),
        (
            "chat",
            {"messages": ASK, "tools": [{"type": "function", "function": {"name": "no spaces"}}]},
            "tools[0].function.name",
        ),  # fmt: skip
        ("generate", {"prompt": "x", "template": "{{ .Prompt }}"}, "template"),
        ("generate", {"prompt": "x", "context": [1, 2]}, "context"),
        ("generate", {"prompt": "x", "suffix": "y"}, "suffix"),
        ("generate", {"prompt": "x", "raw": True, "system": "s"}, "system"),
        ("generate", {"prompt": "x", "images": ["aGk="]}, "images[0]"),
        ("embed", {"input": "x"}, "model"),  # the fake serves chat only
        ("show", {"model": ""}, "model"),
    ],
)
def test_refusals_name_the_ollama_field(client: TestClient, path: str, fields: dict, where: str) -> None:
    answer = post(client, path, **fields)
    assert answer.status_code == 400, answer.text
    assert set(answer.json()) == {"error"} and answer.json()["error"].startswith(f"{where}:"), answer.json()


def test_think_needs_a_reasoning_parser() -> None:
    engine = FakeEngineClient(Graph(name="fake", model_path="/nonexistent"))
    with TestClient(Gate(fake_app(engine))) as client:
        refused = post(client, "chat", messages=ASK, think="high", stream=False)
        assert refused.status_code == 400 and refused.json()["error"].startswith("think:")
        assert post(client, "chat", messages=ASK, think=False, stream=False).status_code == 200
        assert engine.submitted[-1].prompt.template_kwargs == {}


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        (0, UNLOAD),
        ("0", UNLOAD),
        (-1, KEEP),
        ("-1m", KEEP),
        ("5m", 300.0),
        ("1h30m", 5400.0),
        (300, 300.0),
        ("1.5s", 1.5),
        ("300", 300.0),
    ],  # fmt: skip
)
def test_keep_alive_as_ollama_reads_it(value: object, seconds: float | None) -> None:
    assert keep_alive_seconds(value) == seconds


@pytest.mark.parametrize("value", ["soon", "5 m", "1d", "m5", "nan", "inf", "9" * 400, "1h" * 100])
def test_keep_alive_refusals(value: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        keep_alive_seconds(value)
    assert refused.value.param == "keep_alive"


def test_load_and_unload_requests(client: TestClient) -> None:
    loaded = post(client, "chat", messages=[])
    assert loaded.status_code == 200 and loaded.json()["done_reason"] == "load" and loaded.json()["done"]
    assert post(client, "generate").json()["done_reason"] == "load"
    # The fake graph loads at start and never unloads when idle: only an operator unloads it.
    kept = post(client, "generate", keep_alive=0)
    assert kept.status_code == 400 and kept.json()["error"].startswith("keep_alive:")
    # A chat with keep_alive 0 is answered; the model stays (its graph keeps it loaded).
    assert post(client, "chat", messages=ASK, keep_alive=0, stream=False).status_code == 200


def test_a_model_that_comes_and_goes_is_unloaded_on_request() -> None:
    engine = FakeEngineClient(Graph(name="fake", model_path="/nonexistent", idle_unload_seconds=600))
    unloads = []

    async def unload(drain_seconds: float = 0.0) -> bool:
        unloads.append(drain_seconds)
        return True

    engine.unload = unload  # type: ignore[method-assign]
    with TestClient(Gate(fake_app(engine))) as client:
        answered = post(client, "chat", messages=ASK, keep_alive="0s")
        assert answered.status_code == 200 and json.loads(answered.text.splitlines()[-1])["done"]
        unloaded = post(client, "generate", keep_alive=0)
        assert unloaded.json()["done_reason"] == "unload"
        ps = SdkProcessResponse(**client.get("/api/ps").json())
        assert ps.models[0].expires_at.year < 2100  # the idle unload's time, not "forever"
    assert len(unloads) == 2


def test_engine_failure_mid_stream(client: TestClient, engine: FakeEngineClient) -> None:
    original = engine._dispatch

    def failing(message):
        events = message.events
        for index, event in enumerate(events):
            if isinstance(event, Finished):
                events[index] = msgspec.structs.replace(event, finish_reason="error", error="boom")
        original(message)

    engine._dispatch = failing
    streamed = lines(client, "chat", messages=ASK)
    assert streamed[-1] == {"error": "boom"} and not any(line.get("done") for line in streamed)
    raw = lines(client, "generate", prompt="a b", raw=True)
    assert raw[-1] == {"error": "boom"}
    failed = post(client, "chat", messages=ASK, stream=False)
    assert failed.status_code == 500 and failed.json() == {"error": "boom"}


def test_model_routes(client: TestClient) -> None:
    listed = SdkListResponse(**client.get("/api/tags", headers=AUTH).json())
    assert [model.model for model in listed.models] == ["fake"] and listed.models[0].details.format == "openvino"
    shown = SdkShowResponse(**post(client, "show").json())
    assert shown.capabilities == ["completion", "tools", "thinking"]
    assert shown.modelinfo["unknown.context_length"] == 4096 and "num_ctx" in shown.parameters
    assert post(client, "show", model="fake:latest").status_code == 200  # Ollama's default tag
    running = SdkProcessResponse(**client.get("/api/ps", headers=AUTH).json())
    assert running.models[0].model == "fake" and running.models[0].expires_at.year > 2300  # never unloads
    assert client.get("/api/version", headers=AUTH).json() == {"version": "0.12.6"}
    unknown = post(client, "show", model="nope")
    assert unknown.status_code == 404 and unknown.json()["error"].startswith("model:")


def test_models_come_from_graph_files(client: TestClient) -> None:
    assert post(client, "pull", stream=False).json() == {"status": "success"}
    assert lines(client, "pull") == [{"status": "success"}]
    missing = post(client, "pull", model="llama3")
    assert missing.status_code == 404 and "graph files" in missing.json()["error"]
    for path in ("push", "create", "copy"):
        refused = post(client, path, **({"from": "fake"} if path == "create" else {}))
        assert refused.status_code == 400 and "graph files" in refused.json()["error"], path
    deleted = client.request("DELETE", "/api/delete", json={"model": "fake"}, headers=AUTH)
    assert deleted.status_code == 400 and "graph files" in deleted.json()["error"]


def test_root_is_ollamas_probe_and_a_browsers_way_to_the_playground(client: TestClient) -> None:
    probe = client.get("/", headers=AUTH)
    assert probe.status_code == 200 and probe.text == "Ollama is running"
    assert client.head("/", headers=AUTH).status_code == 200
    browser = client.get("/", headers={**AUTH, "Accept": "text/html,*/*"}, follow_redirects=False)
    assert browser.status_code == 302 and browser.headers["location"] == "/playground"


def test_the_gate_answers_in_ollamas_shape(client: TestClient) -> None:
    refused = client.post("/api/chat", json={"model": "fake", "messages": ASK})
    assert refused.status_code == 401 and set(refused.json()) == {"error"}
    form = client.post(
        "/api/chat", content=b"{}", headers={**AUTH, "Content-Type": "application/x-www-form-urlencoded"}
    )
    assert form.status_code == 415 and set(form.json()) == {"error"}
    missing = client.get("/api/nothing", headers=AUTH)
    assert missing.status_code == 404 and set(missing.json()) == {"error"}


def test_the_docs_table_names_every_request_field() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "ollama.md").read_text()
    documented = {
        name
        for line in docs.splitlines()
        if line.startswith("| `")
        for name in re.findall(r"`([^`]+)`", line.split("|")[1])
    }
    for struct in (ChatRequest, GenerateRequest, EmbedRequest, Options):
        assert set(struct.__struct_fields__) <= documented, struct


def test_images_become_data_urls_whatever_their_bytes() -> None:
    # The bytes decide the format (media/sources.py): Ollama sends no media type.
    from appliance.dialects.ollama.input import image_part

    payload = base64.b64encode(b"GIF89a").decode()
    assert image_part(payload).image_url.url == f"data:image/png;base64,{payload}"


@pytest.mark.parametrize(
    "body",
    [
        b'{"model": "fake", "messages": [], "options": {"temperature": NaN}}',
        b'{"model": "fake", "messages": [], "options": {"temperature": 1e400}}',
        b'{"model": "fake", "messages": ' + b"[" * 100_000,
        b'{"model": "fake", "messages": [{"role": "user", "content": "x"}]',
        b"[]",
        b"",
    ],
)
def test_hostile_bodies_are_a_400_in_ollamas_shape(client: TestClient, body: bytes) -> None:
    for path in ("/api/chat", "/api/generate", "/api/embed", "/api/show", "/api/pull", "/api/create"):
        answer = client.post(path, content=body, headers={**AUTH, "Content-Type": "application/json"})
        assert answer.status_code == 400 and set(answer.json()) == {"error"}, (path, answer.text)


def test_huge_options_and_messages_are_bounded(client: TestClient) -> None:
    for options, where in [({"num_ctx": 2**40}, "options.num_ctx"), ({"top_k": 2**40}, "options.top_k")]:
        refused = post(client, "chat", messages=ASK, options=options)
        assert refused.status_code == 400 and refused.json()["error"].startswith(where), refused.text
    many = post(client, "chat", messages=ASK * 100_000, stream=False)
    assert many.status_code in (400, 413) and set(many.json()) == {"error"}
