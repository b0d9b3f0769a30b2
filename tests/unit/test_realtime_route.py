"""The Realtime route opens its session through the entry: the model looked up by `Entry.engine`,
as every route's, and admitted on its engines as an HTTP request would be, before the websocket's
handshake is accepted (refusals as the handshake's HTTP answer, in OpenAI's error shape)."""

from __future__ import annotations

import asyncio
import json

import pytest

from appliance.entry import Entry
from tests.apps import fake_app
from tests.fakes import FakeEngineClient, fake_graph


def _handshake(engine: FakeEngineClient, model: str, state: str = "ready") -> list[dict]:
    """What the app sends for a handshake on /v1/realtime?model=<model>, the engine in `state`."""
    app = fake_app(engine)
    scope = {
        "type": "websocket",
        "path": "/v1/realtime",
        "raw_path": b"/v1/realtime",
        "query_string": f"model={model}".encode(),
        "headers": [],
        "subprotocols": [],
        "client": ("127.0.0.1", 40000),
        "extensions": {"websocket.http.response": {}},
    }
    incoming = [{"type": "websocket.connect"}, {"type": "websocket.disconnect", "code": 1000}]
    sent: list[dict] = []

    async def receive() -> dict:
        return incoming.pop(0) if incoming else {"type": "websocket.disconnect", "code": 1000}

    async def send(message: dict) -> None:
        sent.append(message)

    async def go() -> None:
        engine.start()
        engine.state = state
        await app(scope, receive, send)

    asyncio.run(go())
    return sent


def _refusal(sent: list[dict]) -> tuple[int, dict[bytes, bytes], dict]:
    start, body = sent[0], sent[1]
    assert start["type"] == "websocket.http.response.start", sent
    return start["status"], dict(start["headers"]), json.loads(body["body"])["error"]


def test_the_model_is_looked_up_by_the_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    looked_up: list[str] = []
    lookup = Entry.engine

    def engine(self: Entry, model: str):
        looked_up.append(model)
        return lookup(self, model)

    monkeypatch.setattr(Entry, "engine", engine)
    sent = _handshake(FakeEngineClient(fake_graph("talker")), "talker")
    assert sent[0]["type"] == "websocket.accept"
    assert looked_up == ["talker"]
    status, _, error = _refusal(_handshake(FakeEngineClient(fake_graph("talker")), "nope"))
    assert (status, error["code"], error["param"]) == (404, "model_not_found", "model")
    assert looked_up[-1] == "nope"


def test_a_model_not_ready_is_refused_at_the_handshake_as_http_is() -> None:
    status, headers, error = _refusal(_handshake(FakeEngineClient(fake_graph("talker")), "talker", "restarting"))
    assert status == 503 and headers[b"retry-after"] == b"5"
    assert "restarting" in error["message"]
