"""LMI `/invocations` and `/predictions/{model}` against the real server: every request and
response example of the LMI schema seed (non-stream, JSON Lines, SSE, TGI mode, details, list
inputs, messages, errors). The demo model is random: shapes and token counts are checked."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import RunningServer, running_server, start_server, stop_server

MODEL = "demo-chat"
SEED_REQUEST = {
    "inputs": "What is Deep Learning?",
    "parameters": {"do_sample": True, "max_new_tokens": 256, "details": True},
    "stream": True,
}
FINISH_REASONS = ("length", "eos_token", "stop_sequence")


def _one_model_graphs(demo_root: Path, directory: Path) -> Path:
    """A graphs directory serving demo-chat only (so /invocations needs no setting)."""
    directory.mkdir(parents=True, exist_ok=True)
    text = (demo_root / "graphs" / f"{MODEL}.toml").read_text()
    models = (demo_root / "models" / MODEL).resolve()
    (directory / f"{MODEL}.toml").write_text(text.replace(f"../models/{MODEL}", str(models)))
    return directory


@pytest.fixture(scope="module")
def lmi_server(demo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """One model, default settings: /invocations serves it, streams are JSON Lines."""
    base = tmp_path_factory.mktemp("lmi")
    with running_server(_one_model_graphs(demo_root, base / "graphs"), base / "server.log") as running:
        yield running


@pytest.fixture(scope="module")
def sse_server(demo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """Two models, with a settings file choosing the /invocations model and SSE streaming."""
    base = tmp_path_factory.mktemp("lmi-sse")
    settings = base / "appliance.toml"
    settings.write_text(f'invocations_model = "{MODEL}"\nlmi_output_formatter = "sse"\n')
    with running_server(demo_root / "graphs", base / "server.log", "--config", str(settings)) as running:
        yield running


@pytest.fixture(scope="module")
def tgi_server(demo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """TGI-compatible mode, set through the environment."""
    base = tmp_path_factory.mktemp("lmi-tgi")
    with running_server(
        _one_model_graphs(demo_root, base / "graphs"), base / "server.log", env={"APPLIANCE_TGI_COMPAT": "true"}
    ) as running:
        yield running


def _check_token(token: dict) -> None:
    assert isinstance(token["id"], int) and token["id"] >= 0
    assert isinstance(token["text"], str)
    assert isinstance(token["log_prob"], float) and token["log_prob"] <= 0


def _check_result(result: dict, inputs: str, max_new_tokens: int) -> None:
    details = result["details"]
    assert details["finish_reason"] in FINISH_REASONS
    assert details["inputs"] == inputs
    assert 1 <= details["generated_tokens"] <= max_new_tokens
    assert len(details["tokens"]) == details["generated_tokens"]
    for token in details["tokens"]:
        _check_token(token)
    if details["finish_reason"] == "length":
        assert details["generated_tokens"] == max_new_tokens


def _stream_lines(lines: list[dict], inputs: str, max_new_tokens: int) -> None:
    """The seed's stream: a Token object per line, the last also generated_text and details."""
    for line in lines:
        _check_token(line["token"])
    assert all("generated_text" not in line for line in lines[:-1])
    last = lines[-1]
    details = last["details"]
    assert details["finish_reason"] in FINISH_REASONS
    assert details["inputs"] == inputs
    assert details["generated_tokens"] == len(lines) <= max_new_tokens
    assert "tokens" not in details
    assert isinstance(last["generated_text"], str)


# -- rolling batch, non-streaming -----------------------------------------------------------


def test_non_stream_with_details(lmi_server: RunningServer) -> None:
    body = {**SEED_REQUEST, "stream": False}
    response = httpx.post(f"{lmi_server.url}/invocations", json=body, timeout=60)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    result = response.json()
    assert set(result) == {"generated_text", "details"}
    _check_result(result, body["inputs"], 256)


def test_non_stream_without_details_is_generated_text_only(lmi_server: RunningServer) -> None:
    body = {"inputs": "What is Deep Learning?", "parameters": {"max_new_tokens": 8}}
    result = httpx.post(f"{lmi_server.url}/invocations", json=body, timeout=30).json()
    assert set(result) == {"generated_text"}
    assert isinstance(result["generated_text"], str)


def test_default_max_new_tokens_is_30_and_greedy_is_deterministic(lmi_server: RunningServer) -> None:
    body = {"inputs": "Repeatable", "parameters": {"details": True}}
    first = httpx.post(f"{lmi_server.url}/invocations", json=body, timeout=30).json()
    second = httpx.post(f"{lmi_server.url}/invocations", json=body, timeout=30).json()
    assert first["generated_text"] == second["generated_text"]
    assert first["details"]["generated_tokens"] <= 30


def test_every_common_parameter(lmi_server: RunningServer) -> None:
    parameters = {
        "do_sample": True,
        "seed": 7,
        "temperature": 0.8,
        "repetition_penalty": 1.1,
        "top_k": 20,
        "top_p": 0.9,
        "max_new_tokens": 12,
        "details": True,
        "return_full_text": True,
        "stop_sequences": ["zzzz"],
        "decoder_input_details": True,
    }
    body = {"inputs": "What is Deep Learning?", "parameters": parameters}
    result = httpx.post(f"{lmi_server.url}/invocations", json=body, timeout=30).json()
    assert result["generated_text"].startswith("What is Deep Learning?")
    _check_result(result, body["inputs"], 12)
    prefill = result["details"]["prefill"]
    assert prefill and all(isinstance(token["id"], int) and token["log_prob"] is None for token in prefill)
    again = httpx.post(f"{lmi_server.url}/invocations", json=body, timeout=30).json()
    assert again["generated_text"] == result["generated_text"]


def test_stop_sequence_finish_reason(lmi_server: RunningServer) -> None:
    # A one-letter stop string is hit quickly even by a random model.
    body = {"inputs": "What is", "parameters": {"max_new_tokens": 200, "details": True, "stop_sequences": ["e"]}}
    result = httpx.post(f"{lmi_server.url}/invocations", json=body, timeout=30).json()
    assert result["details"]["finish_reason"] == "stop_sequence"
    assert "e" not in result["generated_text"]


def test_vllm_extras_n_and_best_of_sequences(lmi_server: RunningServer) -> None:
    parameters = {
        "do_sample": True,
        "n": 2,
        "max_new_tokens": 6,
        "details": True,
        "min_p": 0.01,
        "presence_penalty": 0.5,
        "frequency_penalty": 0.5,
        "ignore_eos_token": True,
        "logprobs": 1,
    }
    result = httpx.post(
        f"{lmi_server.url}/invocations", json={"inputs": "a", "parameters": parameters}, timeout=30
    ).json()
    _check_result(result, "a", 6)
    (other,) = result["details"]["best_of_sequences"]
    assert other["generated_tokens"] == len(other["tokens"]) == 6
    assert other["finish_reason"] == "length"


def test_beam_search_with_num_beams(lmi_server: RunningServer) -> None:
    body = {"inputs": "beams", "parameters": {"num_beams": 2, "max_new_tokens": 5, "details": True}}
    response = httpx.post(f"{lmi_server.url}/invocations", json=body, timeout=60)
    assert response.status_code == 200, response.text
    _check_result(response.json(), "beams", 5)


def test_predictions_route_names_the_model(server: RunningServer) -> None:
    body = {"inputs": "Hello", "parameters": {"max_new_tokens": 4, "details": True}}
    result = httpx.post(f"{server.url}/predictions/{MODEL}", json=body, timeout=30).json()
    _check_result(result, "Hello", 4)


# -- dynamic batch: a list of inputs --------------------------------------------------------


def test_list_inputs_answer_one_result_each(lmi_server: RunningServer) -> None:
    inputs = ["What is Deep Learning", "How many ways can I peel an orange"]
    body = {"inputs": inputs, "parameters": {"do_sample": True, "max_new_tokens": 8}}
    results = httpx.post(f"{lmi_server.url}/invocations", json=body, timeout=30).json()
    assert isinstance(results, list) and len(results) == 2
    assert all(set(result) == {"generated_text"} for result in results)
    detailed = httpx.post(
        f"{lmi_server.url}/invocations",
        json={"inputs": inputs, "parameters": {"max_new_tokens": 8, "details": True}},
        timeout=30,
    ).json()
    for prompt, result in zip(inputs, detailed):
        _check_result(result, prompt, 8)


# -- streaming ------------------------------------------------------------------------------


def test_stream_is_json_lines(lmi_server: RunningServer) -> None:
    with httpx.stream("POST", f"{lmi_server.url}/invocations", json=SEED_REQUEST, timeout=60) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/jsonlines")
        lines = [json.loads(line) for line in response.iter_lines() if line]
    _stream_lines(lines, SEED_REQUEST["inputs"], 256)


def test_stream_without_details_ends_with_generated_text(lmi_server: RunningServer) -> None:
    body = {"inputs": "Stream me", "parameters": {"max_new_tokens": 5}, "stream": True}
    with httpx.stream("POST", f"{lmi_server.url}/invocations", json=body, timeout=30) as response:
        lines = [json.loads(line) for line in response.iter_lines() if line]
    assert len(lines) <= 5
    assert "details" not in lines[-1] and isinstance(lines[-1]["generated_text"], str)


def test_stream_as_sse_when_configured(sse_server: RunningServer) -> None:
    with httpx.stream("POST", f"{sse_server.url}/invocations", json=SEED_REQUEST, timeout=60) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line for line in response.iter_lines() if line]
    assert all(event.startswith("data:") for event in events)
    assert "data: [DONE]" not in events
    _stream_lines([json.loads(event[5:]) for event in events], SEED_REQUEST["inputs"], 256)


# -- TGI-compatible mode --------------------------------------------------------------------


def test_tgi_non_stream_is_an_array(tgi_server: RunningServer) -> None:
    body = {**SEED_REQUEST, "stream": False}
    results = httpx.post(f"{tgi_server.url}/invocations", json=body, timeout=60).json()
    assert isinstance(results, list) and len(results) == 1
    _check_result(results[0], body["inputs"], 256)


def test_tgi_stream_is_sse(tgi_server: RunningServer) -> None:
    with httpx.stream("POST", f"{tgi_server.url}/invocations", json=SEED_REQUEST, timeout=60) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line for line in response.iter_lines() if line]
    _stream_lines([json.loads(event.removeprefix("data:")) for event in events], SEED_REQUEST["inputs"], 256)


# -- messages: a chat completions request on /invocations -----------------------------------


def test_messages_answer_a_chat_completion(lmi_server: RunningServer) -> None:
    body = {
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is deep learning?"},
        ],
        "max_tokens": 8,
        "logprobs": True,
        "top_logprobs": 0,
        "seed": 1,
        "user": "test",
        "ignore_eos": False,
    }
    reply = httpx.post(f"{lmi_server.url}/invocations", json=body, timeout=30).json()
    assert reply["id"].startswith("chatcmpl-") and reply["object"] == "chat.completion"
    assert isinstance(reply["created"], int)
    (choice,) = reply["choices"]
    assert choice["index"] == 0 and choice["message"]["role"] == "assistant"
    content = choice["logprobs"]["content"]
    assert len(content) == reply["usage"]["completion_tokens"]
    assert all({"token", "logprob", "bytes", "top_logprobs"} <= set(entry) for entry in content)
    usage = reply["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_messages_stream_as_json_lines(lmi_server: RunningServer) -> None:
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6, "stream": True, "logprobs": True}
    with httpx.stream("POST", f"{lmi_server.url}/invocations", json=body, timeout=30) as response:
        assert response.headers["content-type"].startswith("application/jsonlines")
        chunks = [json.loads(line) for line in response.iter_lines() if line]
    assert len({chunk["id"] for chunk in chunks}) == 1
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
    assert any(chunk["choices"][0].get("logprobs") for chunk in chunks)


def test_messages_errors_keep_the_openai_envelope(lmi_server: RunningServer) -> None:
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 0}
    response = httpx.post(f"{lmi_server.url}/invocations", json=body, timeout=30)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "max_tokens"


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"parameters": {"max_new_tokens": 4}},
        {"inputs": 3},
        {"inputs": "x", "parameters": {"max_new_tokens": "many"}},
        {"inputs": "x", "parameters": {"no_such_parameter": 1}},
    ],
)
def test_validation_errors(lmi_server: RunningServer, body: dict) -> None:
    response = httpx.post(f"{lmi_server.url}/invocations", json=body, timeout=30)
    assert response.status_code == 400
    payload = response.json()
    assert set(payload) == {"error", "code"}
    assert payload["code"] == 400 and isinstance(payload["error"], str)


def test_invocations_needs_the_setting_with_two_models(server: RunningServer) -> None:
    response = httpx.post(f"{server.url}/invocations", json={"inputs": "x"}, timeout=30)
    assert response.status_code == 400
    assert "invocations_model" in response.json()["error"]


def test_a_chat_body_names_its_model_among_several(server: RunningServer) -> None:
    # LMI's chat schema makes `model` optional: given, it chooses; absent, the setting must.
    chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    for name in ("demo-chat", "demo-vision"):
        response = httpx.post(f"{server.url}/invocations", json={**chat, "model": name}, timeout=60)
        assert response.status_code == 200, response.text
        assert response.json()["model"] == name
    absent = httpx.post(f"{server.url}/invocations", json=chat, timeout=30)
    assert absent.status_code == 400 and absent.json()["error"]["code"] == "invocations_model_not_set"
    unknown = httpx.post(f"{server.url}/invocations", json={**chat, "model": "nope"}, timeout=30)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"


def test_unknown_prediction_model_is_404(server: RunningServer) -> None:
    response = httpx.post(f"{server.url}/predictions/nope", json={"inputs": "x"}, timeout=30)
    assert response.status_code == 404
    assert response.json()["code"] == 404


@pytest.mark.parametrize(
    ("parameters", "stream"),
    [
        ({"max_new_tokens": 5000}, False),
        ({"typical_p": 0.5}, False),
        ({"logprobs": 5}, False),
        ({"n": 2, "do_sample": True}, True),
    ],
)
def test_bad_generation_parameters(lmi_server: RunningServer, parameters: dict, stream: bool) -> None:
    body = {"inputs": "x", "parameters": parameters, "stream": stream}
    response = httpx.post(f"{lmi_server.url}/invocations", json=body, timeout=30)
    assert response.status_code == 400
    payload = response.json()
    assert payload["generated_text"] == ""
    assert payload["details"] == {"finish_reason": "error", "generated_tokens": None, "inputs": None, "tokens": None}
    assert payload["error"]


def _engine_pid(server: RunningServer) -> int:
    """The engine process: the server's multiprocessing spawn child (not its resource tracker)."""
    pid = server.process.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    (engine,) = [child for child in children if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()]
    return int(engine)


def test_error_during_stream_is_an_error_line(demo_root: Path, tmp_path: Path) -> None:
    running = start_server(_one_model_graphs(demo_root, tmp_path / "graphs"), tmp_path / "server.log")
    try:
        body = {
            "inputs": "A long story",
            "parameters": {"max_new_tokens": 1024, "ignore_eos_token": True},
            "stream": True,
        }
        with httpx.stream("POST", f"{running.url}/invocations", json=body, timeout=60) as response:
            assert response.status_code == 200
            lines = response.iter_lines()
            json.loads(next(lines))
            # The engine process dies mid-generation (as on an out-of-memory kill).
            os.kill(_engine_pid(running), signal.SIGKILL)
            rest = [json.loads(line) for line in lines if line]
        last = rest[-1]
        assert last["token"] == {"id": -1, "text": "", "log_prob": -1, "special_token": True}
        assert last["generated_text"] == ""
        assert last["details"] == {"finish_reason": "error", "generated_tokens": None, "inputs": None}
    finally:
        time.sleep(0.1)
        stop_server(running)
