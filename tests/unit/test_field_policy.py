"""OpenAI fields the appliance does not honour: informative ones accepted without effect, refused
ones a 400 naming them (unless neutral), truly unknown ones still `unknown_parameter`."""

from __future__ import annotations

import functools
import logging

import pytest
from litestar.testing import TestClient

from appliance.protocol.openai import ChatCompletionRequest, CompletionRequest
from appliance.protocol.responses import ResponsesRequest
from appliance.service.field_policy import CHAT, COMPLETIONS, RESPONSES, Informative
from tests import apps
from tests.api_fields import APIS, documented_fields
from tests.apps import app_client
from tests.fakes import FakeEngineClient


@pytest.fixture
def engine() -> FakeEngineClient:
    return FakeEngineClient()


@pytest.fixture
def client(engine: FakeEngineClient):
    with app_client(engine) as test_client:
        yield test_client


chat = functools.partial(apps.chat, max_tokens=2)


INFORMATIVE_CHAT = {
    "store": False,
    "metadata": {},
    "service_tier": "auto",
    "prompt_cache_key": "k",
    "prompt_cache_retention": "24h",
    "prompt_cache_options": {"mode": "implicit"},
    "safety_identifier": "user-hash",
    "prediction": {"type": "content", "content": "three two"},
    "user": "someone",
}


@pytest.mark.parametrize(("name", "value"), INFORMATIVE_CHAT.items())
def test_informative_chat_fields_change_nothing(
    client: TestClient, name: str, value: object, caplog: pytest.LogCaptureFixture
) -> None:
    plain = chat(client)
    with caplog.at_level(logging.DEBUG, logger="appliance.requests"):
        informed = chat(client, **{name: value})
    assert informed.status_code == 200, informed.text
    assert informed.json()["choices"] == plain.json()["choices"]
    if name != "user":
        assert "accepted without effect" in caplog.text


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
        ({"modalities": ["text", "audio"]}, "modalities"),
        ({"verbosity": "low"}, "verbosity"),
        ({"web_search_options": {}}, "web_search_options"),
        ({"functions": [{"name": "f"}]}, "functions"),
        ({"function_call": "auto"}, "function_call"),
        ({"moderation": {"model": "omni-moderation-latest"}}, "moderation"),
    ],
)
def test_refused_chat_fields_name_the_field(client: TestClient, fields: dict, param: str) -> None:
    response = chat(client, **fields)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["param"], error["code"]) == (param, "unsupported_parameter")
    assert "not supported" in error["message"]


@pytest.mark.parametrize("fields", [{"modalities": ["text"]}, {"verbosity": "medium"}, {"functions": []}])
def test_neutral_values_of_refused_fields_are_accepted(client: TestClient, fields: dict) -> None:
    assert chat(client, **fields).status_code == 200


def test_unknown_fields_keep_their_400(client: TestClient) -> None:
    error = chat(client, storee=False).json()["error"]
    assert (error["param"], error["code"]) == ("storee", "unknown_parameter")


def test_metadata_is_bounded_as_openai_bounds_it(client: TestClient) -> None:
    too_many = {f"k{i}": "v" for i in range(17)}
    assert chat(client, metadata=too_many).json()["error"]["param"] == "metadata"
    assert chat(client, metadata={"k": "v" * 513}).status_code == 400


def test_completions_echo_and_suffix(client: TestClient) -> None:
    def complete(**fields):
        return client.post("/v1/completions", json={"model": "fake", "prompt": "one two", **fields})

    assert complete(echo=False, suffix="").status_code == 200
    assert complete(echo=True).status_code == 200
    for fields, param in (({"echo": True, "logprobs": 0}, "echo"), ({"suffix": "end"}, "suffix")):
        error = complete(**fields).json()["error"]
        assert (error["param"], error["code"]) == (param, "unsupported_parameter")


def test_json_object_with_a_schema_value_is_that_schema(client: TestClient, engine: FakeEngineClient) -> None:
    # Hugging Face's InferenceClient sends a json_schema response_format as TGI's grammar.
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    assert chat(client, response_format={"type": "json_object", "value": schema}).status_code == 200
    with_value = engine.submitted[-1].params.grammar
    assert chat(client, response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema}})
    assert engine.submitted[-1].params.grammar == with_value
    bad = chat(
        client, response_format={"type": "json_object", "value": {"type": "string", "minLength": 3, "maxLength": 1}}
    )
    assert bad.json()["error"]["param"] == "response_format.value"


# Extensions (vLLM/OVMS names, documented in the parameters table), not OpenAI's own fields.
_EXTENSIONS = {
    "top_k", "min_p", "repetition_penalty", "ignore_eos", "min_tokens", "stop_token_ids",
    "include_stop_str_in_output", "skip_special_tokens", "best_of", "length_penalty", "structured_outputs",
    "num_assistant_tokens", "assistant_confidence_threshold", "max_ngram_size", "chat_template_kwargs",
    "add_generation_prompt", "continue_final_message", "seed", "stop", "frequency_penalty", "presence_penalty",
}  # fmt: skip


@pytest.mark.parametrize(
    ("column", "struct", "rules"),
    [(0, ChatCompletionRequest, CHAT), (1, CompletionRequest, COMPLETIONS), (2, ResponsesRequest, RESPONSES)],
)
def test_the_docs_table_sorts_every_field_as_the_server_does(column: int, struct: type, rules: dict) -> None:
    api = APIS[column]
    groups = {name: apis.get(api, "—") for name, apis in documented_fields().items()}
    declared = set(struct.__struct_fields__)
    documented = {name.split(".")[0] for name, group in groups.items() if group != "—"}
    openai_fields = {
        ChatCompletionRequest: {"seed", "stop", "frequency_penalty", "presence_penalty"},
        CompletionRequest: {"seed", "stop", "frequency_penalty", "presence_penalty", "best_of"},
        ResponsesRequest: set(),
    }
    extensions = _EXTENSIONS - openai_fields[struct]
    assert declared - extensions <= documented, "declared but not in docs/api.md's table"
    assert documented <= declared, "in the table but not declared"
    for name, rule in rules.items():
        assert groups[name] == ("accepted" if isinstance(rule, Informative) else "refused"), name
    for name, group in groups.items():
        if group == "honoured":
            assert name not in rules, name


def test_stream_options_only_with_a_stream(client: TestClient) -> None:
    body = {"model": "fake", "messages": [{"role": "user", "content": "one two"}]}
    options = {"stream_options": {"include_obfuscation": False, "include_usage": True}}
    for route in ("/v1/chat/completions", "/v1/completions", "/v1/responses"):
        request = {"model": "fake", "prompt": "one two"} if route == "/v1/completions" else body
        if route == "/v1/responses":  # its stream_options hold include_obfuscation only
            request, options = {"model": "fake", "input": "one two"}, {"stream_options": {"include_obfuscation": False}}
        refused = client.post(route, json={**request, **options})
        assert refused.status_code == 400 and refused.json()["error"]["param"] == "stream_options", refused.text
        assert client.post(route, json={**request, **options, "stream": True}).status_code == 200
