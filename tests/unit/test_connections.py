"""Connection limits (appliance/connections.py): the cap fits the open-file limit, resource errors
while accepting are logged sparingly, and a client that does not take its answer is dropped."""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import socket
from collections.abc import Callable
from typing import Any

import pytest
import uvicorn
from uvicorn.server import ServerState

from appliance import connections
from appliance.connections import ConnectionLimits, SparseLog, event_loop


def test_the_cap_is_lowered_to_fit_the_open_file_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resource, "getrlimit", lambda _: (1024, 4096))
    assert ConnectionLimits(max_connections=1000).within_fd_limit().max_connections == 768
    assert ConnectionLimits(max_connections=500).within_fd_limit().max_connections == 500
    monkeypatch.setattr(resource, "getrlimit", lambda _: (100, 100))
    assert ConnectionLimits(max_connections=1000).within_fd_limit().max_connections == 16


def test_sparse_log_counts_what_it_leaves_out(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    sparse = SparseLog(logging.getLogger("test.sparse"), interval=60, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, "test.sparse"):
        for now[0] in (100.0, 101.0, 102.0, 161.0, 162.0):
            sparse.warning("accept", "accept failed")
        sparse.warning("other", "another kind")
    assert [record.getMessage() for record in caplog.records] == [
        "accept failed",
        "accept failed (and 2 more like it in the last 61 s)",
        "another kind",
    ]


def test_accept_errors_are_logged_once_not_every_second(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connections, "_sparse", SparseLog(logging.getLogger("appliance.connections")))
    loop = event_loop()
    try:
        with caplog.at_level(logging.WARNING):
            for _ in range(50):
                loop.call_exception_handler(
                    {
                        "message": "socket.accept() out of system resource",
                        "exception": OSError(errno.EMFILE, "Too many open files"),
                    }
                )
    finally:
        loop.close()
    lines = [record.getMessage() for record in caplog.records]
    assert lines == ["socket.accept() out of system resource: Too many open files (see max_connections)"]
    assert not any(record.exc_info for record in caplog.records)


def test_other_loop_errors_keep_the_default_handler(caplog: pytest.LogCaptureFixture) -> None:
    loop = event_loop()
    try:
        with caplog.at_level(logging.ERROR, "asyncio"):
            loop.call_exception_handler({"message": "something else", "exception": ValueError("x")})
    finally:
        loop.close()
    assert [record.getMessage() for record in caplog.records] == ["something else"]


def test_loop_is_a_plain_selector_loop() -> None:
    loop = event_loop()
    try:
        assert isinstance(loop, asyncio.SelectorEventLoop)
    finally:
        loop.close()


class _Timer:
    def __init__(self, at: float, callback: Callable[[], None]) -> None:
        self.at, self.callback, self.cancelled = at, callback, False

    def cancel(self) -> None:
        self.cancelled = True


class _Timers:
    """A loop's `call_later` on a clock the test moves (also stands in for the `time` module)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self._timers: list[_Timer] = []

    def monotonic(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> _Timer:
        timer = _Timer(self.now + delay, callback)
        self._timers.append(timer)
        return timer

    def advance(self, seconds: float) -> None:
        until = self.now + seconds
        while due := [timer for timer in self._timers if timer.at <= until and not timer.cancelled]:
            timer = min(due, key=lambda timer: timer.at)
            self._timers.remove(timer)
            self.now = timer.at
            timer.callback()
        self.now = until


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.buffered = 0
        self.aborted = False

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def is_closing(self) -> bool:
        return self.aborted

    def abort(self) -> None:
        self.aborted = True

    close = abort

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


WRITE_TIMEOUT = 5.0


@pytest.fixture
def writer(monkeypatch: pytest.MonkeyPatch) -> tuple[_Timers, _Transport, Any]:
    """A guarded protocol on a connection whose request is being answered, with fake timers."""
    timers = _Timers()
    monkeypatch.setattr(connections, "time", timers)
    protocol_class = connections.guarded_protocol(ConnectionLimits(write_timeout=WRITE_TIMEOUT))
    config = uvicorn.Config(app=lambda scope, receive, send: None, log_config=None)
    protocol = protocol_class(config, ServerState(), {}, _loop=timers)
    transport = _Transport()
    protocol.connection_made(transport)
    protocol._cancel_deadline()  # the request has arrived: only the write deadline is under test
    return timers, transport, protocol


def test_a_client_that_takes_nothing_is_dropped_after_the_write_timeout(writer) -> None:
    timers, transport, protocol = writer
    transport.buffered = 4 * 1024 * 1024
    protocol.pause_writing()
    timers.advance(WRITE_TIMEOUT - 0.1)
    assert not transport.aborted
    timers.advance(0.2)
    assert transport.aborted


def test_a_client_that_keeps_taking_its_answer_stays(writer) -> None:
    timers, transport, protocol = writer
    transport.buffered = 4 * 1024 * 1024
    protocol.pause_writing()
    for _ in range(20):  # 200 KiB/s for 20 s: above the minimum rate
        timers.advance(1.0)
        transport.buffered -= 200 * 1024
    assert not transport.aborted
    timers.advance(2 * WRITE_TIMEOUT)  # then it stops taking
    assert transport.aborted


def test_a_trickle_of_bytes_does_not_hold_the_answer_for_ever(writer) -> None:
    timers, transport, protocol = writer
    transport.buffered = 4 * 1024 * 1024
    protocol.pause_writing()
    seconds = 0
    while not transport.aborted and seconds < 600:
        timers.advance(1.0)
        seconds += 1
        transport.buffered -= 1024  # 1 KiB/s, far below 64 KiB/s
    print(f"a 1 KiB/s reader dropped after {seconds} s")
    assert transport.aborted and seconds <= WRITE_TIMEOUT + 1


def test_writing_resumed_or_the_connection_gone_cancels_the_write_deadline(writer) -> None:
    timers, transport, protocol = writer
    transport.buffered = 100_000
    protocol.pause_writing()
    protocol.resume_writing()
    timers.advance(10 * WRITE_TIMEOUT)
    assert not transport.aborted
    protocol.pause_writing()
    protocol.connection_lost(None)
    transport.aborted = False  # connection_lost closes the transport; the deadline must not fire after
    timers.advance(10 * WRITE_TIMEOUT)
    assert not transport.aborted


def test_a_request_answered_to_a_client_that_never_reads_is_dropped_and_sees_a_disconnect() -> None:
    """A real socket: the ASGI app streaming to a client that reads nothing gets http.disconnect,
    and the client's connection is reset."""
    seen: list[str] = []

    async def app(scope: dict, receive: Callable, send: Callable) -> None:
        async def watch() -> None:
            seen.append((await receive())["type"])  # the request's body
            seen.append((await receive())["type"])  # http.disconnect, once dropped

        watcher = asyncio.ensure_future(watch())
        await send({"type": "http.response.start", "status": 200, "headers": []})
        while not watcher.done():
            await send({"type": "http.response.body", "body": b"x" * 65536, "more_body": True})

    async def serve() -> bytes:
        loop = asyncio.get_running_loop()
        protocol_class = connections.guarded_protocol(ConnectionLimits(write_timeout=0.2))
        config = uvicorn.Config(app=app, log_config=None, lifespan="off")
        state = ServerState()
        server = await loop.create_server(lambda: protocol_class(config, state, {}, _loop=loop), "127.0.0.1", 0)
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 1460)
        client.connect(server.sockets[0].getsockname())
        client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        for _ in range(200):
            if len(seen) == 2:
                break
            await asyncio.sleep(0.05)
        state_byte = client.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)
        client.close()
        server.close()
        await server.wait_closed()
        return state_byte

    tcp_state = asyncio.run(serve())
    assert seen == ["http.request", "http.disconnect"]
    assert tcp_state[0] == 7  # TCP_CLOSE: reset by the server, not left to drain


def test_only_an_answer_cut_short_is_kept_out_of_the_error_log(caplog: pytest.LogCaptureFixture) -> None:
    """uvicorn's 'Exception in ASGI application' is dropped for `AnswerCutShort` (the gate logged
    its reason in one line), and kept, traceback and all, for anything else."""
    from appliance.connections import _QuietCutShort
    from appliance.errors import AnswerCutShort

    quiet = _QuietCutShort(logging.getLogger("uvicorn.error"))
    assert quiet.level == logging.getLogger("uvicorn.error").level  # uvicorn reads it
    with caplog.at_level(logging.ERROR, logger="uvicorn.error"):
        quiet.error("Exception in ASGI application\n", exc_info=AnswerCutShort("engine failed"))
        assert caplog.records == []
        quiet.error("Exception in ASGI application\n", exc_info=ValueError("a defect"))
    assert [record.exc_info[0] for record in caplog.records] == [ValueError]
