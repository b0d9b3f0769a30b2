"""The real trained demo model (demo-smol: SmolLM2-135M-Instruct, served from its GGUF file) through
the real `openai` client and raw HTTP.

Random weights prove the plumbing; only a model that speaks proves that chat templates, stop
strings, structured output and tool calls work. Everything here is greedy, so it is exact: the
answers below were read off this model once and are what its greedy decoding says.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonschema
import openai
import pytest

from tests.conftest import RunningServer, copy_demo_graphs, running_server, start_server, stop_server

MODEL = "demo-smol"
LOOKUP = "demo-smol-lookup"
CAPITAL = [{"role": "user", "content": "What is the capital of France?"}]
# Greedy continuation of the plain text "The capital of France is" in 12 tokens.
CONTINUATION = ' Paris.\n\nThe answer to the question "What is'
# A passage said twice, then begun a third time: the model goes on copying it, which is the case
# prompt lookup is for (its candidates are n-grams of the prompt).
PASSAGE = (
    "The appliance serves chat models over HTTP on Intel CPU, GPU or NPU. Each model is described by a "
    "graph file. Every model runs in its own engine process, so the event loop never waits on inference, "
    "and every bad input gets a clear error."
)
REPEATING = f"{PASSAGE}\n\n{PASSAGE}\n\nThe appliance serves chat models"


def _smol_graphs(smol_root: Path, graphs: Path) -> Path:
    """demo-smol's graph, and a prompt-lookup graph over the same GGUF file."""
    graphs.mkdir(parents=True, exist_ok=True)
    copy_demo_graphs(smol_root, graphs, [MODEL])
    text = (graphs / f"{MODEL}.toml").read_text()
    lookup = (
        text.replace(f'name = "{MODEL}"', f'name = "{LOOKUP}"')
        .replace('pipeline = "LM_CB"', 'pipeline = "LM_CB"\nprompt_lookup = true')
        .replace('aliases = ["tgi", "dummy"]\n', "")  # the names are demo-smol's
    )
    assert "prompt_lookup = true" in lookup and f'"{LOOKUP}"' in lookup
    (graphs / f"{LOOKUP}.toml").write_text(lookup)
    return graphs


@pytest.fixture(scope="module")
def smol_server(smol_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    base = tmp_path_factory.mktemp("smol")
    graphs = _smol_graphs(smol_root, base / "graphs")
    with running_server(graphs, base / "server.log", "--invocations-model", MODEL) as running:
        yield running


@pytest.fixture(scope="module")
def client(smol_server: RunningServer) -> openai.OpenAI:
    return smol_server.client(timeout=120)


@pytest.fixture(scope="module")
def gguf_tokenizer(smol_root: Path):
    """OpenVINO GenAI's own tokenizer of the GGUF file, to count tokens independently of the server."""
    import openvino_genai

    (gguf,) = (smol_root / "models" / MODEL).glob("*.gguf")
    return openvino_genai.Tokenizer(str(gguf))


def _chat(client: openai.OpenAI, messages: list[dict], **kwargs):
    kwargs.setdefault("max_tokens", 48)
    return client.chat.completions.create(model=kwargs.pop("model", MODEL), messages=messages, temperature=0, **kwargs)


def _text(client: openai.OpenAI, messages: list[dict], **kwargs) -> str:
    return _chat(client, messages, **kwargs).choices[0].message.content


def test_a_factual_answer(client: openai.OpenAI) -> None:
    reply = _chat(client, CAPITAL)
    assert reply.choices[0].message.content == "The capital of France is Paris."
    assert reply.choices[0].finish_reason == "stop"


def test_a_system_prompt_changes_the_answer(client: openai.OpenAI) -> None:
    question = [{"role": "user", "content": "What is your name?"}]
    assert "Bob" not in _text(client, question)
    pirate = _text(client, [{"role": "system", "content": "You are a pirate named Captain Bob."}, *question])
    assert pirate.startswith("Captain Bob!")


def test_an_earlier_turn_changes_the_answer(client: openai.OpenAI) -> None:
    question = {"role": "user", "content": "What is my name?"}
    assert "Alice" not in _text(client, [question])
    earlier = [
        {"role": "user", "content": "My name is Alice."},
        {"role": "assistant", "content": "Nice to meet you, Alice!"},
    ]
    assert "Alice" in _text(client, [*earlier, question])


def test_streamed_text_equals_the_answer(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": "Write a short poem about the sea."}]
    whole = _chat(client, messages, max_tokens=64)
    stream = _chat(client, messages, max_tokens=64, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert text == whole.choices[0].message.content
    assert finish == [whole.choices[0].finish_reason] == ["length"]
    assert chunks[-1].usage == whole.usage


def test_usage_is_the_tokenizers_count(client: openai.OpenAI, gguf_tokenizer) -> None:
    reply = _chat(client, CAPITAL, logprobs=True)
    prompt = gguf_tokenizer.apply_chat_template(CAPITAL, add_generation_prompt=True)
    prompt_ids = gguf_tokenizer.encode(prompt, add_special_tokens=False).input_ids.data[0]
    assert reply.usage.prompt_tokens == len(prompt_ids)
    # The answer's tokens, one logprob entry each, then the end-of-turn token that stopped it
    # (counted, as generated, but not shown).
    answer_ids = gguf_tokenizer.encode("The capital of France is Paris.", add_special_tokens=False).input_ids.data[0]
    assert [entry.token for entry in reply.choices[0].logprobs.content] == [
        gguf_tokenizer.decode([int(token)]) for token in answer_ids
    ]
    assert reply.usage.completion_tokens == len(answer_ids) + 1
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_tokenize_gives_the_byte_level_pieces_of_its_vocabulary(smol_server: RunningServer, gguf_tokenizer) -> None:
    """vLLM's test_tokenize_with_return_token_strs on SmolLM2, whose vocabulary is byte-level BPE:
    the pieces are its Hugging Face tokenizer's (`Ġis`, read from the GGUF file's
    `tokenizer.ggml.tokens`), not SentencePiece's `▁is`."""
    prompt = "This is a token_strs test prompt! vllm1"
    body = {"prompt": prompt, "model": MODEL, "return_token_strs": True}
    result = httpx.post(f"{smol_server.url}/tokenize", json=body, timeout=30).json()
    assert result["tokens"] == list(gguf_tokenizer.encode(prompt).input_ids.data[0])
    pieces = ["This", "Ġis", "Ġa", "Ġtoken", "_", "str", "s", "Ġtest", "Ġprompt", "!", "Ġv", "ll", "m", "1"]
    assert result["token_strs"] == pieces and result["count"] == len(pieces)


@pytest.mark.parametrize("stream", [False, True])
def test_stop_strings_cut_real_text_exactly(client: openai.OpenAI, stream: bool) -> None:
    def ask(**kwargs) -> tuple[str, str]:
        reply = _chat(client, CAPITAL, stream=stream, **kwargs)
        if not stream:
            return reply.choices[0].message.content, reply.choices[0].finish_reason
        chunks = [c for c in reply if c.choices]
        text = "".join(c.choices[0].delta.content or "" for c in chunks)
        return text, [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason][0]

    # A stream shows the stop string unless asked not to (OVMS's default); a whole answer leaves it out.
    shown = stream
    assert ask(stop=[" Paris"]) == ("The capital of France is" + " Paris" * shown, "stop")
    # "of Fr" ends inside the token " France": the cut is still exact.
    assert ask(stop=["of Fr", "never"]) == ("The capital " + "of Fr" * shown, "stop")
    assert ask(stop=["."], extra_body={"include_stop_str_in_output": True}) == (
        "The capital of France is Paris.",
        "stop",
    )
    if not stream:
        assert ask(stop=[" France", " is"]) == ("The capital of", "stop")


def test_json_schema_output_parses_validates_and_says_something(client: openai.OpenAI) -> None:
    schema = {
        "type": "object",
        "properties": {
            "country": {"type": "string", "minLength": 1, "maxLength": 40},
            "capital": {"type": "string", "minLength": 1, "maxLength": 40},
            "population_millions": {"type": "integer", "minimum": 0, "maximum": 2000},
        },
        "required": ["country", "capital", "population_millions"],
        "additionalProperties": False,
    }
    reply = _chat(
        client,
        [{"role": "user", "content": "Describe France as JSON with its capital and population."}],
        max_tokens=96,
        response_format={"type": "json_schema", "json_schema": {"name": "country", "schema": schema}},
    )
    assert reply.choices[0].finish_reason == "stop"
    document = json.loads(reply.choices[0].message.content)
    jsonschema.validate(document, schema)
    assert document["country"].strip() and document["capital"].strip()


def test_a_forced_tool_call_has_valid_arguments(client: openai.OpenAI) -> None:
    parameters = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1, "maxLength": 40},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city", "unit"],
        "additionalProperties": False,
    }
    tools = [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "Weather in a city", "parameters": parameters},
        },
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
    ]
    question = [{"role": "user", "content": "What is the weather like in Paris today?"}]
    for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        reply = _chat(client, question, max_tokens=96, tools=tools, tool_choice=choice, parallel_tool_calls=False)
        assert reply.choices[0].finish_reason == "tool_calls"
        (call,) = reply.choices[0].message.tool_calls
        assert call.type == "function" and call.function.name == "get_weather"
        arguments = json.loads(call.function.arguments)
        jsonschema.validate(arguments, parameters)
        assert arguments["city"].strip()


def test_invocations_on_the_real_model(smol_server: RunningServer) -> None:
    body = {"inputs": "The capital of France is", "parameters": {"max_new_tokens": 12, "details": True}}
    response = httpx.post(f"{smol_server.url}/invocations", json=body, timeout=60)
    assert response.status_code == 200, response.text
    result = response.json()
    # LMI's `inputs` are plain text (no chat template): the model continues it.
    assert result["generated_text"] == CONTINUATION
    assert result["details"]["finish_reason"] == "length"
    response = httpx.post(
        f"{smol_server.url}/invocations", json={"messages": CAPITAL, "max_tokens": 24, "temperature": 0}, timeout=60
    )
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "The capital of France is Paris."


def test_tgi_mode_on_the_real_model(smol_root: Path, tmp_path: Path) -> None:
    (tmp_path / "graphs").mkdir()
    graphs = copy_demo_graphs(smol_root, tmp_path / "graphs", [MODEL])
    running = start_server(graphs, tmp_path / "server.log", env={"APPLIANCE_TGI_COMPAT": "true"})
    try:
        body = {"inputs": "The capital of France is", "parameters": {"max_new_tokens": 12}}
        response = httpx.post(f"{running.url}/invocations", json=body, timeout=60)
        assert response.status_code == 200, response.text
        assert response.json() == [{"generated_text": CONTINUATION}]
        with httpx.stream("POST", f"{running.url}/invocations", json={**body, "stream": True}, timeout=60) as streamed:
            assert streamed.headers["content-type"].startswith("text/event-stream")
            events = [json.loads(line[5:]) for line in streamed.iter_lines() if line.startswith("data:")]
        assert "".join(event["token"]["text"] for event in events) == CONTINUATION
        assert events[-1]["generated_text"] == CONTINUATION
    finally:
        stop_server(running)


def test_elasticsearch_stream_on_the_real_model(smol_server: RunningServer) -> None:
    body = {"messages": CAPITAL, "max_completion_tokens": 24, "temperature": 0}
    url = f"{smol_server.url}/_inference/chat_completion/{MODEL}/_stream"
    with httpx.stream("POST", url, json=body, timeout=60) as response:
        assert response.status_code == 200
        data = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    chunks = [json.loads(item)["chat_completion"] for item in data[:-1]]
    text = "".join(choice["delta"].get("content") or "" for chunk in chunks for choice in chunk["choices"])
    assert text == "The capital of France is Paris."


def test_prompt_lookup_on_a_prompt_that_repeats_its_input(client: openai.OpenAI, smol_server: RunningServer) -> None:
    def complete(model: str) -> str:
        reply = client.completions.create(model=model, prompt=REPEATING, temperature=0, max_tokens=64)
        return reply.choices[0].text

    plain = complete(MODEL)
    # Prompt lookup only proposes tokens; greedy decoding keeps the same text.
    assert complete(LOOKUP) == plain
    assert "Each model is described by a graph file." in plain
    deadline = time.monotonic() + 10
    while True:  # the engines report their counters every half second
        speculative = httpx.get(f"{smol_server.url}/stats", timeout=5).json()["models"][LOOKUP]["speculative"]
        if speculative["accepted_tokens"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert speculative["mode"] == "lookup"
    # The continuation copies the passage: proposed tokens are accepted.
    assert speculative["accepted_tokens"] >= 16, speculative


def test_the_documented_inference_client_snippet_works_as_written(
    smol_server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/api.md's Hugging Face InferenceClient example, run as written (only the URL moved):
    the client sends the placeholder model "dummy", an alias of demo-smol as `appliance demo` writes it."""
    import re

    from huggingface_hub import constants

    # The suite's HF_HUB_OFFLINE=1 would stop the client's requests too; this one talks to 127.0.0.1.
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

    docs = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    (snippet,) = [block for block in re.findall(r"```python\n(.*?)```", docs, re.S) if "InferenceClient" in block]
    snippet = snippet.replace("http://127.0.0.1:8000", smol_server.url)
    snippet = snippet.replace("client.chat_completion(", "answer = client.chat_completion(")
    namespace: dict = {}
    exec(compile(snippet, "docs/api.md", "exec"), namespace)
    assert "Paris" in namespace["answer"].choices[0].message.content
