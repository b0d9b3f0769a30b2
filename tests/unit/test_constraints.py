"""Every source of an output constraint meets the same bounds, each refusal a 400 naming its field
(issue 40: the schema's own size before conversion, literal alternatives in the compile budget)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from litestar.testing import TestClient

from appliance.graphfiles import Graph, Limits
from tests.apps import app_client, chat
from tests.fakes import FakeEngineClient
from tests.unit.test_grammar_bounds import optional_properties, words


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    # Tool schemas are prompt text too: room for large ones, so that the grammar's bounds answer.
    graph = Graph(name="fake", model_path="/nonexistent", tool_parser="hermes", limits=Limits(max_prompt_chars=10**7))
    with app_client(FakeEngineClient(graph)) as test_client:
        yield test_client


def schema_format(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}


def forced_tool(parameters: dict) -> dict:
    return {
        "tools": [{"type": "function", "function": {"name": "pick", "parameters": parameters}}],
        "tool_choice": "required",
    }


ENUM_4400 = {"type": "object", "properties": {"x": {"enum": words(4_400, 40)}}, "required": ["x"]}


@pytest.mark.parametrize(
    ("fields", "param", "words_in_message"),
    [
        (
            {"response_format": schema_format(optional_properties(8_000))},
            "response_format.json_schema.schema",
            ["8000 properties", "at most 5000"],
        ),
        (
            {"response_format": schema_format(ENUM_4400)},
            "response_format.json_schema.schema.properties.x.enum",
            ["4400 `enum` and `const` values", "at most 1000"],
        ),
        (forced_tool(ENUM_4400), "tools[0].function.parameters.properties.x.enum", ["4400 `enum`"]),
        (
            {"response_format": schema_format({"anyOf": [{"const": word} for word in words(4_400, 40)]})},
            "response_format.json_schema.schema",
            ["4400 alternatives"],
        ),
        (
            {"structured_outputs": {"regex": "(" + "|".join(words(5_000, 8)) + ")"}},
            "structured_outputs.regex",
            ["5000 alternatives"],
        ),
        (
            {"response_format": schema_format({"type": "string", "pattern": "^(" + "|".join(words(5_000, 8)) + ")$"})},
            "response_format.json_schema.schema.pattern",
            ["5000 alternatives"],
        ),
        (
            {"structured_outputs": {"grammar": "root ::= " + " | ".join(json.dumps(w) for w in words(1_001, 6))}},
            "structured_outputs.grammar",
            ["1001 alternatives"],
        ),
        ({"structured_outputs": {"choice": words(1_001, 3)}}, "structured_outputs.choice", ["1001 alternatives"]),
        (
            {"response_format": schema_format(optional_properties(3_000))},
            "response_format.json_schema.schema",
            ["grew past 262144 bytes"],
        ),
        (forced_tool(optional_properties(3_000)), "tools[0].function.parameters", ["grew past 262144 bytes"]),
        (
            {"response_format": schema_format({"type": "object", "properties": {"x": {"enum": words(1_000, 40)}}})},
            "response_format.json_schema.schema.properties.x",
            ["too complex", "bytes of literal text"],
        ),
    ],
    ids=[
        "8000-properties",
        "enum-4400",
        "tool-enum-4400",
        "anyOf-4400-consts",
        "regex-5000-branches",
        "pattern-5000-branches",
        "grammar-alternatives",
        "choice",
        "grammar-bytes",
        "tool-grammar-bytes",
        "enum-over-compile-budget",
    ],
)
def test_constraints_over_their_bounds_are_400_naming_the_field(
    client: TestClient, fields: dict, param: str, words_in_message: list[str]
) -> None:
    response = chat(client, max_tokens=4, **fields)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param, error
    for expected in words_in_message:
        assert expected in error["message"], error["message"]


def test_constraints_within_the_bounds_are_served(client: TestClient) -> None:
    for fields in (
        {"response_format": schema_format({"type": "object", "properties": {"x": {"enum": words(300, 40)}}})},
        {"structured_outputs": {"regex": "(" + "|".join(words(500, 8)) + ")"}},
        forced_tool(optional_properties(200)),
    ):
        response = chat(client, max_tokens=4, **fields)
        assert response.status_code == 200, response.text


def test_remembered_constraints_are_kept_by_digest_not_by_their_text(client: TestClient) -> None:
    from appliance.service.constraints import builds

    # A 2,000-property schema (80 KB) leaves a 16-byte key (the grammar itself is remembered).
    response = chat(client, max_tokens=4, response_format=schema_format(optional_properties(2_000)))
    assert response.status_code == 400, response.text  # over a budget: the refusal is remembered
    assert response.json()["error"]["param"] == "response_format.json_schema.schema"
    assert builds._remembered and all(len(key) == 16 for key in builds._remembered)
