"""Cross-site request forgery (issue 21, item 2), over raw HTTP: a page in a browser can send a
"simple" POST (text/plain, a form, or no Content-Type) to a key-less appliance on the LAN. Bodies
must be JSON, and a foreign Origin may not change state; what real clients send still works."""

from __future__ import annotations

import json
import socket

import pytest

from tests.conftest import RunningServer

CHAT = json.dumps({"model": "demo-chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})


def raw(server: RunningServer, path: str, body: str = "", **headers: str) -> tuple[int, dict[str, str], bytes]:
    """POST `body` with exactly `headers` (names with _ for -), over a socket: status, headers, body."""
    host = server.url.removeprefix("http://")
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", "Connection: close", f"Content-Length: {len(body.encode())}"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    address, port = host.split(":")
    with socket.create_connection((address, int(port)), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n" + body).encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, payload = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    parsed = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in header_lines)}
    return int(status_line.split()[1]), parsed, payload


def assert_refused(answer: tuple[int, dict[str, str], bytes], status: int, code: str) -> None:
    got, _, payload = answer
    assert got == status, payload
    error = json.loads(payload)["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == code


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain; charset=utf-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/json; charset=utf-16",
        "application/jsonx",
    ],
)
def test_bodies_that_are_not_json_are_415(server: RunningServer, content_type: str) -> None:
    assert_refused(raw(server, "/v1/chat/completions", CHAT, Content_Type=content_type), 415, "unsupported_media_type")


def test_reload_cannot_be_forged(server: RunningServer) -> None:
    assert_refused(raw(server, "/admin/reload", "{}", Content_Type="text/plain"), 415, "unsupported_media_type")
    assert_refused(raw(server, "/admin/reload", Origin="http://evil.example"), 403, "origin_not_allowed")
    # What an operator's curl sends (no body, no Content-Type, no Origin) still reloads.
    status, _, payload = raw(server, "/admin/reload")
    assert status == 200, payload


@pytest.mark.parametrize("origin", ["http://evil.example", "http://evil.example:8000", "null", "http://127.0.0.1"])
def test_foreign_origins_cannot_post(server: RunningServer, origin: str) -> None:
    answer = raw(server, "/v1/chat/completions", CHAT, Content_Type="application/json", Origin=origin)
    assert_refused(answer, 403, "origin_not_allowed")


def test_what_real_clients_send_is_accepted(server: RunningServer) -> None:
    own_origin = server.url
    accepted = [
        raw(server, "/v1/chat/completions", CHAT, Content_Type="application/json"),
        # Elasticsearch's inference client: XContentType.JSON.mediaType().
        raw(server, "/v1/chat/completions", CHAT, Content_Type="application/json; charset=UTF-8"),
        # A page served by the appliance's own origin.
        raw(server, "/v1/chat/completions", CHAT, Content_Type="application/json", Origin=own_origin),
        # Elasticsearch's versioned media type, on its own route.
        raw(
            server,
            "/_inference/chat_completion/demo-chat/_stream",
            json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 2}),
            Content_Type="application/vnd.elasticsearch+json; compatible-with=8",
        ),
        # LMI's handler reads a body without Content-Type as JSON.
        raw(server, "/predictions/demo-chat", json.dumps({"inputs": "hi", "parameters": {"max_new_tokens": 2}})),
    ]
    for status, _, payload in accepted:
        assert status == 200, payload
