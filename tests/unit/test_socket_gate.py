"""The gate covers websockets: no websocket route of the app is reached without what an HTTP route
needs (the key, a Host it answers to, an Origin it allows, one credential header), the key may come
as the browser SDKs' subprotocol, connections are capped in all and per key, a message over the
size cap closes the connection (1009), and each connection is one access-log line."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from litestar.routes import WebSocketRoute

from appliance.api.gate import Gate
from appliance.api.route_labels import RouteLabels
from appliance.api.socket_edge import SocketLimits
from appliance.metrics import Metrics
from tests.apps import fake_app
from tests.fakes import FakeEngineClient, fake_graph

KEY = "socket-key"
HOST = "box.local:8000"


class Recorder:
    """The app behind the gate, noting which websocket scopes reached it; it accepts each and
    echoes what it receives until the client leaves."""

    def __init__(self) -> None:
        self.app = fake_app(FakeEngineClient(fake_graph("fake")))
        self.routes, self.state = self.app.routes, self.app.state
        self.reached: list[str] = []

    async def __call__(self, scope, receive, send) -> None:
        self.reached.append(scope["path"])
        await receive()  # websocket.connect
        await send({"type": "websocket.accept", "subprotocol": None, "headers": []})
        while (message := await receive())["type"] == "websocket.receive":
            await send({"type": "websocket.send", "text": message.get("text")})


def websocket_paths(recorder: Recorder) -> list[str]:
    return [route.path for route in recorder.routes if isinstance(route, WebSocketRoute)]


def connect(
    gate: Gate,
    path: str,
    headers: dict[str, str],
    *,
    subprotocols: list[str] = (),
    messages: list[str] = (),
    extension: bool = True,
    client: str = "192.168.1.20",
) -> list[dict]:
    """What the gate sends for a websocket handshake on `path` followed by `messages`."""
    scope = {
        "type": "websocket",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"model=fake",
        "headers": [(name.lower().encode(), value.encode()) for name, value in headers.items()],
        "subprotocols": list(subprotocols),
        "client": (client, 40000),
        "extensions": {"websocket.http.response": {}} if extension else {},
    }
    incoming = [{"type": "websocket.connect"}, *({"type": "websocket.receive", "text": m} for m in messages)]
    incoming.append({"type": "websocket.disconnect", "code": 1000})
    sent: list[dict] = []

    async def receive() -> dict:
        return incoming.pop(0) if incoming else {"type": "websocket.disconnect", "code": 1000}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(gate(scope, receive, send))
    return sent


def status(sent: list[dict]) -> int:
    first = sent[0]
    if first["type"] == "websocket.http.response.start":
        return first["status"]
    return 101 if first["type"] == "websocket.accept" else first["code"]


def test_no_websocket_route_is_reached_without_what_an_http_route_needs() -> None:
    recorder = Recorder()
    paths = websocket_paths(recorder)
    assert "/v1/realtime" in paths and "/v3/realtime" in paths
    gate = Gate(recorder, api_keys=[KEY], allowed_hosts=["box.local"])
    good = {"Authorization": f"Bearer {KEY}", "Host": HOST}
    for path in paths:
        recorder.reached.clear()
        assert status(connect(gate, path, {"Host": HOST})) == 401
        assert status(connect(gate, path, {**good, "Authorization": "Bearer wrong"})) == 401
        assert status(connect(gate, path, {**good, "Host": "evil.example"})) == 400
        assert status(connect(gate, path, {**good, "Origin": "https://evil.example"})) == 403
        assert not recorder.reached, path
        assert status(connect(gate, path, good)) == 101
        assert status(connect(gate, path, {**good, "Origin": "http://box.local:8000"})) == 101
        assert (
            status(connect(gate, path, {"Host": HOST}, subprotocols=["realtime", f"openai-insecure-api-key.{KEY}"]))
            == 101
        )
        assert recorder.reached == [path] * 3


def test_a_refusal_is_the_handshakes_http_answer_or_a_policy_close() -> None:
    gate = Gate(Recorder(), api_keys=[KEY])
    sent = connect(gate, "/v1/realtime", {})
    assert sent[0]["status"] == 401
    body = json.loads(sent[1]["body"])
    assert body["error"]["code"] == "invalid_api_key" and body["error"]["type"] == "authentication_error"
    # Without the ASGI extension: closed before it is accepted, 1008 (policy violation).
    assert connect(gate, "/v1/realtime", {}, extension=False) == [{"type": "websocket.close", "code": 1008}]


def test_a_websocket_with_its_key_twice_is_refused() -> None:
    recorder = Recorder()
    gate = Gate(recorder, api_keys=[KEY])
    scope = {"type": "websocket", "path": "/v1/realtime", "query_string": b"", "client": ("10.0.0.1", 1),
             "headers": [(b"authorization", f"Bearer {KEY}".encode())] * 2,
             "extensions": {"websocket.http.response": {}}}  # fmt: skip
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "websocket.connect"}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(gate(scope, receive, send))
    assert sent[0]["status"] == 400 and not recorder.reached


def test_connections_are_capped_in_all_and_per_key() -> None:
    limits = SocketLimits(max_open=3, max_open_per_key=2)
    gate = Gate(Recorder(), api_keys=["a", "b", "c"], socket_limits=limits)
    assert gate.sockets.claim(b"a") is None and gate.sockets.claim(b"a") is None
    refused = connect(gate, "/v1/realtime", {"Authorization": "Bearer a"})
    assert refused[0]["status"] == 503 and (b"retry-after", b"1") in refused[0]["headers"]
    assert gate.sockets.claim(b"b") is None
    assert status(connect(gate, "/v1/realtime", {"Authorization": "Bearer c"})) == 503  # 3 open in all
    gate.sockets.release(b"a")
    assert status(connect(gate, "/v1/realtime", {"Authorization": "Bearer c"})) == 101
    assert gate.sockets.open == 2  # the connection that ended gave its place back


def test_a_message_over_the_size_cap_closes_the_connection() -> None:
    gate = Gate(Recorder(), socket_limits=SocketLimits(max_message_bytes=100))
    sent = connect(gate, "/v1/realtime", {}, messages=["x" * 100, "y" * 101, "z"])
    assert [m["type"] for m in sent] == ["websocket.accept", "websocket.send", "websocket.close"]
    assert sent[-1]["code"] == 1009


def test_one_access_log_line_and_a_metric_per_connection(caplog: pytest.LogCaptureFixture) -> None:
    metrics, recorder = Metrics(), Recorder()
    gate = Gate(recorder, api_keys=[KEY], metrics=metrics, route_labels=RouteLabels(recorder.routes))
    with caplog.at_level(logging.INFO, logger="appliance.access"):
        connect(gate, "/v1/realtime", {"Authorization": f"Bearer {KEY}"}, messages=["a", "b"])
        connect(gate, "/v1/realtime", {})
    lines = [json.loads(record.getMessage()) for record in caplog.records if record.name == "appliance.access"]
    assert [(line["event"], line["status"]) for line in lines] == [("websocket", 101), ("websocket", 401)]
    assert (lines[0]["messages_in"], lines[0]["messages_out"]) == (2, 2)
    for code in ("101", "401"):
        labels = {"route": "/v1/realtime", "method": "WEBSOCKET", "status": code}
        assert metrics.registry.get_sample_value("appliance_http_requests_total", labels) == 1
