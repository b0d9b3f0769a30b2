"""Speculative decoding (demo-spec: demo-chat + a draft) and prompt lookup (demo-lookup) end to end.

One server serves both demo graphs and `demo-plain`: demo-chat's model with the same f32 settings
and neither, the reference greedy output must equal.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import openai
import pytest

from tests.conftest import RunningServer, copy_demo_graphs, running_server

MESSAGES = [{"role": "user", "content": "the license the license: tell me about the license"}]


@pytest.fixture(scope="module")
def spec_server(demo_root: Path, tmp_path_factory: pytest.TempPathFactory):
    graphs = copy_demo_graphs(demo_root, tmp_path_factory.mktemp("spec-graphs"), ["demo-spec", "demo-lookup"])
    plain = (graphs / "demo-spec.toml").read_text()
    plain = plain.replace('name = "demo-spec"', 'name = "demo-plain"')
    plain = re.sub(r"^draft_model_path = .*\n", "", plain, flags=re.M)
    (graphs / "demo-plain.toml").write_text(plain)
    with running_server(graphs, tmp_path_factory.mktemp("spec-server") / "server.log") as running:
        yield running


@pytest.fixture(scope="module")
def client(spec_server: RunningServer) -> openai.OpenAI:
    return spec_server.client()


def _greedy(client: openai.OpenAI, model: str, **extra: object) -> str:
    response = client.chat.completions.create(
        model=model, messages=MESSAGES, temperature=0, max_tokens=48, extra_body={"ignore_eos": True, **extra}
    )
    assert response.choices[0].finish_reason == "length"
    assert response.usage.completion_tokens == 48
    return response.choices[0].message.content


@pytest.mark.parametrize(
    ("model", "extra"),
    [
        ("demo-spec", {}),
        ("demo-spec", {"num_assistant_tokens": 2}),
        ("demo-spec", {"num_assistant_tokens": 7}),
        ("demo-spec", {"assistant_confidence_threshold": 0.3}),
        ("demo-lookup", {}),
        ("demo-lookup", {"num_assistant_tokens": 3, "max_ngram_size": 2}),
    ],
)
def test_greedy_output_equals_plain_greedy(client: openai.OpenAI, model: str, extra: dict) -> None:
    assert _greedy(client, model, **extra) == _greedy(client, "demo-plain")


@pytest.mark.parametrize("model", ["demo-spec", "demo-lookup"])
@pytest.mark.parametrize("extra", [{}, {"num_assistant_tokens": 3}])
def test_chat_stream_and_non_stream(client: openai.OpenAI, model: str, extra: dict) -> None:
    whole = client.chat.completions.create(
        model=model, messages=MESSAGES, max_tokens=24, temperature=0, extra_body=extra
    )
    assert whole.choices[0].message.content
    chunks = list(
        client.chat.completions.create(
            model=model,
            messages=MESSAGES,
            max_tokens=24,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
            extra_body=extra,
        )
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == whole.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


@pytest.mark.parametrize("model", ["demo-spec", "demo-lookup"])
def test_sampling_inside_the_envelope_never_fails(client: openai.OpenAI, model: str) -> None:
    for seed in range(6):
        response = client.chat.completions.create(
            model=model,
            messages=MESSAGES,
            temperature=1.0,
            top_p=0.9,
            seed=seed,
            max_tokens=64,
            extra_body={"num_assistant_tokens": 4 + 2 * seed},
        )
        assert response.choices[0].finish_reason in ("stop", "length")
    assert _greedy(client, model) == _greedy(client, "demo-plain")


@pytest.mark.parametrize(
    ("model", "extra", "param"),
    [
        ("demo-plain", {"num_assistant_tokens": 2}, "num_assistant_tokens"),
        ("demo-plain", {"max_ngram_size": 2}, "max_ngram_size"),
        (
            "demo-spec",
            {"num_assistant_tokens": 2, "assistant_confidence_threshold": 0.5},
            "assistant_confidence_threshold",
        ),
        ("demo-spec", {"max_ngram_size": 2}, "max_ngram_size"),
        ("demo-spec", {"n": 2, "temperature": 1.0}, "n"),
        ("demo-spec", {"best_of": 2}, "best_of"),
        ("demo-lookup", {"assistant_confidence_threshold": 0.5}, "assistant_confidence_threshold"),
        ("demo-lookup", {"n": 2, "temperature": 1.0}, "n"),
        ("demo-spec", {"num_assistant_tokens": 0}, None),
        ("demo-spec", {"num_assistant_tokens": 17}, None),
    ],
)
def test_refused_with_400(spec_server: RunningServer, model: str, extra: dict, param: str | None) -> None:
    response = httpx.post(
        f"{spec_server.url}/v1/chat/completions",
        json={"model": model, "messages": MESSAGES, "max_tokens": 8, **extra},
        timeout=30,
    )
    assert response.status_code == 400, response.text
    if param is not None:
        assert response.json()["error"]["param"] == param


def test_acceptance_statistics(client: openai.OpenAI, spec_server: RunningServer) -> None:
    for model in ("demo-spec", "demo-lookup"):
        _greedy(client, model)
    deadline = time.monotonic() + 10
    while True:  # the engines report statistics every half second
        stats = httpx.get(f"{spec_server.url}/stats", timeout=5).json()["models"]
        counted = all(stats[m]["speculative"]["draft_tokens"] for m in ("demo-spec", "demo-lookup"))
        if counted or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for model, mode in (("demo-spec", "draft"), ("demo-lookup", "lookup")):
        spec = stats[model]["speculative"]
        assert spec["mode"] == mode
        assert spec["draft_tokens"] > 0
        assert 0 <= spec["accepted_tokens"] <= spec["draft_tokens"]
        assert 0.0 <= spec["acceptance_rate"] <= 1.0
    assert "speculative" not in stats["demo-plain"]
    metrics = httpx.get(f"{spec_server.url}/metrics", timeout=5).text
    for name in ("appliance_spec_draft_tokens_total", "appliance_spec_accepted_tokens_total"):
        assert re.search(rf'^{name}{{model="demo-spec"}} [1-9]', metrics, flags=re.M), name
    assert 'appliance_spec_acceptance_rate{model="demo-lookup"}' in metrics


def test_engine_survives_a_failing_step(demo_root: Path) -> None:
    """A request the engine fails inside step() (assisted generation with neither
    num_assistant_tokens nor the threshold: the service never sends one) ends with an error, and
    the engine serves the next request on a fresh pipeline."""
    from appliance.engine.messages import Finished, SamplingParams, Submit, TextPrompt
    from appliance.engine.worker.batching import BatchingEngine
    from appliance.graphfiles import load_graph

    engine = BatchingEngine(load_graph(demo_root / "graphs" / "demo-spec.toml"))

    def run(request_id: int, assistant_tokens: int) -> list[Finished]:
        events: list = []
        params = SamplingParams(
            max_new_tokens=16, temperature=0.0, ignore_eos=True, num_assistant_tokens=assistant_tokens
        )
        engine._handle(Submit(request_id=request_id, prompt=TextPrompt(text="the license"), params=params), events)
        while engine.active:
            if engine._step(events):
                engine._collect(events)
        return [event for event in events if isinstance(event, Finished)]

    (failed,) = run(1, 0)
    assert failed.finish_reason == "error" and "the engine failed" in failed.error
    (served,) = run(2, 4)
    assert (served.finish_reason, served.completion_tokens) == ("length", 16)
    assert engine.draft_tokens > 0
