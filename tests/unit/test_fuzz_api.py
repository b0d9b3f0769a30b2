"""Schemathesis against the OpenAPI document: no input may produce a 5xx or an off-schema answer.

Runs the real HTTP layer (decoding, validation, routing, error envelopes) over an in-process engine
so thousands of requests take seconds; fixed seed and bounded example counts keep CI repeatable.
Every operation of the document is fuzzed: each handler in full on one of its paths, and on its
other paths (`/v3/...`, bare `/tokenize`: the same handler) with a few examples, which check the
routing and the error shape there.
"""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from appliance.api.profiles import Dialects
from tests.apps import fake_app
from tests.fakes import FakeEngineClient, fake_graph

app = fake_app(FakeEngineClient(fake_graph("fake")), max_body_size=65536)

schema = schemathesis.openapi.from_asgi("/openapi.json", app)


def _first_paths() -> frozenset[tuple[str, str]]:
    """(method, path) of each handler's first path, in sorted order."""
    paths: dict[tuple[object, str], str] = {}
    for entry in Dialects.of(app).routes:
        for method, handler in entry.handlers.items():
            key = (handler.fn, method)
            paths[key] = min(paths.get(key, entry.route.path_format), entry.route.path_format)
    return frozenset((method, path) for (_, method), path in paths.items())


FIRST_PATHS = _first_paths()


def _is_first(context) -> bool:
    return (context.operation.method.upper(), context.operation.path) in FIRST_PATHS


def _check(case) -> None:
    response = case.call()
    assert response.status_code < 500 or response.status_code == 503, (response.status_code, response.text)
    if response.status_code == 413:
        # A generated body above max_body_size is refused by its size before it is read, whatever it
        # holds (schemathesis counts 413 as accepting negative data); the refusal keeps the route's shape.
        assert "error" in response.json(), response.text
        return
    # Every check but "schema-valid input must be accepted": the schema cannot state rules across
    # fields (e.g. `n` > 1 needs sampling, `continue_final_message` needs a final assistant
    # message), which the server answers with a 400 naming the field, as it should.
    case.validate_response(response, excluded_checks=[checks.positive_data_acceptance])


@schema.include(_is_first).parametrize()
@settings(
    # 26 handlers: 40 examples each.
    max_examples=40,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_input_gets_a_server_error(case) -> None:
    _check(case)


@schema.exclude(_is_first).parametrize()
@settings(max_examples=4, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_input_gets_a_server_error_on_other_paths(case) -> None:
    _check(case)
