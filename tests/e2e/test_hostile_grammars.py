"""Hostile structured-output requests, round four (issue 40: H1 and M2), on demo-smol (a real
49k-token vocabulary, as the engine's grammar compiler sees it) beside a neighbour stream on the
same model (largest gap printed, engine pid checked).

Each used to cost the server or the engine seconds to minutes: an 8,000-property schema took 94 s
of CPU to write before its size was checked, six 180 KB schemas whose clients had hung up held
`/metrics` and every other structured request for 231 s, and large literal enums, `anyOf`s of
consts, pattern alternations and hundreds of optional properties passed the compile budget and
were compiled inside the engine's step. Each is now refused (400 naming the field and the limit)
or built cheaply, on every dialect.
"""

from __future__ import annotations

import json
import string
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from random import Random

import httpx
import pytest

from tests.conftest import RunningServer, copy_demo_graphs, running_server
from tests.e2e.neighbour import Neighbour

SMOL = "demo-smol"
ASK = [{"role": "user", "content": "Answer as JSON."}]


@pytest.fixture(scope="module")
def server(smol_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp("hostile-grammars")
    graphs = copy_demo_graphs(smol_root, directory / "graphs", [SMOL])
    with running_server(graphs, directory / "server.log") as running:
        # A first request, so that the neighbours' gaps are not the model's first step.
        body = {"model": SMOL, "messages": ASK, "max_tokens": 4}
        assert httpx.post(f"{running.url}/v1/chat/completions", json=body, timeout=120).status_code == 200
        yield running


def words(count: int, length: int, seed: int = 7) -> list[str]:
    random, found = Random(seed), set()
    while len(found) < count:
        found.add("".join(random.choice(string.ascii_lowercase) for _ in range(length)))
    return sorted(found)


def properties(count: int, **each: object) -> dict:
    return {"type": "object", "properties": {f"property_{i:05d}": {"type": "string", **each} for i in range(count)}}


def schema_format(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}


def keyed(schema: dict) -> dict:
    """`schema` under a required property `x` (so a refusal's path names a part inside it)."""
    return {"type": "object", "properties": {"x": schema}, "required": ["x"]}


ENUM_4400 = {"enum": words(4_400, 40)}
"""4,400 distinct 40-letter strings (180 KB): no character class at all."""
CONSTS_4400 = {"anyOf": [{"const": word} for word in words(4_400, 40, seed=8)]}
PATTERN_5000 = {"type": "string", "pattern": "^(" + "|".join(words(5_000, 8, seed=9)) + ")$"}


def chat(server: RunningServer, fields: dict, timeout: float = 60) -> httpx.Response:
    body = {"model": SMOL, "messages": ASK, "max_tokens": 8, **fields}
    return httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=timeout)


def assert_refused(response: httpx.Response, param: str, *expected: str) -> None:
    assert response.status_code == 400, response.text[:500]
    error = response.json()["error"]
    assert error["param"] == param, error
    for text in expected:
        assert text in error["message"], error["message"]


def test_an_8000_property_schema_is_refused_at_once(server: RunningServer) -> None:
    schema = properties(8_000)
    fields = {"response_format": schema_format(schema)}
    print(f"body: {len(json.dumps(fields)) // 1024} KB")
    with Neighbour(server.url, SMOL) as neighbour:
        for _ in range(3):
            assert_refused(chat(server, fields), "response_format.json_schema.schema", "8000 properties", "5000")
    neighbour.assert_unharmed()
    assert "Traceback" not in server.log()


@pytest.mark.parametrize(
    ("schema", "param", "expected"),
    [
        (keyed(ENUM_4400), "response_format.json_schema.schema.properties.x.enum", "4400 `enum` and `const` values"),
        (keyed(CONSTS_4400), "response_format.json_schema.schema.properties.x", "4400 alternatives"),
        (keyed(PATTERN_5000), "response_format.json_schema.schema.properties.x.pattern", "5000 alternatives"),
    ],
    ids=["enum-4400x40", "anyOf-4400-consts", "pattern-5000-branches"],
)
def test_large_literal_alternatives_are_refused_four_at_once(
    server: RunningServer, schema: dict, param: str, expected: str
) -> None:
    fields = {"response_format": schema_format(schema)}
    with Neighbour(server.url, SMOL) as neighbour, ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: chat(server, fields), range(4)))
    for answer in answers:
        assert_refused(answer, param, expected)
    neighbour.assert_unharmed()


def one_required(count: int) -> dict:
    schema = properties(count)
    return {**schema, "required": [next(iter(schema["properties"]))]}


def test_optional_properties_that_would_hold_the_step_are_refused(server: RunningServer) -> None:
    """One required and 400 optional properties: 43 s of compile inside the engine's step when
    each optional member was written inline, about 2 s as rules; over the budget either way."""
    fields = {"response_format": schema_format(one_required(400))}
    with Neighbour(server.url, SMOL) as neighbour:
        assert_refused(chat(server, fields), "response_format.json_schema.schema", "too complex", "closure work")
    neighbour.assert_unharmed()


@pytest.mark.parametrize(
    "schema",
    [{"enum": words(300, 40, seed=11)}, one_required(150)],
    ids=["enum-300x40", "1-required-150-optional"],
)
def test_constraints_within_the_budget_are_compiled_beside_the_neighbour(server: RunningServer, schema: dict) -> None:
    fields = {"response_format": schema_format(schema), "max_tokens": 40, "temperature": 0}
    with Neighbour(server.url, SMOL) as neighbour:
        answer = chat(server, fields)
    assert answer.status_code == 200, answer.text[:500]
    choice = answer.json()["choices"][0]
    if choice["finish_reason"] == "stop" and "enum" in schema:
        assert json.loads(choice["message"]["content"]) in schema["enum"]
    neighbour.assert_unharmed()


def test_clients_that_hang_up_hold_neither_metrics_nor_other_requests(server: RunningServer) -> None:
    """Six 180 KB schemas whose clients give up after 2 s, while `/metrics` is scraped and a
    neighbour streams: each build is quick (or refused before it starts), none runs on the
    executor `/metrics` uses, and the server answers everything after."""
    schema = properties(4_000, maxLength=40)
    fields = {"response_format": schema_format(schema)}
    print(f"body: {len(json.dumps(fields)) // 1024} KB")
    outcomes: list[str] = []
    scrapes: list[int] = []
    done = threading.Event()

    def hang_up_after_two_seconds() -> None:
        try:
            outcomes.append(str(chat(server, fields, timeout=2).status_code))
        except httpx.TimeoutException:
            outcomes.append("hung up")

    def scrape() -> None:
        while not done.is_set():
            scrapes.append(httpx.get(f"{server.url}/metrics", timeout=30).status_code)
            time.sleep(0.05)

    scraper = threading.Thread(target=scrape, daemon=True)
    with Neighbour(server.url, SMOL) as neighbour:
        scraper.start()
        with ThreadPoolExecutor(6) as pool:
            for future in [pool.submit(hang_up_after_two_seconds) for _ in range(6)]:
                future.result()
        served = chat(server, {"response_format": schema_format(keyed({"type": "integer"}))})
        done.set()
        scraper.join(60)
    print(f"outcomes: {outcomes}; /metrics answered {len(scrapes)} times")
    assert set(outcomes) <= {"400", "hung up"}, outcomes
    assert scrapes and set(scrapes) == {200}, scrapes
    assert served.status_code == 200, served.text[:500]
    neighbour.assert_unharmed()
    assert server.wait_idle(SMOL)["in_flight"] == 0
    assert "Traceback" not in server.log()


def test_responses_text_format_meets_the_same_bounds(server: RunningServer) -> None:
    body = {
        "model": SMOL,
        "input": "Answer as JSON.",
        "max_output_tokens": 16,
        "text": {"format": {"type": "json_schema", "name": "answer", "schema": keyed(ENUM_4400)}},
    }
    with Neighbour(server.url, SMOL) as neighbour:
        answer = httpx.post(f"{server.url}/v1/responses", json=body, timeout=60)
        assert_refused(answer, "text.format.schema.properties.x.enum", "4400 `enum`")
        body["text"]["format"]["schema"] = properties(8_000)
        answer = httpx.post(f"{server.url}/v1/responses", json=body, timeout=60)
        assert_refused(answer, "text.format.schema", "8000 properties")
    neighbour.assert_unharmed()


@pytest.mark.parametrize(
    ("fields", "where", "expected"),
    [
        (
            {"output_config": {"format": {"type": "json_schema", "schema": properties(8_000)}}},
            "output_config.format.schema:",
            "8000 properties",
        ),
        (
            {
                "tools": [{"name": "pick", "input_schema": keyed(ENUM_4400)}],
                "tool_choice": {"type": "any"},
            },
            "tools[0].input_schema.properties.x.enum:",
            "4400 `enum`",
        ),
        (
            {
                "tools": [{"name": "pick", "input_schema": keyed(PATTERN_5000)}],
                "tool_choice": {"type": "any"},
            },
            "tools[0].input_schema.properties.x.pattern:",
            "5000 alternatives",
        ),
    ],
    ids=["output_config-8000-properties", "tool_choice-any-enum-4400", "tool_choice-any-pattern-5000"],
)
def test_messages_meet_the_same_bounds(server: RunningServer, fields: dict, where: str, expected: str) -> None:
    body = {"model": SMOL, "max_tokens": 16, "messages": ASK, **fields}
    with Neighbour(server.url, SMOL) as neighbour:
        answer = httpx.post(f"{server.url}/v1/messages", json=body, timeout=60)
    assert answer.status_code == 400, answer.text[:500]
    error = answer.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error", error
    assert error["error"]["message"].startswith(where), error["error"]["message"]
    assert expected in error["error"]["message"], error["error"]["message"]
    neighbour.assert_unharmed()
