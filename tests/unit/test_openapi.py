"""The OpenAPI document is generated from the app's routes: every route is in it, with what its
handler declares and its dialect's error bodies."""

from __future__ import annotations

from litestar.routes import HTTPRoute
from litestar.testing import TestClient

from tests.apps import app_client
from tests.fakes import FakeEngineClient, fake_graph

_NOT_OPERATIONS = ("OPTIONS", "HEAD")


def _document(client: TestClient) -> dict:
    answer = client.get("/openapi.json")
    assert answer.status_code == 200
    return answer.json()


def test_every_route_is_in_the_document() -> None:
    with app_client(FakeEngineClient(fake_graph("fake"))) as client:
        document = _document(client)
        routes = {
            (route.path_format, method.lower())
            for route in client.app.routes
            if isinstance(route, HTTPRoute)  # OpenAPI 3 has no websockets (/v1/realtime: docs/speech.md)
            for handler in route.route_handlers
            if handler.include_in_schema is not False
            for method in handler.http_methods
            if method not in _NOT_OPERATIONS
        }
    documented = {(path, method) for path, operations in document["paths"].items() for method in operations}
    assert len(routes) > 40  # the walk found the app's routes
    assert routes == documented
    # The routes the hand-written document missed.
    for path in ("/v1/embeddings", "/v1/rerank", "/v1/score", "/invocations", "/_inference/{inference_id}/_stream"):
        assert (path, "post") in documented, path
    # The playground's files are left out on purpose.
    assert "/playground" not in document["paths"]


def test_bodies_answers_and_errors_come_from_the_declarations() -> None:
    with app_client(FakeEngineClient(fake_graph("fake"))) as client:
        document = _document(client)
    paths, schemas = document["paths"], document["components"]["schemas"]

    def ref(content: dict) -> str:
        return content["application/json"]["schema"]["$ref"].rpartition("/")[2]

    chat = paths["/v1/chat/completions"]["post"]
    assert ref(chat["requestBody"]["content"]) == "ChatCompletionRequest"
    assert ref(chat["responses"]["200"]["content"]) == "ChatCompletion"
    assert "text/event-stream" in chat["responses"]["200"]["content"]
    assert ref(chat["responses"]["400"]["content"]) == "ErrorResponse"
    # A handler's return type, when it is a struct, is its answer.
    assert ref(paths["/v1/embeddings"]["post"]["responses"]["200"]["content"]) == "CreateEmbeddingResponse"
    # Each dialect's errors in its shape, and tagged with its name.
    messages = paths["/v3/messages"]["post"]
    assert messages["tags"] == ["anthropic"] and ref(messages["responses"]["401"]["content"]) == "AnthropicErrorBody"
    elastic = paths["/_inference/{inference_id}/_stream"]["post"]
    assert ref(elastic["responses"]["400"]["content"]) == "ElasticError"
    lmi = paths["/predictions/{model}"]["post"]["responses"]["400"]["content"]["application/json"]["schema"]
    assert {option["$ref"].rpartition("/")[2] for option in lmi["anyOf"]} == {
        "ValidationError",
        "GeneratedText",
        "ErrorResponse",
    }
    # Path and query parameters from the route and the handler's signature; a query value is checked.
    stored = paths["/v1/responses/{response_id}"]["get"]
    assert {(p["name"], p["in"]) for p in stored["parameters"]} == {("response_id", "path"), ("stream", "query")}
    assert "400" in paths["/stats"]["get"]["responses"]
    # The served models as the enum of `model`, but where the route stands in for a model left out.
    assert schemas["ChatCompletionRequest"]["properties"]["model"]["enum"] == ["fake"]
    optional = schemas["ChatCompletionRequest-model-optional"]
    assert "model" not in optional["required"] and "enum" not in optional["properties"]["model"]
    assert elastic["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("-model-optional")
