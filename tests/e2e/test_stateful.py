"""The stateful pipeline (what NPU graphs run), exercised on CPU with `pipeline = "LM"` / `"VLM"`.

One server serves the demo models twice: `sf-chat` / `sf-vision` through the stateful
LLMPipeline / VLMPipeline, and demo-chat / demo-vision through continuous batching. Both run f32,
so greedy outputs must be the same token for token; what differs is one request at a time (a FIFO
queue), the prompt limit MAX_PROMPT_LEN, one image per request, and the refusals of what the
stateful pipeline cannot do.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest

from tests.conftest import RunningServer, copy_demo_graphs, running_server
from tests.images import data_url, encode, noise

MAX_PROMPT_LEN = 400
MESSAGES = [{"role": "user", "content": "Tell me about the license"}]
IMAGE = {"type": "image_url", "image_url": {"url": data_url(encode(noise(40, 30, seed=3)))}}

STATEFUL_CHAT = f"""
name = "sf-chat"
model_path = "{{models}}/demo-chat"
pipeline = "LM"
tool_parser = "hermes"

[limits]
max_tokens_limit = 2000

[plugin_config]
INFERENCE_PRECISION_HINT = "f32"
MAX_PROMPT_LEN = {MAX_PROMPT_LEN}
"""

STATEFUL_VISION = """
name = "sf-vision"
model_path = "{models}/demo-vision"
pipeline = "VLM"

[plugin_config]
INFERENCE_PRECISION_HINT = "f32"
"""


@pytest.fixture(scope="module")
def stateful_server(demo_root: Path, tmp_path_factory: pytest.TempPathFactory):
    graphs = copy_demo_graphs(demo_root, tmp_path_factory.mktemp("stateful-graphs"), ["demo-chat", "demo-vision"])
    models = (demo_root / "models").resolve()
    (graphs / "sf-chat.toml").write_text(STATEFUL_CHAT.format(models=models))
    (graphs / "sf-vision.toml").write_text(STATEFUL_VISION.format(models=models))
    with running_server(graphs, tmp_path_factory.mktemp("stateful-server") / "server.log") as running:
        yield running


@pytest.fixture(scope="module")
def client(stateful_server: RunningServer) -> openai.OpenAI:
    return stateful_server.client()


def _answer(client: openai.OpenAI, model: str, messages=MESSAGES, **extra: object):
    return client.chat.completions.create(model=model, messages=messages, temperature=0, **extra)


def _streamed(client: openai.OpenAI, model: str, **extra: object) -> str:
    stream = client.chat.completions.create(model=model, messages=MESSAGES, temperature=0, stream=True, **extra)
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


def test_health_names_the_pipelines(stateful_server: RunningServer) -> None:
    models = stateful_server.health()["models"]
    assert models["sf-chat"]["pipeline"] == "LM"
    assert models["sf-vision"]["pipeline"] == "VLM"
    assert models["demo-chat"]["pipeline"] == "LM_CB"


def _cut(text: str, stops: list[str]) -> str:
    found = [text.index(stop) for stop in stops if stop in text]
    return text[: min(found)] if found else text


@pytest.mark.parametrize("model", ["sf-chat", "demo-chat"])
def test_greedy_answers_follow_the_request_on_both_pipelines(client: openai.OpenAI, model: str) -> None:
    """The same rules on the stateful and the batching pipeline. (Their greedy texts are not
    compared with each other: on CPUs with AVX-512 the two pipelines' kernels round differently,
    and the random model's near-tied logits then pick other tokens after a few steps.)"""
    full = _answer(client, model, max_tokens=40)
    text = full.choices[0].message.content
    assert full.choices[0].finish_reason == "length" and full.usage.completion_tokens == 40
    assert _streamed(client, model, max_tokens=40) == text
    longer = _answer(client, model, max_tokens=60, extra_body={"ignore_eos": True})
    assert longer.usage.completion_tokens == 60 and longer.choices[0].message.content.startswith(text)
    for stops in (["e"], ["license", "ab"], [text[5:8]]):
        cut = _answer(client, model, max_tokens=40, stop=stops)
        expected = _cut(text, stops)
        assert cut.choices[0].message.content == expected, stops
        assert cut.choices[0].finish_reason == ("stop" if expected != text else "length")
    stopped = _answer(client, model, max_tokens=40, extra_body={"stop_token_ids": [7]})
    if stopped.choices[0].finish_reason == "length":
        assert stopped.choices[0].message.content == text
    else:
        assert stopped.choices[0].finish_reason == "stop" and stopped.usage.completion_tokens < 40
    assert text.startswith(stopped.choices[0].message.content)


def test_stop_string_ends_generation_at_its_first_occurrence(client: openai.OpenAI) -> None:
    full = _answer(client, "sf-chat", max_tokens=40).choices[0].message.content
    stop = full[12:15]
    cut = _answer(client, "sf-chat", max_tokens=40, stop=[stop])
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].message.content == full[: full.index(stop)]
    assert cut.usage.completion_tokens < 40
    # A stream shows the stop string (OVMS's default) and nothing of it leaks before the match.
    assert _streamed(client, "sf-chat", max_tokens=40, stop=[stop]).startswith(full[: full.index(stop)] + stop)


def test_seeded_sampling_is_reproducible(client: openai.OpenAI) -> None:
    def sample(seed: int) -> str:
        reply = client.chat.completions.create(
            model="sf-chat", messages=MESSAGES, max_tokens=24, temperature=1.0, seed=seed
        )
        return reply.choices[0].message.content

    assert sample(11) == sample(11)
    assert len({sample(11), sample(12), sample(13)}) > 1


def test_structured_output(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model="sf-chat",
        messages=MESSAGES,
        max_tokens=20,
        seed=1,
        extra_body={"structured_outputs": {"regex": "^[a-c]{3,6}$"}},
    )
    content = reply.choices[0].message.content
    assert 3 <= len(content) <= 6 and set(content) <= set("abc"), content


def test_forced_tool_call_equals_continuous_batching(client: openai.OpenAI) -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 12}},
                "required": ["city"],
            },
        },
    }
    question = [{"role": "user", "content": "What is the weather in Oslo?"}]
    calls = [
        _answer(client, model, question, tools=[tool], tool_choice="required", parallel_tool_calls=False, max_tokens=80)
        for model in ("sf-chat", "demo-chat")
    ]
    assert [reply.choices[0].finish_reason for reply in calls] == ["tool_calls", "tool_calls"]
    (stateful,), (batched,) = (reply.choices[0].message.tool_calls for reply in calls)
    assert stateful.function.name == "get_weather"
    assert json.loads(stateful.function.arguments) == json.loads(batched.function.arguments)


def test_prompt_above_max_prompt_len_is_refused(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model="sf-chat", messages=[{"role": "user", "content": "word " * 500}], max_tokens=4
        )
    assert info.value.code == "context_length_exceeded"
    assert info.value.param == "messages"
    assert f"limited to {MAX_PROMPT_LEN} tokens" in info.value.message
    # The same prompt is fine on continuous batching, which has no such limit.
    assert _answer(client, "demo-chat", [{"role": "user", "content": "word " * 500}], max_tokens=4).choices


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"n": 2, "temperature": 1.0}, "n"),
        ({"extra_body": {"best_of": 2}}, "best_of"),
        ({"logprobs": True}, "logprobs"),
        ({"extra_body": {"num_assistant_tokens": 3}}, "num_assistant_tokens"),
    ],
)
def test_what_the_stateful_pipeline_cannot_do_is_refused(client: openai.OpenAI, extra: dict, param: str) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="sf-chat", messages=MESSAGES, max_tokens=4, **extra)
    assert info.value.param == param
    assert info.value.code == "unsupported_parameter"


def test_requests_run_one_at_a_time(stateful_server: RunningServer, client: openai.OpenAI) -> None:
    """A request sent while another generates waits for it: with 1,000 tokens each, the second
    finishes about one whole generation after the first (continuous batching would run both in
    the same steps and finish them together)."""
    body = {
        "model": "sf-chat",
        "messages": MESSAGES,
        "max_tokens": 1000,
        "temperature": 0,
        "ignore_eos": True,
    }
    second: dict[str, object] = {}

    def send_second() -> None:
        response = httpx.post(f"{stateful_server.url}/v1/chat/completions", json=body, timeout=60)
        second["done"] = time.monotonic()
        second["response"] = response.json()

    with httpx.stream(
        "POST", f"{stateful_server.url}/v1/chat/completions", json={**body, "stream": True}, timeout=60
    ) as response:
        lines = response.iter_lines()
        next(line for line in lines if line.startswith("data:"))
        first_started = time.monotonic()
        thread = threading.Thread(target=send_second)
        thread.start()
        for _ in lines:
            pass
        first_done = time.monotonic()
    thread.join(60)
    assert second["response"]["usage"]["completion_tokens"] == 1000
    assert second["done"] - first_done > 0.4 * (first_done - first_started)


def test_cancelled_requests_stop_generating(stateful_server: RunningServer) -> None:
    """A stream the client leaves stops at its next token, and a request whose client left while
    it was queued never runs: the engine generates far fewer tokens than the two asked for. The
    engine is frozen (SIGSTOP) while both clients leave, so neither can finish first."""
    stateful_server.wait_idle("sf-chat")
    time.sleep(0.6)  # the engine reports its token count every 0.5 s
    status = stateful_server.model_status("sf-chat")
    before, pid = status["steps"], status["pid"]
    body = {"model": "sf-chat", "messages": MESSAGES, "max_tokens": 1900, "ignore_eos": True, "temperature": 0}
    try:
        with httpx.stream(
            "POST", f"{stateful_server.url}/v1/chat/completions", json={**body, "stream": True}, timeout=30
        ) as response:
            next(line for line in response.iter_lines() if line.startswith("data:"))
            os.kill(pid, signal.SIGSTOP)
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(f"{stateful_server.url}/v1/chat/completions", json=body, timeout=0.3)
        deadline = time.monotonic() + 5
        while stateful_server.model_status("sf-chat")["in_flight"] and time.monotonic() < deadline:
            time.sleep(0.02)  # until the server has cancelled both
    finally:
        os.kill(pid, signal.SIGCONT)
    status = stateful_server.wait_idle("sf-chat")
    assert status["in_flight"] == 0 and status["running"] == 0, status
    time.sleep(0.6)
    generated = stateful_server.model_status("sf-chat")["steps"] - before
    assert 0 < generated < 1900


@pytest.mark.parametrize("turns", [1, 3])
def test_vision_answers_equal_continuous_batching(client: openai.OpenAI, turns: int) -> None:
    messages = [{"role": "user", "content": [IMAGE, {"type": "text", "text": "What is in the picture?"}]}]
    if turns == 3:  # the image stays in an earlier turn
        messages += [{"role": "assistant", "content": "A pattern."}, {"role": "user", "content": "Which colours?"}]
    stateful = _answer(client, "sf-vision", messages, max_tokens=16)
    batched = _answer(client, "demo-vision", messages, max_tokens=16)
    assert stateful.choices[0].message.content == batched.choices[0].message.content
    assert stateful.usage.prompt_tokens == batched.usage.prompt_tokens > 20  # the image's tokens count
    text_only = _answer(client, "sf-vision", max_tokens=8)
    assert text_only.usage.completion_tokens == 8 or text_only.choices[0].finish_reason == "stop"


def test_one_image_per_request(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": [IMAGE, IMAGE, {"type": "text", "text": "Compare them"}]}]
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="sf-vision", messages=messages, max_tokens=4)
    assert info.value.code == "too_many_images"
    assert "one image per request" in info.value.message
    assert client.chat.completions.create(model="demo-vision", messages=messages, max_tokens=4).choices


def test_still_serving_after_refusals_and_cancellations(client: openai.OpenAI) -> None:
    reply = _answer(client, "sf-chat", max_tokens=5, extra_body={"ignore_eos": True})
    assert reply.usage.completion_tokens == 5 and reply.choices[0].finish_reason == "length"


def test_lmi_invocations_equal_continuous_batching_without_log_probabilities(stateful_server: RunningServer) -> None:
    def invoke(model: str, stream: bool = False) -> httpx.Response:
        body = {"inputs": "The license", "parameters": {"max_new_tokens": 12, "details": True}, "stream": stream}
        return httpx.post(f"{stateful_server.url}/predictions/{model}", json=body, timeout=30)

    stateful, batched = invoke("sf-chat").json(), invoke("demo-chat").json()
    assert stateful["generated_text"] == batched["generated_text"]
    details, reference = stateful["details"], batched["details"]
    assert (details["finish_reason"], details["generated_tokens"]) == (
        reference["finish_reason"],
        reference["generated_tokens"],
    )
    assert [token["id"] for token in details["tokens"]] == [token["id"] for token in reference["tokens"]]
    assert all(token["log_prob"] is None for token in details["tokens"])
    assert all(isinstance(token["log_prob"], float) for token in reference["tokens"])
    lines = [json.loads(line) for line in invoke("sf-chat", stream=True).text.splitlines() if line.strip()]
    assert [line["token"]["id"] for line in lines] == [token["id"] for token in details["tokens"]]
    assert lines[-1]["generated_text"] == stateful["generated_text"]
