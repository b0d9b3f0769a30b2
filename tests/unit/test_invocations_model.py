"""Which model /invocations uses, and an error that names the flag, the key and the variable."""

from __future__ import annotations

import pytest

from appliance.dialects.lmi import LmiOptions, invocation_engine
from appliance.errors import InvalidRequest
from appliance.runtime.registry import ModelRegistry
from tests.fakes import FakeEngineClient, fake_graph


def test_two_models_without_a_choice_name_the_flag_the_key_and_the_variable() -> None:
    models = ModelRegistry([FakeEngineClient(fake_graph("a")), FakeEngineClient(fake_graph("b"))])
    with pytest.raises(InvalidRequest) as refused:
        invocation_engine(models, LmiOptions(), None)
    message = str(refused.value)
    assert "--invocations-model NAME" in message and "invocations_model" in message
    assert "APPLIANCE_INVOCATIONS_MODEL" in message and "(a, b)" in message
    assert invocation_engine(models, LmiOptions(invocations_model="b"), None).name == "b"


def test_no_models_yet_says_so() -> None:
    with pytest.raises(InvalidRequest, match="serves no models yet"):
        invocation_engine(ModelRegistry([]), LmiOptions(), None)
