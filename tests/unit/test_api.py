"""The HTTP layer against a deterministic in-process engine: shapes, errors, admission, cancels."""

from __future__ import annotations

import asyncio
import json

import pytest
from litestar.testing import TestClient

from appliance.engine.messages import SamplingParams, TextPrompt
from appliance.errors import Overloaded
from tests.apps import app_client, chat
from tests.fakes import FakeEngineClient, fake_graph


@pytest.fixture
def engine() -> FakeEngineClient:
    return FakeEngineClient()


@pytest.fixture
def client(engine: FakeEngineClient):
    with app_client(engine, max_body_size=4096) as test_client:
        yield test_client


def test_chat_completion_shape(client: TestClient) -> None:
    response = chat(client, max_tokens=2)
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": " three two"},
            "finish_reason": "length",
            "logprobs": None,
        }
    ]
    assert body["usage"] == {"completion_tokens": 2, "prompt_tokens": 3, "total_tokens": 5}


def test_stream_shape(client: TestClient) -> None:
    response = chat(client, stream=True, stream_options={"include_usage": True})
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [e.removeprefix("data: ") for e in response.text.split("\n\n") if e]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert len({c["id"] for c in chunks}) == 1
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == " three two one"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 6


def test_sampling_parameters_reach_the_engine(client: TestClient, engine: FakeEngineClient) -> None:
    chat(client, temperature=0.5, top_p=0.8, seed=42, stop="x", max_completion_tokens=7)
    params = engine.submitted[-1].params
    assert (params.temperature, params.top_p, params.seed, params.stop, params.max_new_tokens) == (
        0.5,
        0.8,
        42,
        ("x",),
        7,
    )


def test_engine_rejection_is_400(client: TestClient) -> None:
    response = client.post(
        "/v1/chat/completions", json={"model": "fake", "messages": [{"role": "user", "content": "w " * 100}]}
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "context_length_exceeded"


def test_admission_limit_and_cancel() -> None:
    async def scenario() -> None:
        engine = FakeEngineClient(fake_graph(max_queued_requests=1))
        engine.hold = True
        engine.start()
        params = SamplingParams(max_new_tokens=2)
        stream = await engine.submit(TextPrompt(text="a"), params)
        with pytest.raises(Overloaded) as info:
            await engine.submit(TextPrompt(text="b"), params)
        assert info.value.status == 503 and info.value.retry_after == 1
        stream.cancel()
        await asyncio.sleep(0)
        assert engine.cancelled == [stream.request_id]
        assert engine.in_flight == 0
        engine.hold = False
        again = await engine.submit(TextPrompt(text="b"), params)
        assert [event.text async for event in again][0] == " b"

    asyncio.run(scenario())


def test_not_ready_is_503(engine: FakeEngineClient, client: TestClient) -> None:
    engine.state = "restarting"
    response = chat(client)
    assert response.status_code == 503
    assert response.headers["retry-after"]
    assert client.get("/health").status_code == 503
    engine.state = "ready"
    assert client.get("/health").status_code == 200


def test_body_limit_is_413(client: TestClient) -> None:
    response = client.post("/v1/chat/completions", content=b"x" * 5000)
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_completions_list(client: TestClient) -> None:
    response = client.post("/v3/completions", json={"model": "fake", "prompt": ["a b", "c d e"]})
    body = response.json()
    assert [c["text"] for c in body["choices"]] == [" b a", " e d c"]
    assert body["usage"]["prompt_tokens"] == 5


def test_stats_route(client: TestClient) -> None:
    body = client.get("/stats").json()
    assert body["models"]["fake"]["state"] == "ready"
    assert set(body["event_loop_lag_ms"]) == {"samples", "p50", "p99", "max"}


def test_health_says_no_models_are_served() -> None:
    with app_client(max_body_size=4096) as empty:
        response = empty.get("/health")
    assert response.status_code == 503
    assert response.json()["status"] == "no_models" and response.json()["models"] == {}
    assert "reload" in response.json()["message"]
