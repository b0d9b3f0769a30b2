"""Metric route labels come from the app's route templates, also for requests no handler answers."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from appliance.api.app import create_app
from appliance.api.gate import Gate
from appliance.api.route_labels import RouteLabels
from appliance.metrics import Metrics
from appliance.runtime.registry import ModelRegistry

KEY = {"Authorization": "Bearer k"}


@pytest.mark.parametrize(
    ("method", "path", "headers", "route"),
    [
        ("GET", "/v1/models", KEY, "/v1/models"),
        ("GET", "/v3/models/org/name", KEY, "/v3/models/{model_id}"),
        ("POST", "/invocations", KEY, "/invocations"),
        ("POST", "/predictions/demo", KEY, "/predictions/{model}"),
        ("POST", "/v1/tokenize", KEY, "/v1/tokenize"),
        ("POST", "/_inference/chat_completion/x/_stream", KEY, "/_inference/chat_completion/{inference_id}/_stream"),
        ("POST", "/v1/chat/completions", {}, "/v1/chat/completions"),  # 401 from the gate
        ("GET", "/v1/chat/completions", KEY, "/v1/chat/completions"),  # 405
        ("GET", "/wp-login.php", KEY, "other"),
    ],
)
def test_route_label_is_the_route_template(method: str, path: str, headers: dict, route: str) -> None:
    metrics = Metrics()
    app = create_app(ModelRegistry([]), start_engines=False, metrics=metrics)
    with TestClient(Gate(app, metrics=metrics, api_keys=["k"], route_labels=RouteLabels(app.routes))) as client:
        client.request(method, path, headers=headers)
    samples = [
        s for family in metrics.registry.collect() for s in family.samples if s.name == "appliance_http_requests_total"
    ]
    assert [s.labels["route"] for s in samples] == [route]
