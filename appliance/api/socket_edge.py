"""The gate's websocket half: what a websocket connection meets before its handler runs, and the
bounds it lives under after.

A websocket scope passes the same checks as an HTTP request (`gate.Gate`: a credential header sent
once, Host, the API key with the same open paths and admin rule, a foreign `Origin` refused), plus:

- **the key in a subprotocol**: a browser cannot set `Authorization` on a websocket, so the SDKs
  send the key as an offered subprotocol (the OpenAI JS SDK offers
  `["realtime", "openai-insecure-api-key.<key>"]`). Which prefixes carry a key is declared by the
  dialects (`DialectProfile.credential_subprotocols`); the gate names none.
- **a connection cap**, in all and per API key (`SocketLimits`), checked and claimed in one step;
- **a message-size cap** on every message the handler receives: a bigger one closes the
  connection with 1009 (uvicorn's `ws_max_size` refuses it earlier, before buffering it whole).

A refused websocket is never accepted: the refusal is an HTTP answer to the handshake in the
route's dialect's error shape (the ASGI `websocket.http.response` extension, which uvicorn
implements; `websockets` raises `InvalidStatus` carrying it, which the openai SDK passes on), or,
on a server without the extension, a close with 1008 (policy violation) before accepting.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MESSAGE_TOO_BIG",
    "POLICY_VIOLATION",
    "SocketCounts",
    "SocketLimits",
    "capped_receive",
    "refuse_socket",
    "send_json_answer",
    "subprotocol_key",
]

POLICY_VIOLATION = 1008
MESSAGE_TOO_BIG = 1009

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class SocketLimits:
    """`max_open`: websocket connections open at once, in all; `max_open_per_key`: per API key
    (per client address without keys); `max_message_bytes`: of one message the client sends
    (a 100 ms pcm16 chunk at 24 kHz is 6.4 KB, 8.6 KB in base64)."""

    max_open: int = 32
    max_open_per_key: int = 8
    max_message_bytes: int = 1024 * 1024


@dataclass
class SocketCounts:
    """The websockets open now, in all and per owner (an API key, or a client address)."""

    limits: SocketLimits
    open: int = 0
    by_owner: dict[bytes, int] = field(default_factory=dict)

    def claim(self, owner: bytes) -> str | None:
        """Count one more connection of `owner`; why not, as a sentence, when a cap is reached.
        Checked and counted with no await between (admission in one step)."""
        if self.open >= self.limits.max_open:
            return f"{self.open} websocket connections are open, the server's limit; try again shortly."
        held = self.by_owner.get(owner, 0)
        if held >= self.limits.max_open_per_key:
            return f"This API key holds {held} websocket connections, its limit; close one first."
        self.open += 1
        self.by_owner[owner] = held + 1
        return None

    def release(self, owner: bytes) -> None:
        self.open -= 1
        left = self.by_owner.get(owner, 1) - 1
        if left:
            self.by_owner[owner] = left
        else:
            self.by_owner.pop(owner, None)


def offered_subprotocols(scope: Scope) -> list[str]:
    """The subprotocols the client offered (`Sec-WebSocket-Protocol`, comma-separated)."""
    offered = scope.get("subprotocols")
    if offered is not None:
        return [str(name) for name in offered]
    values = [value.decode("latin-1") for name, value in scope["headers"] if name == b"sec-websocket-protocol"]
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def subprotocol_key(scope: Scope, prefixes: Sequence[str]) -> bytes | None:
    """The key a client sent as an offered subprotocol `<prefix><key>`, or None."""
    for offered in offered_subprotocols(scope):
        for prefix in prefixes:
            if offered.startswith(prefix) and len(offered) > len(prefix):
                return offered[len(prefix) :].encode("latin-1")
    return None


async def send_json_answer(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]], *, prefix: str = "http.response"
) -> None:
    """A JSON answer in two ASGI messages: `http.response` for a request, `websocket.http.response`
    for a refused handshake."""
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": f"{prefix}.start", "status": status, "headers": start})
    await send({"type": f"{prefix}.body", "body": body})


async def refuse_socket(send: Send, scope: Scope, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> int:
    """Refuse the handshake (see the module's docstring); the status or close code the log gets."""
    if "websocket.http.response" in scope.get("extensions", {}):
        await send_json_answer(send, status, body, headers, prefix="websocket.http.response")
        return status
    await send({"type": "websocket.close", "code": POLICY_VIOLATION})
    return POLICY_VIOLATION


def capped_receive(receive: Receive, send: Send, max_bytes: int, counted: Callable[[], None]) -> Receive:
    """`receive` that closes the connection (1009) on a message over `max_bytes` and tells the
    handler it disconnected; `counted` is called for each message received."""

    async def wrapped() -> dict[str, Any]:
        message = await receive()
        if message["type"] == "websocket.receive":
            counted()
            size = len(message.get("text") or "") + len(message.get("bytes") or b"")
            if size > max_bytes:
                await send({"type": "websocket.close", "code": MESSAGE_TOO_BIG, "reason": "message too big"})
                return {"type": "websocket.disconnect", "code": MESSAGE_TOO_BIG}
        return message

    return wrapped
