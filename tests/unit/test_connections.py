"""Connection limits (appliance/connections.py): the cap fits the open-file limit, and resource
errors while accepting are logged sparingly."""

from __future__ import annotations

import asyncio
import errno
import logging
import resource

import pytest

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
