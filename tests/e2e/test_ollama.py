"""Ollama's API through the `ollama` Python and JavaScript libraries and LangChain's `ChatOllama`
against the real server: chat whole and streamed, `format` with a schema, tools, an image,
generate, embed (the same vectors as /v1/embeddings), list, show, ps, a model loaded and unloaded
on request, and errors in Ollama's shape.

demo-smol is the real SmolLM2-135M-Instruct (greedy), for text that matters. A 135M model does not
choose to call a tool, and Ollama's API has no tool_choice to make it: `smol-json-calls` is demo-smol
with the `llama3_json` tool parser (a call is the JSON object `{"name", "parameters"}`), and the
client's `format` asks for that object, so the answer is a call the parser reads, as a model that
calls tools on its own would write it. demo-vision's words are random: its answers are checked for
structure only. demo-embed is all-MiniLM-L6-v2.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import ollama
import pytest

from tests.conftest import RunningServer, copy_demo_graphs, on_demand_chats, running_server
from tests.images import encode, noise

SMOL = "demo-smol"
CALLS = "smol-json-calls"
VISION = "demo-vision"
EMBED = "demo-embed"
ON_DEMAND = "chat-on-demand"
API_KEY = "ollama-key"
HEADERS = {"Authorization": f"Bearer {API_KEY}"}
JS = Path(__file__).resolve().parents[1] / "js"
GREEDY = {"temperature": 0, "num_predict": 24}
COUNT = [{"role": "user", "content": "Count from 1 to 5."}]
ASK_WEATHER = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
CALL_FORMAT = {
    "type": "object",
    "properties": {
        "name": {"const": "get_weather"},
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 20}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "parameters"],
    "additionalProperties": False,
}
EXTRACTED = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 20}, "temperature_c": {"type": "integer"}},
    "required": ["city", "temperature_c"],
    "additionalProperties": False,
}
EXTRACT = [{"role": "user", "content": "Paris is at 21 degrees C. Extract the city and temperature."}]


@pytest.fixture(scope="module")
def server(
    smol_root: Path, demo_root: Path, retrieval_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    base = tmp_path_factory.mktemp("ollama")
    graphs = copy_demo_graphs(smol_root, base / "graphs", [SMOL])
    smol = (graphs / f"{SMOL}.toml").read_text()
    calls = smol.replace(f'name = "{SMOL}"', f'name = "{CALLS}"').replace('"hermes"', '"llama3_json"')
    (graphs / f"{CALLS}.toml").write_text(
        "\n".join(line for line in calls.splitlines() if not line.startswith("aliases"))
    )
    copy_demo_graphs(demo_root, graphs, [VISION])
    copy_demo_graphs(retrieval_root, graphs, [EMBED])
    on_demand_chats(demo_root, graphs, [ON_DEMAND])
    (base / "api-keys").write_text(f"{API_KEY}\n")
    with running_server(graphs, base / "server.log", "--api-key-file", str(base / "api-keys")) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: RunningServer) -> ollama.Client:
    return ollama.Client(host=server.url, headers=HEADERS, timeout=120)


def test_chat_whole_and_streamed(client: ollama.Client) -> None:
    whole = client.chat(model=SMOL, messages=COUNT, options=GREEDY)
    print("whole:", repr(whole.message.content))
    assert whole.done and whole.done_reason in ("stop", "length") and whole.model == SMOL
    assert "1" in whole.message.content and "3" in whole.message.content
    assert whole.prompt_eval_count > 0 and 0 < whole.eval_count <= GREEDY["num_predict"]
    assert whole.total_duration >= whole.eval_duration > 0
    parts = list(client.chat(model=SMOL, messages=COUNT, options=GREEDY, stream=True))
    assert len(parts) > 2 and [part.done for part in parts] == [False] * (len(parts) - 1) + [True]
    assert "".join(part.message.content for part in parts) == whole.message.content
    assert parts[-1].eval_count == whole.eval_count and parts[-1].prompt_eval_count == whole.prompt_eval_count


def test_format_with_a_schema(client: ollama.Client) -> None:
    answer = client.chat(model=SMOL, messages=EXTRACT, format=EXTRACTED, options={"temperature": 0, "num_predict": 60})
    print("formatted:", answer.message.content)
    assert json.loads(answer.message.content) == {"city": "Paris", "temperature_c": 21}
    as_json = client.generate(model=SMOL, prompt=EXTRACT[0]["content"], format="json", options={"temperature": 0})
    assert isinstance(json.loads(as_json.response), dict)


def test_tools_reach_the_prompt_and_calls_come_back_as_objects(client: ollama.Client) -> None:
    with_tools = client.chat(model=SMOL, messages=ASK_WEATHER, tools=[WEATHER_TOOL], options={"num_predict": 1})
    without = client.chat(model=SMOL, messages=ASK_WEATHER, options={"num_predict": 1})
    assert with_tools.prompt_eval_count > without.prompt_eval_count + 20  # the tool's definition is in the prompt
    fields = dict(model=CALLS, messages=ASK_WEATHER, tools=[WEATHER_TOOL], format=CALL_FORMAT)
    called = client.chat(**fields, options={"temperature": 0, "num_predict": 60})
    print("calls:", called.message.tool_calls)
    (call,) = called.message.tool_calls
    assert call.function.name == "get_weather" and call.function.arguments == {"city": "Paris"}
    streamed = [part.message.tool_calls for part in client.chat(**fields, stream=True, options={"temperature": 0})]
    assert [calls for calls in streamed if calls] == [called.message.tool_calls]
    # The call and its result sent back, as the library's agent loop does: both reach the prompt (a
    # 135M model's answer to them is not worth checking), and the answer is text.
    answered = client.chat(
        model=SMOL,
        messages=[
            *ASK_WEATHER,
            called.message,
            {"role": "tool", "content": "Rain, 8 degrees Celsius.", "tool_name": "get_weather"},
        ],
        tools=[WEATHER_TOOL],
        options={"temperature": 0, "num_predict": 30},
    )
    print("answer:", repr(answered.message.content))
    assert answered.prompt_eval_count > with_tools.prompt_eval_count + 20
    assert answered.message.content and not answered.message.tool_calls


def test_an_image_on_the_vision_model(client: ollama.Client) -> None:
    png = base64.b64encode(encode(noise(40, 30, seed=1))).decode()
    messages = [{"role": "user", "content": "What is in this picture?", "images": [png]}]
    whole = client.chat(model=VISION, messages=messages, options={"temperature": 0, "num_predict": 8})
    streamed = list(
        client.chat(model=VISION, messages=messages, options={"temperature": 0, "num_predict": 8}, stream=True)
    )
    assert "".join(part.message.content for part in streamed) == whole.message.content
    assert whole.prompt_eval_count == streamed[-1].prompt_eval_count > 10  # the image's tokens count
    text_only = client.chat(model=VISION, messages=[{"role": "user", "content": "What is in this picture?"}],
                            options={"num_predict": 1})  # fmt: skip
    assert whole.prompt_eval_count > text_only.prompt_eval_count
    generated = client.generate(model=VISION, prompt="What is this?", images=[png], options={"num_predict": 4})
    assert generated.done and generated.prompt_eval_count > 10
    with pytest.raises(ollama.ResponseError) as garbage:
        client.chat(model=VISION, messages=[{"role": "user", "content": "x", "images": ["bm90IGFuIGltYWdl"]}])
    assert garbage.value.status_code == 400 and garbage.value.error.startswith("messages[0].images[0]")


def test_generate_is_chat_with_one_user_message(client: ollama.Client) -> None:
    generated = client.generate(model=SMOL, prompt=COUNT[0]["content"], options=GREEDY)
    chatted = client.chat(model=SMOL, messages=COUNT, options=GREEDY)
    assert generated.response == chatted.message.content and generated.eval_count == chatted.eval_count
    streamed = "".join(
        part.response for part in client.generate(model=SMOL, prompt=COUNT[0]["content"], options=GREEDY, stream=True)
    )
    assert streamed == generated.response
    raw = client.generate(model=SMOL, prompt="1, 2, 3, 4,", raw=True, options={"temperature": 0, "num_predict": 4})
    print("raw:", repr(raw.response))
    assert raw.done and raw.response.strip().startswith("5")


def test_embed_gives_the_vectors_of_v1_embeddings(server: RunningServer, client: ollama.Client) -> None:
    texts = ["The sky is blue.", "Grass is green."]
    embedded = client.embed(model=EMBED, input=texts)
    reference = server.client(api_key=API_KEY).embeddings.create(model=EMBED, input=texts)
    assert embedded.embeddings == [item.embedding for item in reference.data]
    assert len(embedded.embeddings[0]) == 384 and embedded.prompt_eval_count == reference.usage.prompt_tokens
    assert client.embeddings(model=EMBED, prompt=texts[0]).embedding == embedded.embeddings[0]
    assert client.embed(model=EMBED, input=texts[0], dimensions=384).embeddings[0] == embedded.embeddings[0]
    with pytest.raises(ollama.ResponseError) as shorter:  # as /v1/embeddings: this model has no shorter vectors
        client.embed(model=EMBED, input=texts[0], dimensions=8)
    assert shorter.value.status_code == 400 and shorter.value.error.startswith("dimensions:")


def test_list_show_and_ps(client: ollama.Client) -> None:
    listed = {model.model: model for model in client.list().models}
    assert set(listed) == {SMOL, CALLS, VISION, EMBED, ON_DEMAND}
    smol = listed[SMOL]
    assert smol.size > 50_000_000 and smol.details.format == "gguf" and smol.details.family == "llama"
    assert (smol.details.parameter_size, smol.details.quantization_level) == ("135M", "Q4_1")
    shown = client.show(SMOL)
    assert shown.capabilities == ["completion", "tools"] and shown.modelinfo["llama.context_length"] == 8192
    assert "<|im_start|>" in shown.template and "num_ctx" in shown.parameters
    assert client.show(VISION).capabilities == ["completion", "tools", "vision"]
    assert client.show(EMBED).capabilities == ["embedding"]
    running = {model.model: model for model in client.ps().models}
    assert SMOL in running and ON_DEMAND not in running
    assert running[SMOL].size > 0 and running[SMOL].context_length == 8192
    assert running[SMOL].expires_at.year > 2300  # its graph never unloads it


def test_a_model_loaded_and_unloaded_on_request(client: ollama.Client) -> None:
    loaded = client.generate(model=ON_DEMAND)
    assert loaded.done_reason == "load" and ON_DEMAND in {model.model for model in client.ps().models}
    unloaded = client.generate(model=ON_DEMAND, keep_alive=0)
    assert unloaded.done_reason == "unload"
    deadline = time.monotonic() + 30
    while ON_DEMAND in {model.model for model in client.ps().models} and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ON_DEMAND not in {model.model for model in client.ps().models}
    # A model its graph keeps loaded is not unloaded by a client.
    with pytest.raises(ollama.ResponseError) as kept:
        client.generate(model=SMOL, keep_alive=0)
    assert kept.value.status_code == 400 and kept.value.error.startswith("keep_alive:")


def test_errors_take_ollamas_shape(server: RunningServer, client: ollama.Client) -> None:
    with pytest.raises(ollama.ResponseError) as unknown:
        client.chat(model="llama3", messages=COUNT)
    assert unknown.value.status_code == 404 and unknown.value.error.startswith("model:")
    with pytest.raises(ollama.ResponseError) as hot:
        client.chat(model=SMOL, messages=COUNT, options={"temperature": 7})
    assert hot.value.status_code == 400 and hot.value.error.startswith("options.temperature:")
    with pytest.raises(ollama.ResponseError) as pulled:
        client.pull("llama3")
    assert pulled.value.status_code == 404 and "graph files" in pulled.value.error
    assert client.pull(SMOL).status == "success"
    with pytest.raises(ollama.ResponseError) as refused:
        ollama.Client(host=server.url, headers={"Authorization": "Bearer wrong"}).list()
    assert refused.value.status_code == 401
    probe = httpx.get(server.url, headers=HEADERS, timeout=10)
    assert probe.status_code == 200 and probe.text == "Ollama is running"
    assert httpx.get(f"{server.url}/api/version", headers=HEADERS, timeout=10).json()["version"]


def test_langchain_chat_ollama_with_tools_and_structured_output(server: RunningServer) -> None:
    from langchain_core.tools import tool
    from langchain_ollama import ChatOllama
    from pydantic import BaseModel

    @tool
    def get_weather(city: str) -> str:
        """Get the current weather in a city."""
        return f"Sunny in {city}."

    class Weather(BaseModel):
        city: str
        temperature_c: int

    common = dict(base_url=server.url, temperature=0, num_predict=60, client_kwargs={"headers": HEADERS})
    calling = ChatOllama(model=CALLS, format=CALL_FORMAT, **common).bind_tools([get_weather])
    message = calling.invoke(ASK_WEATHER[0]["content"])
    print("LangChain calls:", message.tool_calls)
    assert [(call["name"], call["args"]) for call in message.tool_calls] == [("get_weather", {"city": "Paris"})]
    extracted = ChatOllama(model=SMOL, **common).with_structured_output(Weather).invoke(EXTRACT[0]["content"])
    assert extracted == Weather(city="Paris", temperature_c=21)
    chunks = [chunk.content for chunk in ChatOllama(model=SMOL, **common).stream(COUNT[0]["content"])]
    assert len(chunks) > 2 and "1" in "".join(chunks)


def test_the_javascript_library(server: RunningServer) -> None:
    if shutil.which("node") is None or not (JS / "node_modules" / "ollama").is_dir():
        pytest.skip("Node or tests/js/node_modules is missing (setup.sh runs npm ci there when npm is present)")
    png = base64.b64encode(encode(noise(40, 30, seed=1))).decode()
    run = subprocess.run(
        ["node", str(JS / "ollama_client.mjs"), server.url, SMOL, CALLS, VISION, EMBED, png, API_KEY],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    print("JS:", {key: value for key, value in result.items() if key != "embeddings"})
    assert result["whole"] == result["streamed"] and result["streamedDone"] and "3" in result["whole"]
    assert result["formatted"] == {"city": "Paris", "temperature_c": 21}
    assert [call["function"] for call in result["toolCalls"]] == [
        {"name": "get_weather", "arguments": {"city": "Paris"}, "index": 0}
    ]
    assert result["vision"]["promptTokens"] > 10 and result["generated"] == result["whole"]
    texts = ["The sky is blue.", "Grass is green."]
    reference = server.client(api_key=API_KEY).embeddings.create(model=EMBED, input=texts)
    assert result["embeddings"] == [item.embedding for item in reference.data]
    assert set(result["listed"]) == {SMOL, CALLS, VISION, EMBED, ON_DEMAND}
    assert result["capabilities"] == ["completion", "tools"] and result["contextLength"] == 8192
    assert SMOL in result["running"]
