"""Floats the engine reads in 32 bits (issue 49, M3): a temperature below 1e-5 is greedy decoding,
any other float that would reach the engine as 0, a denormal or infinity is a 400 naming the field,
in every dialect that samples (OpenAI chat and completions, Responses, Anthropic Messages, LMI,
Elasticsearch)."""

from __future__ import annotations

import pytest

from appliance.errors import InvalidRequest
from appliance.service.engine_floats import GREEDY_BELOW, decoding_temperature, engine_float
from tests.apps import USER, app_client, chat
from tests.fakes import FakeEngineClient


@pytest.mark.parametrize(
    ("temperature", "decoded"), [(0.0, 0.0), (1e-300, 0.0), (9.9e-6, 0.0), (1e-5, 1e-5), (0.7, 0.7)]
)
def test_a_temperature_below_the_threshold_is_greedy(temperature: float, decoded: float) -> None:
    assert decoding_temperature(temperature) == decoded
    assert GREEDY_BELOW == 1e-5


@pytest.mark.parametrize("value", [1e-300, -1e-300, 1e-40, 5e-45, 3.5e38, -1e300, float("inf"), float("nan")])
def test_a_float_no_float32_holds_is_refused_naming_it(value: float) -> None:
    with pytest.raises(InvalidRequest) as refused:
        engine_float(value, "top_p")
    assert refused.value.param == "top_p" and "32-bit float" in refused.value.message


@pytest.mark.parametrize("value", [None, 0.0, -0.0, 1.2e-38, 0.5, -2.0, 3.4e38])
def test_a_float_a_float32_holds_passes(value: float | None) -> None:
    assert engine_float(value, "top_p") == value


@pytest.fixture
def engine() -> FakeEngineClient:
    return FakeEngineClient()


TINY = [
    ("top_p", 1e-300),
    ("top_p", 1e-40),
    ("min_p", 1e-300),
    ("frequency_penalty", 1e-300),
    ("presence_penalty", -1e-45),
    ("repetition_penalty", 1e-300),
    ("repetition_penalty", 1e-40),
    ("assistant_confidence_threshold", 1e-300),
]


@pytest.mark.parametrize(("field", "value"), TINY)
def test_chat_refuses_each_field(engine: FakeEngineClient, field: str, value: float) -> None:
    with app_client(engine) as client:
        answer = chat(client, temperature=0.5, **{field: value})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == field and "32-bit float" in answer.json()["error"]["message"]
    assert not engine.submitted


def test_length_penalty_beyond_float32_is_refused(engine: FakeEngineClient) -> None:
    with app_client(engine) as client:
        answer = chat(client, best_of=2, length_penalty=1e300)
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "length_penalty", answer.text


@pytest.mark.parametrize("temperature", [1e-300, 1e-40, 9e-6])
def test_chat_and_completions_decode_greedily(engine: FakeEngineClient, temperature: float) -> None:
    with app_client(engine) as client:
        assert chat(client, temperature=temperature).status_code == 200
        assert (
            client.post(
                "/v1/completions", json={"model": "fake", "prompt": "one two", "temperature": temperature}
            ).status_code
            == 200
        )
        # Greedy: n > 1 is refused as at temperature 0; beam search takes it as 0.
        refused = chat(client, temperature=temperature, n=2)
        assert refused.status_code == 400 and refused.json()["error"]["param"] == "n"
        assert chat(client, temperature=temperature, best_of=2).status_code == 200
    assert [submitted.params.temperature for submitted in engine.submitted] == [0.0, 0.0, 0.0]


def test_completions_refuse_a_float_no_float32_holds(engine: FakeEngineClient) -> None:
    with app_client(engine) as client:
        answer = client.post("/v1/completions", json={"model": "fake", "prompt": "one", "top_p": 1e-300})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "top_p"


def test_responses(engine: FakeEngineClient) -> None:
    with app_client(engine) as client:
        body = {"model": "fake", "input": "one two", "store": False}
        refused = client.post("/v1/responses", json={**body, "top_p": 1e-300})
        assert refused.status_code == 400 and refused.json()["error"]["param"] == "top_p", refused.text
        refused = client.post("/v1/responses", json={**body, "repetition_penalty": 1e-40})
        assert refused.status_code == 400 and refused.json()["error"]["param"] == "repetition_penalty", refused.text
        assert client.post("/v1/responses", json={**body, "temperature": 1e-300}).status_code == 200
    assert engine.submitted[-1].params.temperature == 0.0


def test_anthropic_messages(engine: FakeEngineClient) -> None:
    with app_client(engine) as client:
        body = {"model": "fake", "max_tokens": 8, "messages": USER}
        refused = client.post("/v1/messages", json={**body, "top_p": 1e-300})
        assert refused.status_code == 400 and refused.json()["type"] == "error", refused.text
        assert "top_p" in refused.json()["error"]["message"]
        assert client.post("/v1/messages", json={**body, "temperature": 1e-300}).status_code == 200
    assert engine.submitted[-1].params.temperature == 0.0


def test_lmi_invocations(engine: FakeEngineClient) -> None:
    with app_client(engine) as client:
        sampled = {"do_sample": True, "max_new_tokens": 4}
        refused = client.post(
            "/invocations", json={"inputs": "one two", "parameters": {**sampled, "repetition_penalty": 1e-40}}
        )
        assert refused.status_code == 400 and "repetition_penalty" in refused.text, refused.text
        answer = client.post(
            "/invocations", json={"inputs": "one two", "parameters": {**sampled, "temperature": 1e-300}}
        )
        assert answer.status_code == 200, answer.text
    assert engine.submitted[-1].params.temperature == 0.0


def test_elasticsearch(engine: FakeEngineClient) -> None:
    with app_client(engine) as client:
        answer = client.post(
            "/_inference/chat_completion/fake/_stream", json={"model": "fake", "messages": USER, "top_p": 1e-300}
        )
    assert answer.status_code == 400 and "top_p" in answer.text, answer.text
