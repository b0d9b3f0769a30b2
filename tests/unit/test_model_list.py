"""`GET /v1/models` states each model's context (issue 50): `max_model_len` in OpenAI's list (vLLM's
name), and Anthropic's list (`max_input_tokens`, `max_tokens`) when the request carries
`anthropic-version`, as the `anthropic` SDK's `client.models.list()` does."""

from __future__ import annotations

from anthropic.types import ModelInfo
from openai.types import Model
from pydantic import TypeAdapter

from appliance.graphfiles import Graph, Limits
from tests.apps import app_client
from tests.fakes import FakeEngineClient

ANTHROPIC = {"anthropic-version": "2023-06-01", "x-api-key": "unused"}


def _engine() -> FakeEngineClient:
    return FakeEngineClient(Graph(name="fake", model_path="/nonexistent", limits=Limits(max_tokens_limit=512)))


def test_openai_list_states_the_context() -> None:
    engine = _engine()
    with app_client(engine) as client:
        listed = client.get("/v1/models").json()["data"][0]
        one = client.get("/v1/models/fake").json()
    assert listed == one and listed["max_model_len"] == engine.max_context > 0
    assert Model.model_validate(listed).id == "fake"


def test_anthropic_list_with_an_anthropic_version_header() -> None:
    engine = _engine()
    with app_client(engine) as client:
        page = client.get("/v1/models", headers=ANTHROPIC).json()
        one = client.get("/v1/models/fake", headers=ANTHROPIC).json()
    assert (page["has_more"], page["first_id"], page["last_id"]) == (False, "fake", "fake")
    info = TypeAdapter(ModelInfo).validate_python(page["data"][0])
    assert (info.type, info.id, info.max_input_tokens) == ("model", "fake", engine.max_context)
    assert info.max_tokens == min(512, engine.max_context)
    assert one == page["data"][0]
