"""HTTP connections from clients that do not play fair: read and write deadlines, a connection cap,
and accept errors logged sparingly.

uvicorn (0.54, h11) closes a connection that idles between requests (`timeout_keep_alive`), but
sets no deadline while a request arrives: a client that sent half its headers, or a body shorter
than its Content-Length, held its socket for ever, and about a thousand of them used up the
unit's file descriptors (issue 21). `guarded_protocol` adds, per connection:

- a header deadline: the request line and headers must be complete `header_timeout` seconds
  after the connection opens or the previous response ends (a trickle of bytes does not extend
  it); then 408 and close;
- a body deadline: the body must keep coming, no pause longer than `body_timeout`, and arrive
  within `body_timeout` plus one second per `BYTES_PER_SECOND` received; then the connection
  closes (the handler sees a disconnect). Time the server itself stopped reading (flow control)
  does not count;
- a write deadline: once the answer fills the transport's buffer (asyncio pauses writing above
  64 KiB), the client must take some of it at least every `write_timeout` seconds, and all it
  holds within `write_timeout` plus one second per `BYTES_PER_SECOND` taken; else the
  connection is dropped, its buffer discarded (the handler sees a disconnect and the generation
  is cancelled). uvicorn stops a stream while writing is paused, but the engine goes on, and a
  non-streaming answer is written whole: a client that never reads used to hold its answer in
  the server for as long as it stayed connected (issue 28);
- a cap: beyond `max_connections`, the connection that has waited longest for its request
  headers is closed to make room, or, when every connection is busy with a request, the new one
  gets 503 and is closed at once; the server never runs out of file descriptors for its models,
  image downloads and engine pipes, and slow clients cannot lock out prompt ones.

`event_loop` makes the server's loop, whose exception handler logs accept errors (EMFILE and
friends, which asyncio reports once a second per listening socket) at most once a minute.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import resource
import socket
import struct
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import h11
from h11._connection import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from appliance.cpu_affinity import unpin_this_thread
from appliance.errors import AnswerCutShort

__all__ = ["ACCEPT_BACKLOG", "BYTES_PER_SECOND", "ConnectionLimits", "SparseLog", "event_loop", "guarded_protocol"]

log = logging.getLogger("appliance.connections")

BYTES_PER_SECOND = 64 * 1024
"""Each 64 KiB of body received, or of answer taken, extends its deadline by a second: a large
upload or answer on a slow link fits, a trickle of bytes does not."""

_FD_RESERVE = 256
"""Descriptors kept free beside the client connections: engine pipes, image downloads, logs."""
ACCEPT_BACKLOG = 64
"""The listen backlog (pass as `uvicorn.Config(backlog=...)`). asyncio accepts up to this many
connections at each turn of the loop, and each reaches `connection_made` (where the cap is
enforced) two turns later: a small backlog keeps a burst from overshooting the cap by more than
`_FD_RESERVE` (with uvicorn's default of 2048 it reached the open-file limit)."""
_LOG_INTERVAL_S = 60.0
_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


@dataclass(frozen=True)
class ConnectionLimits:
    """What a client connection may take; see the module docstring."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_connections: int = 1000
    write_timeout: float = 30.0

    def within_fd_limit(self) -> ConnectionLimits:
        """These limits with `max_connections` lowered to fit the process's open-file limit."""
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY or self.max_connections + _FD_RESERVE <= soft:
            return self
        fitted = max(16, soft - _FD_RESERVE)
        log.warning(
            "max_connections lowered from %d to %d: the open-file limit is %d (raise LimitNOFILE or ulimit -n)",
            self.max_connections,
            fitted,
            soft,
        )
        return replace(self, max_connections=fitted)


class SparseLog:
    """Logs an event's first occurrence at once, then at most once per `interval` with a count."""

    def __init__(
        self, logger: logging.Logger, interval: float = _LOG_INTERVAL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.logger = logger
        self.interval = interval
        self._clock = clock
        self._last: dict[str, float] = {}
        self._unlogged: dict[str, int] = {}

    def warning(self, key: str, message: str) -> None:
        """Log `message` unless an event of `key` was logged less than `interval` ago."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            self._unlogged[key] = self._unlogged.get(key, 0) + 1
            return
        self._last[key] = now
        more = self._unlogged.pop(key, 0)
        self.logger.warning(
            "%s%s", message, f" (and {more} more like it in the last {now - last:.0f} s)" if more else ""
        )


_sparse = SparseLog(log)


def _error_response(status: int, reason: str, message: str, code: str, extra: str = "") -> bytes:
    type_ = "invalid_request_error" if status < 500 else "server_error"
    body = json.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}})
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        f"connection: close\r\n{extra}\r\n"
    )
    return head.encode("latin-1") + body.encode()


_TIMEOUT_408 = _error_response(408, "Request Timeout", "The request headers did not arrive in time.", "request_timeout")
_FULL_503 = _error_response(
    503,
    "Service Unavailable",
    "The server has too many open connections; retry shortly.",
    "too_many_connections",
    "retry-after: 1\r\n",
)


class _WatchedConnection(h11.Connection):
    """h11's connection, telling the protocol about every event it parses."""

    def __init__(self, on_event: Callable[[Any], None], max_incomplete_event_size: int) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=max_incomplete_event_size)
        self._on_event = on_event

    def next_event(self) -> Any:
        event = super().next_event()
        self._on_event(event)
        return event


class _QuietCutShort:
    """uvicorn's error logger, silent about `AnswerCutShort`: the gate logged its reason in one
    line, and uvicorn would add 'Exception in ASGI application' with the whole traceback."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger

    def __getattr__(self, name: str) -> Any:  # level, warning, log...: the logger's own
        return getattr(self._logger, name)

    def error(self, msg: object, *args: Any, exc_info: Any = None, **kwargs: Any) -> None:
        if isinstance(exc_info, AnswerCutShort):
            return
        self._logger.error(msg, *args, exc_info=exc_info, **kwargs)


class _GuardedH11Protocol(H11Protocol):
    limits = ConnectionLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.logger = _QuietCutShort(self.logger)  # type: ignore[assignment]  # passed to each request's cycle
        size = self.config.h11_max_incomplete_event_size or DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
        self.conn = _WatchedConnection(self._on_event, size)
        self._deadline: asyncio.TimerHandle | None = None
        self._phase: str | None = None  # "headers" | "body" | None (handling, or idle keep-alive)
        self._bytes_seen = 0
        self._waiting_since = 0.0
        self._body_started = self._last_data = 0.0
        self._body_bytes = 0
        self._write_check: asyncio.TimerHandle | None = None
        self._paused_at = self._last_taken = 0.0
        self._buffered_at_pause = self._buffered = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections and not self._evict_oldest_waiting():
            _sparse.warning(
                "cap",
                f"refused a connection: {self.limits.max_connections} connections are open (max_connections)",
            )
            transport.write(_FULL_503)
            transport.close()
            return
        self._expect_headers()

    def _evict_oldest_waiting(self) -> bool:
        """Close the connection that has waited longest for its request's headers, to make room:
        slow clients cannot fill the cap and lock out clients that send their requests at once."""
        waiting = [
            other
            for other in self.connections
            if isinstance(other, _GuardedH11Protocol) and other is not self and other._phase == "headers"
        ]
        if not waiting:
            return False
        oldest = min(waiting, key=lambda other: other._waiting_since)
        _sparse.warning(
            "evict", "closed the connection waiting longest for its request headers: max_connections reached"
        )
        oldest._phase = None
        oldest._cancel_deadline()
        oldest.transport.close()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        self._cancel_write_check()
        self._phase = None
        super().connection_lost(exc)

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        # The socket now belongs to the websocket protocol (its own ping timeout and the session's
        # idle timeout bound it): a header or body deadline armed for the upgrade request would
        # otherwise close a live session `body_timeout` after it opened.
        self._cancel_deadline()
        self._cancel_write_check()
        self._phase = None
        super().handle_websocket_upgrade(event)

    def data_received(self, data: bytes) -> None:
        if self._phase is None and (self.cycle is None or self.cycle.response_complete):
            self._expect_headers()  # the next request on a kept-alive connection begins
        self._bytes_seen += len(data)
        super().data_received(data)

    def _expect_headers(self) -> None:
        self._phase = "headers"
        self._bytes_seen = 0
        self._waiting_since = time.monotonic()
        self._arm(self._waiting_since + self.limits.header_timeout)

    def _on_event(self, event: Any) -> None:
        if isinstance(event, h11.Request):
            self._phase = "body"
            self._body_started = self._last_data = time.monotonic()
            self._body_bytes = 0
            self._arm(self._body_deadline())
        elif isinstance(event, h11.Data):
            self._body_bytes += len(event.data)
            self._last_data = time.monotonic()
        elif isinstance(event, h11.EndOfMessage) and self._phase == "body":
            self._cancel_deadline()
            self._phase = None

    def _body_deadline(self) -> float:
        limits = self.limits
        whole = self._body_started + limits.body_timeout + self._body_bytes / BYTES_PER_SECOND
        return min(whole, self._last_data + limits.body_timeout)

    def _arm(self, at: float) -> None:
        self._cancel_deadline()
        self._deadline = self.loop.call_later(max(0.0, at - time.monotonic()), self._on_deadline)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _on_deadline(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._phase == "body":
            if self.flow.read_paused:
                # The server stopped reading (the handler has not consumed the body yet): the
                # client is not late, so the body's clock starts again.
                self._body_started = self._last_data = time.monotonic()
                self._body_bytes = 0
            deadline = self._body_deadline()
            if time.monotonic() < deadline:
                self._arm(deadline)
                return
            _sparse.warning("body", "closed a connection whose request body stopped arriving (body_timeout)")
        elif self._phase == "headers":
            if self._bytes_seen:
                _sparse.warning("headers", "closed a connection whose request headers did not arrive (header_timeout)")
                self.transport.write(_TIMEOUT_408)
        else:
            return
        self._phase = None
        self.transport.close()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_check is None:
            self._paused_at = self._last_taken = time.monotonic()
            self._buffered_at_pause = self._buffered = self.transport.get_write_buffer_size()
            self._write_check = self.loop.call_later(self.limits.write_timeout, self._on_write_check)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._cancel_write_check()

    def _cancel_write_check(self) -> None:
        if self._write_check is not None:
            self._write_check.cancel()
            self._write_check = None

    def _on_write_check(self) -> None:
        """Writing is still paused: drop the connection unless the client took some of its answer
        since the last check and keeps to the overall rate. (uvicorn writes nothing more while
        paused, bar the end of the message it was writing: a smaller buffer is the client's doing.)"""
        self._write_check = None
        now, buffered = time.monotonic(), self.transport.get_write_buffer_size()
        if buffered < self._buffered:
            self._buffered, self._last_taken = buffered, now
        limits = self.limits
        taken = self._buffered_at_pause - buffered
        deadline = min(
            self._last_taken + limits.write_timeout,
            self._paused_at + limits.write_timeout + taken / BYTES_PER_SECOND,
        )
        if now < deadline:
            self._write_check = self.loop.call_later(deadline - now, self._on_write_check)
            return
        _sparse.warning("write", "dropped a connection that did not take its answer (write_timeout)")
        self._phase = None
        self._cancel_deadline()
        # A reset, not a close: close() waits for ever for the buffer to be taken, and a closed
        # socket's kernel buffer (up to tcp_wmem's 4 MiB) would wait for the client too.
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()


def guarded_protocol(limits: ConnectionLimits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with `limits` (pass as `uvicorn.Config(http=...)`)."""
    return type("GuardedH11Protocol", (_GuardedH11Protocol,), {"limits": limits})


class _WebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's websocket protocol, quiet about refusals: a handshake answered with an HTTP
    response (the gate's 401/403/503, `api/socket_edge`) is complete, but uvicorn 0.54 logs
    "ASGI callable returned without completing handshake" at ERROR for each one."""

    async def send(self, message: Any) -> None:
        await super().send(message)
        if message["type"] == "websocket.http.response.body" and not message.get("more_body", False):
            self.handshake_complete = True


websocket_protocol = _WebSocketProtocol
"""Pass as `uvicorn.Config(ws=...)`."""


def _log_exception(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    exc = context.get("exception")
    if isinstance(exc, OSError) and exc.errno in _RESOURCE_ERRNOS:
        _sparse.warning(
            f"os-{exc.errno}", f"{context.get('message', 'event loop error')}: {exc.strerror} (see max_connections)"
        )
        return
    loop.default_exception_handler(context)


def event_loop() -> asyncio.AbstractEventLoop:
    """The server's event loop (pass as `uvicorn.Config(loop=...)`): resource errors while
    accepting connections are logged sparingly instead of once a second with a traceback, and
    its worker threads run on every CPU when the server's own are pinned (`cpu_affinity`)."""
    loop = asyncio.SelectorEventLoop()
    loop.set_exception_handler(_log_exception)
    # asyncio.to_thread's workers (image decoding...) on every CPU, not the server's one (server_cpus).
    loop.set_default_executor(ThreadPoolExecutor(thread_name_prefix="asyncio", initializer=unpin_this_thread))
    return loop
