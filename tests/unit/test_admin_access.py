"""/admin/* needs an admin key, or a loopback client when none is set; API keys do not open it."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from appliance.api.gate import Gate


async def _ok(scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def call(gate: Gate, path: str, client: str, key: str | None = None) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=gate, client=(client, 40000))  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://appliance") as http:
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            return await http.post(path, headers=headers)

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("client", "status"), [("127.0.0.1", 200), ("127.8.9.1", 200), ("::1", 200), ("::ffff:127.0.0.1", 200),
                           ("192.168.1.20", 403), ("::ffff:10.0.0.1", 403), ("testclient", 403)],
)  # fmt: skip
def test_without_admin_keys_only_loopback_clients_reach_admin_routes(client: str, status: int) -> None:
    gate = Gate(_ok)
    response = call(gate, "/admin/reload", client)
    assert response.status_code == status
    if status == 403:
        assert response.json()["error"]["code"] == "admin_loopback_only"
    assert call(gate, "/v1/models", client).status_code == 200  # the API is as open as before


def test_an_api_key_alone_never_opens_admin_routes_from_the_network() -> None:
    gate = Gate(_ok, api_keys=["api"])
    assert call(gate, "/admin/reload", "192.168.1.20", "api").status_code == 403
    assert call(gate, "/admin/reload", "127.0.0.1").status_code == 401  # loopback still needs the API key
    assert call(gate, "/admin/reload", "127.0.0.1", "api").status_code == 200


def test_with_admin_keys_the_admin_key_is_needed_from_anywhere() -> None:
    gate = Gate(_ok, api_keys=["api"], admin_keys=["admin"])
    for client in ("127.0.0.1", "192.168.1.20"):
        assert call(gate, "/admin/reload", client, "admin").status_code == 200
        refused = call(gate, "/admin/reload", client, "api")
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_admin_key"
        assert call(gate, "/admin/reload", client).status_code == 401
    # The admin key is a separate credential: it does not call the API.
    assert call(gate, "/v1/models", "127.0.0.1", "admin").status_code == 401
    assert call(gate, "/v1/models", "127.0.0.1", "api").status_code == 200


def call_path(gate: Gate, path: str, client: str, key: str) -> int:
    """The status for a POST to exactly `path` (an HTTP client would read `//admin` as a host)."""
    scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": [(b"authorization", f"Bearer {key}".encode())], "client": (client, 40000)}  # fmt: skip
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(gate(scope, receive, send))
    return sent[0]["status"]


@pytest.mark.parametrize("path", ["//admin/reload", "/admin//reload", "/admin/reload/", "///admin/reload//"])
def test_spellings_the_router_normalises_are_admin_routes_too(path: str) -> None:
    gate = Gate(_ok, api_keys=["api"], admin_keys=["admin"])
    assert call_path(gate, path, "127.0.0.1", "api") == 401
    assert call_path(gate, path, "127.0.0.1", "admin") == 200
    assert call_path(Gate(_ok, api_keys=["api"]), path, "192.168.1.20", "api") == 403
