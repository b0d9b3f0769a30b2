"""`/v1/files` at the HTTP layer (behind the gate, which reads the API key a file belongs to):
upload, list in pages, retrieve, content, delete, each key seeing only its own files, and every
refusal a 4xx in OpenAI's envelope naming its field."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient
from openai.types import FileDeleted, FileObject

from appliance.api.gate import Gate
from appliance.store import StoreLimits, open_store
from tests.apps import fake_app

BATCH = b'{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {}}\n'


@pytest.fixture
def client():
    store = open_store(limits=StoreLimits(max_file_bytes=1000, max_file_lines=5, max_stored_file_bytes=3000))
    with TestClient(Gate(fake_app(store=store))) as test_client:
        yield test_client


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def upload(client: TestClient, content: bytes = BATCH, key: str = "k1", name: str = "in.jsonl", **fields):
    data = {"purpose": "batch", **fields}
    return client.post("/v1/files", files={"file": (name, content)}, data=data, headers=auth(key))


def test_upload_retrieve_content_delete(client: TestClient) -> None:
    created = upload(client)
    assert created.status_code == 200, created.text
    body = FileObject.model_validate(created.json())
    assert (body.purpose, body.filename, body.bytes, body.status) == ("batch", "in.jsonl", len(BATCH), "processed")
    assert body.id.startswith("file-")
    assert FileObject.model_validate(client.get(f"/v1/files/{body.id}", headers=auth("k1")).json()) == body
    content = client.get(f"/v3/files/{body.id}/content", headers=auth("k1"))
    assert content.content == BATCH and content.headers["content-type"] == "application/octet-stream"
    deleted = client.delete(f"/v1/files/{body.id}", headers=auth("k1"))
    assert FileDeleted.model_validate(deleted.json()).deleted
    gone = client.get(f"/v1/files/{body.id}", headers=auth("k1"))
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "file_not_found"


def test_a_key_sees_only_its_files(client: TestClient) -> None:
    mine = upload(client, key="alice").json()["id"]
    for path in (f"/v1/files/{mine}", f"/v1/files/{mine}/content"):
        assert client.get(path, headers=auth("bob")).status_code == 404
    assert client.delete(f"/v1/files/{mine}", headers=auth("bob")).status_code == 404
    assert client.get("/v1/files", headers=auth("bob")).json()["data"] == []
    assert [item["id"] for item in client.get("/v1/files", headers=auth("alice")).json()["data"]] == [mine]


def test_listing_in_pages(client: TestClient) -> None:
    ids = [upload(client, name=f"{index}.jsonl").json()["id"] for index in range(3)]
    page = client.get("/v1/files", params={"limit": 2}, headers=auth("k1")).json()
    assert [item["id"] for item in page["data"]] == ids[::-1][:2] and page["has_more"]
    assert page["first_id"] == ids[2] and page["last_id"] == ids[1] and page["object"] == "list"
    rest = client.get("/v1/files", params={"limit": 2, "after": page["last_id"]}, headers=auth("k1")).json()
    assert [item["id"] for item in rest["data"]] == ids[:1] and not rest["has_more"]
    oldest = client.get("/v1/files", params={"order": "asc", "purpose": "batch"}, headers=auth("k1")).json()
    assert [item["id"] for item in oldest["data"]] == ids
    assert client.get("/v1/files", params={"purpose": "batch_output"}, headers=auth("k1")).json()["data"] == []


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "x"}, "limit"),
        ({"limit": "10001"}, "limit"),
        ({"order": "up"}, "order"),
        ({"sort": "1"}, "sort"),
    ],
)
def test_bad_listing_parameters(client: TestClient, params: dict, param: str) -> None:
    answer = client.get("/v1/files", params=params, headers=auth("k1"))
    assert answer.status_code == 400 and answer.json()["error"]["param"] == param


def test_upload_refusals(client: TestClient) -> None:
    def refused(answer, status: int, param: str) -> str:
        assert answer.status_code == status, answer.text
        error = answer.json()["error"]
        assert error["param"] == param
        return error["message"]

    assert "batch" in refused(upload(client, purpose="fine-tune"), 400, "purpose")
    assert "1001 bytes" in refused(upload(client, b"x" * 1001), 413, "file")
    assert "6 lines" in refused(upload(client, b"{}\n" * 6), 400, "file")
    assert "UTF-8" in refused(upload(client, b"\xff\xfe{}"), 400, "file")
    assert refused(upload(client, unknown="1"), 400, "unknown")
    no_file = client.post("/v1/files", data={"purpose": "batch"}, files={"other": ("x", b"")}, headers=auth("k1"))
    assert no_file.status_code == 400
    text_file = client.post(
        "/v1/files", data={"purpose": "batch", "file": "{}"}, files={"x": ("", b"")}, headers=auth("k1")
    )
    assert text_file.status_code == 400
    json_body = client.post("/v1/files", json={"purpose": "batch"}, headers=auth("k1"))
    assert json_body.status_code == 415
    for _ in range(3):
        assert upload(client, b"x" * 1000).status_code == 200
    assert "may store" in refused(upload(client, b"x"), 400, "file")


def test_expires_after(client: TestClient) -> None:
    fields = {"expires_after[anchor]": "created_at", "expires_after[seconds]": "3600"}
    body = upload(client, **fields).json()
    assert body["expires_at"] == body["created_at"] + 3600
    short = upload(client, **{**fields, "expires_after[seconds]": "60"})
    assert short.status_code == 400 and short.json()["error"]["param"] == "expires_after[seconds]"
