"""Structured output through OpenVINO GenAI (xgrammar): response_format json_schema / json_object
and the regex, choice and grammar extensions, with the real `openai` client and the demo model."""

from __future__ import annotations

import json
import re

import jsonschema
import openai
import pytest

MODEL = "demo-chat"
ASK = [{"role": "user", "content": "Describe the weather as JSON"}]
WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 10},
        "temperature": {"type": "integer", "minimum": -40, "maximum": 50},
        "sunny": {"type": "boolean"},
        "wind": {"type": "number", "minimum": 0, "maximum": 30},
        "tags": {"type": "array", "items": {"enum": ["rain", "snow", "fog"]}, "maxItems": 3},
        "updated": {"type": "string", "format": "date"},
    },
    "required": ["city", "temperature", "sunny"],
    "additionalProperties": False,
}


def json_schema_format(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "weather", "schema": schema, "strict": True}}


@pytest.mark.parametrize("seed", [None, 1, 2, 3, 4, 5])
def test_json_schema_output_parses_and_validates(openai_client: openai.OpenAI, seed: int | None) -> None:
    sampling = {"temperature": 0} if seed is None else {"seed": seed}
    reply = openai_client.chat.completions.create(
        model=MODEL, messages=ASK, max_tokens=160, response_format=json_schema_format(WEATHER), **sampling
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "stop", choice.message.content
    jsonschema.validate(json.loads(choice.message.content), WEATHER)


def test_json_schema_streaming(openai_client: openai.OpenAI) -> None:
    fields = {
        "model": MODEL,
        "messages": ASK,
        "max_tokens": 160,
        "seed": 7,
        "response_format": json_schema_format(WEATHER),
    }
    reply = openai_client.chat.completions.create(**fields)
    jsonschema.validate(json.loads(reply.choices[0].message.content), WEATHER)
    text = "".join(
        choice.delta.content or ""
        for chunk in openai_client.chat.completions.create(stream=True, **fields)
        for choice in chunk.choices
    )
    assert text == reply.choices[0].message.content


def test_several_sequences_with_a_schema_are_refused(openai_client: openai.OpenAI) -> None:
    # The engine shares one grammar matcher between the sequences of a request: outputs break it.
    for fields, param in (({"n": 2}, "n"), ({"temperature": 0, "extra_body": {"best_of": 2}}, "best_of")):
        with pytest.raises(openai.BadRequestError) as info:
            openai_client.chat.completions.create(
                model=MODEL, messages=ASK, max_tokens=8, response_format=json_schema_format(WEATHER), **fields
            )
        assert info.value.param == param


@pytest.mark.parametrize("seed", [0, 2, 3])
def test_json_object(openai_client: openai.OpenAI, seed: int) -> None:
    reply = openai_client.chat.completions.create(
        model=MODEL, messages=ASK, max_tokens=200, seed=seed, response_format={"type": "json_object"}
    )
    assert isinstance(json.loads(reply.choices[0].message.content), dict)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_regex_choice_and_grammar_extensions(openai_client: openai.OpenAI, seed: int) -> None:
    def content(constraint: dict) -> str:
        reply = openai_client.chat.completions.create(
            model=MODEL, messages=ASK, max_tokens=40, seed=seed, extra_body={"structured_outputs": constraint}
        )
        return reply.choices[0].message.content

    assert re.fullmatch(r"[A-Z]{2}-\d{3,5}", content({"regex": r"^[A-Z]{2}-\d{3,5}$"}))
    assert content({"choice": ["sunny", "cloudy", "rain"]}) in ("sunny", "cloudy", "rain")
    grammar = 'root ::= answer " (" digit digit "%)"\nanswer ::= "yes" | "no"\ndigit ::= [0-9]'
    assert re.fullmatch(r"(yes|no) \(\d\d%\)", content({"grammar": grammar}))


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        (
            {"response_format": json_schema_format({"type": "object", "properties": {"a": {"type": "strnig"}}})},
            "response_format.json_schema.schema.properties.a.type",
        ),
        (
            {"response_format": json_schema_format({"type": "array", "uniqueItems": True})},
            "response_format.json_schema.schema.uniqueItems",
        ),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "bad name!", "schema": {}}}},
            "response_format.json_schema.name",
        ),
        ({"extra_body": {"structured_outputs": {"regex": "(?<=a)b"}}}, "structured_outputs.regex"),
        ({"extra_body": {"structured_outputs": {"grammar": "root ::= undefined_rule"}}}, "structured_outputs.grammar"),
        ({"extra_body": {"structured_outputs": {"grammar": 'start ::= "a"'}}}, "structured_outputs.grammar"),
        ({"extra_body": {"structured_outputs": {}}}, "structured_outputs"),
        ({"extra_body": {"structured_outputs": {"json": {"type": "nonsense"}}}}, "structured_outputs.json.type"),
    ],
)
def test_invalid_constraints_are_400_and_the_engine_keeps_serving(
    openai_client: openai.OpenAI, fields: dict, param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        openai_client.chat.completions.create(model=MODEL, messages=ASK, max_tokens=8, **fields)
    assert info.value.param == param
    # A grammar the engine could not compile would have broken its pipeline for everyone.
    assert openai_client.chat.completions.create(model=MODEL, messages=ASK, max_tokens=2).choices
