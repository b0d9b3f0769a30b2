"""A dialect declares itself once, and the edge reads it (issue 41, item 1).

The proof: a dialect made up here, with a multipart upload route (as OpenAI's audio routes are), its
own error shape, its own key and request-id headers, is registered beside the real ones, and passes
the gate, answers errors in its shape and is in the OpenAPI document, with no line of the gate, the
error handlers or the OpenAPI code changed. Then: the Origin checks still stop a forged form.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import msgspec
import pytest
from litestar import Litestar, Request, post
from litestar.datastructures import UploadFile
from litestar.testing import TestClient

from appliance.api.app import create_app
from appliance.api.gate import Gate
from appliance.api.profiles import OPERATION, DialectProfile, Dialects, Operation
from appliance.errors import ApplianceError, InvalidRequest
from appliance.runtime.registry import ModelRegistry

KEY = "k-1"
HOST = "box:8000"


class MeetingUpload(msgspec.Struct, kw_only=True):
    """The form's fields."""

    model: str
    file: bytes


class Transcript(msgspec.Struct):
    text: str


class Problem(msgspec.Struct):
    """The made-up dialect's error body."""

    problem: str
    status: int


def _problem(exc: ApplianceError, _: Mapping[str, Any]) -> Problem:
    return Problem(problem=exc.message, status=exc.status)


@post(
    "/v1/meetings/uploads",
    status_code=200,
    opt={
        OPERATION: Operation(
            summary="Transcribe", body=MeetingUpload, media_types=("multipart/form-data",), answer=Transcript
        )
    },
)
async def transcribe(request: Request) -> Transcript:
    form = await request.form()
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        raise InvalidRequest("Send the audio as the form's `file`.", param="file")
    return Transcript(text=f"{form.get('model')}: {len(await upload.read())} bytes")


PROFILE = DialectProfile(
    name="speech",
    render_error=_problem,
    error_bodies=(Problem,),
    credential_headers=("x-speech-key",),
    client_headers=("speech-version",),
    request_id_headers=("speech-request-id",),
)


def _app() -> Litestar:
    app = create_app(ModelRegistry([]), start_engines=False)
    app.register(PROFILE.router("/", [transcribe]))  # what api/app.py's route list does
    return app


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(Gate(_app(), api_keys=[KEY], cors_origins=["https://app.example"])) as test_client:
        yield test_client


def upload(client: TestClient, **headers: str):
    headers = {"Host": HOST, "x-speech-key": KEY, **headers}
    files = {"file": ("meeting.wav", b"RIFF" + bytes(60), "audio/wav")}
    return client.post("/v1/meetings/uploads", data={"model": "whisper"}, files=files, headers=headers)


def test_a_multipart_route_that_declares_it_passes_the_gate(client: TestClient) -> None:
    answer = upload(client)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"text": "whisper: 64 bytes"}
    # Its request-id header, beside the gate's own; the key from its header, or as a Bearer token.
    assert answer.headers["speech-request-id"] == answer.headers["x-request-id"]
    assert upload(client, **{"x-speech-key": "", "Authorization": f"Bearer {KEY}"}).status_code == 200
    assert upload(client, Origin="https://app.example").status_code == 200  # a listed origin
    assert upload(client, Origin=f"http://{HOST}").status_code == 200  # the server's own pages


def test_its_errors_take_its_shape_at_every_layer(client: TestClient) -> None:
    def problem(answer) -> dict:
        assert answer.headers["speech-request-id"], answer.headers
        return answer.json()

    missing = client.post(
        "/v1/meetings/uploads", data={"model": "w"}, files={"other": ("a", b"x")}, headers={"x-speech-key": KEY}
    )
    assert missing.status_code == 400 and problem(missing) == {
        "problem": "Send the audio as the form's `file`.",
        "status": 400,
    }
    # The gate's refusals, Litestar's own errors and paths below the route.
    assert problem(upload(client, **{"x-speech-key": "wrong"}))["status"] == 401
    assert problem(client.get("/v1/meetings/uploads", headers={"x-speech-key": KEY}))["status"] == 405
    assert problem(client.post("/v1/meetings/uploads/x", headers={"x-speech-key": KEY}))["status"] == 404
    # The other dialects keep theirs.
    assert set(client.get("/v1/models").json()["error"]) == {"message", "type", "param", "code"}


def test_a_forged_form_is_refused_and_other_body_types_too(client: TestClient) -> None:
    # A page elsewhere can post a multipart form without asking first: its Origin gives it away.
    for origin in ("https://evil.example", "null", f"http://{HOST.replace('8000', '8001')}"):
        refused = upload(client, Origin=origin)
        assert refused.status_code == 403 and refused.json()["problem"].startswith("Requests from web pages"), origin
    # Bodies the route does not list: 415, in its shape.
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "application/json"):
        refused = client.post(
            "/v1/meetings/uploads", content=b"x", headers={"x-speech-key": KEY, "Content-Type": content_type}
        )
        assert refused.status_code == 415 and refused.json()["status"] == 415, content_type
    # Multipart stays refused on the JSON routes.
    files = {"file": ("a.wav", b"x")}
    refused = client.post("/v1/chat/completions", files=files, headers={"x-speech-key": KEY})
    assert refused.status_code == 415 and refused.json()["error"]["code"] == "unsupported_media_type"


def test_a_browser_client_may_send_its_headers(client: TestClient) -> None:
    preflight = client.options(
        "/v1/meetings/uploads",
        headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"},
    )
    allowed = preflight.headers["access-control-allow-headers"].split(", ")
    assert {"x-speech-key", "speech-version", "x-api-key", "anthropic-version"} <= set(allowed)


def test_it_is_in_the_openapi_document(client: TestClient) -> None:
    document = client.get("/openapi.json", headers={"x-speech-key": KEY}).json()
    operation = document["paths"]["/v1/meetings/uploads"]["post"]
    assert operation["tags"] == ["speech"] and operation["summary"] == "Transcribe"
    body = operation["requestBody"]["content"]
    assert list(body) == ["multipart/form-data"]
    assert body["multipart/form-data"]["schema"] == {"$ref": "#/components/schemas/MeetingUpload"}
    schemas = document["components"]["schemas"]
    assert set(schemas["MeetingUpload"]["required"]) == {"model", "file"}
    assert operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/Transcript")
    assert operation["responses"]["400"]["content"]["application/json"]["schema"]["$ref"].endswith("/Problem")


def test_a_path_below_no_route_belongs_to_the_nearest_route_above() -> None:
    dialects = Dialects.of(_app())
    assert dialects.profile("/v1/meetings/uploads") == PROFILE
    assert dialects.profile("//v1/meetings/uploads/") == PROFILE  # as Litestar routes it
    assert dialects.profile("/v1/meetings/uploads/x/y") == PROFILE
    assert dialects.profile("/v1/meetings") != PROFILE
    assert dialects.media_types("/v1/meetings/uploads", "POST") == ("multipart/form-data",)
    assert dialects.media_types("/v1/meetings/uploads/x", "POST") == ("application/json",)
