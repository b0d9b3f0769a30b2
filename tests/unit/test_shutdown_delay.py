"""SIGTERM with `shutdown_delay_seconds`: /health turns 503 at once (`ModelRegistry.draining`) while
the server keeps accepting requests; the listener closes once the delay has passed, or at a second
signal. Without a delay the server stops accepting at once, as before."""

from __future__ import annotations

import asyncio
import signal
import time

import uvicorn

from appliance.runtime.registry import ModelRegistry
from appliance.runtime.sdnotify import Notifier
from appliance.runtime.supervisor import NotifyingServer


async def _app(scope: object, receive: object, send: object) -> None:
    raise AssertionError("not called")


def _server(delay: float) -> tuple[NotifyingServer, ModelRegistry]:
    models = ModelRegistry([])
    server = NotifyingServer(uvicorn.Config(_app), Notifier(), models=models, shutdown_delay=delay)
    return server, models


def _tick(server: NotifyingServer) -> bool:
    return asyncio.run(server.on_tick(1))  # counter 1: not the once-a-second header refresh


def test_sigterm_drains_after_the_delay() -> None:
    server, models = _server(0.2)
    server.handle_exit(signal.SIGTERM, None)
    assert models.draining and not server.should_exit and not _tick(server)
    time.sleep(0.25)
    assert _tick(server) and server.should_exit


def test_a_second_signal_stops_at_once() -> None:
    server, models = _server(60)
    server.handle_exit(signal.SIGTERM, None)
    assert not server.should_exit
    server.handle_exit(signal.SIGTERM, None)
    assert server.should_exit and models.draining


def test_without_a_delay_or_on_ctrl_c_the_listener_closes_at_once() -> None:
    for delay, sig in ((0.0, signal.SIGTERM), (60.0, signal.SIGINT)):
        server, models = _server(delay)
        server.handle_exit(sig, None)
        assert server.should_exit and models.draining
