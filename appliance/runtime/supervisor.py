"""The server's lifetime loop: waits for the models, then runs the engine watchdog every tick
and tells systemd how the server is doing (READY once it listens and every model is loaded,
STATUS lines, EXTEND_TIMEOUT while models compile, WATCHDOG pings while no engine failed,
STOPPING, and RELOADING around a SIGHUP reload)."""

from __future__ import annotations

import asyncio
import logging
import signal
import time

import uvicorn

from appliance.runtime.registry import ModelRegistry
from appliance.runtime.reload import Reloader
from appliance.runtime.sdnotify import Notifier
from appliance.runtime.watchdog import (
    engines_healthy,
    recycle_large_engines,
    restart_hung_engines,
    unload_idle_engines,
)

__all__ = ["NotifyingServer", "supervise"]

log = logging.getLogger("appliance.server")

# While models load, ask systemd for this much more start-up time at every check (a large model
# can compile for minutes on a GPU; each extension only holds while we keep making progress).
_LOAD_EXTENSION_S = 30.0
_TICK_S = 0.5


class NotifyingServer(uvicorn.Server):
    """uvicorn's server that says STOPPING=1 and turns /health to 503 (`models.draining`) the
    moment a stop is asked for. On SIGTERM with a `shutdown_delay`, it keeps accepting requests
    that long before the listener closes, so a load balancer polling /health (or Kubernetes
    removing the pod's endpoint) stops sending first and no request meets a refused connection;
    a second signal stops at once."""

    def __init__(
        self,
        config: uvicorn.Config,
        notifier: Notifier,
        *,
        models: ModelRegistry | None = None,
        shutdown_delay: float = 0.0,
    ) -> None:
        super().__init__(config)
        self.notifier = notifier
        self.models = models
        self.shutdown_delay = shutdown_delay
        self._delay_ends: float | None = None

    def handle_exit(self, sig: int, frame: object) -> None:
        if not self.should_exit and self._delay_ends is None:
            self.notifier.stopping()
            if self.models is not None:
                self.models.draining = True
            if self.shutdown_delay and sig == signal.SIGTERM:
                log.info("stopping: /health answers 503; requests accepted for %g s more", self.shutdown_delay)
                self._delay_ends = time.monotonic() + self.shutdown_delay
                return
        if not self.should_exit:
            log.info("stopping: no new connections; in-flight requests may finish")
        super().handle_exit(sig, frame)
        # uvicorn re-raises captured signals once it has shut down, so the process would die by
        # SIGTERM, or print a KeyboardInterrupt traceback after Ctrl+C; a drained, orderly stop
        # should exit 0 instead.
        captured = getattr(self, "_captured_signals", None)
        if isinstance(captured, list) and sig in (signal.SIGTERM, signal.SIGINT) and sig in captured:
            captured.remove(sig)

    async def on_tick(self, counter: int) -> bool:
        if self._delay_ends is not None and not self.should_exit and time.monotonic() >= self._delay_ends:
            log.info("stopping: no new connections; in-flight requests may finish")
            self.should_exit = True
        return await super().on_tick(counter)


async def _reload(notifier: Notifier, reloader: Reloader) -> None:
    # systemd's reload protocol: RELOADING=1 ... READY=1 (with MONOTONIC_USEC since v253).
    notifier.notify("RELOADING=1", f"MONOTONIC_USEC={time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000}")
    report = await reloader.reload()
    notifier.ready("reloaded" if "error" not in report else f"reload refused: {report['error']}")


async def supervise(server: NotifyingServer, models: ModelRegistry, reloader: Reloader | None = None) -> None:
    """Runs for the server's lifetime (started by the app's lifespan). SIGHUP reloads graphs."""
    notifier = server.notifier
    if reloader is not None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGHUP, lambda: loop.create_task(_reload(notifier, reloader)))
    notifier.status(f"loading {len(models)} model(s)")
    while not (server.started and models.all_ready):
        notifier.extend_timeout(_LOAD_EXTENSION_S)
        await asyncio.sleep(0.2)
    names = ", ".join(engine.name for engine in models)
    notifier.ready(f"serving {names}")
    log.info("ready: serving %s", names)
    interval = notifier.watchdog_seconds / 2 if notifier.watchdog_seconds else 0.0
    next_ping = 0.0
    last_status = ""
    recycling: set[str] = set()
    stalled: set[str] = set()
    unloading: set[str] = set()
    while True:
        restart_hung_engines(models, stalled)
        models.lifecycle.update_gauges()
        unload_idle_engines(models, unloading)
        if reloader is not None:
            recycle_large_engines(models, reloader, recycling)
        now = time.monotonic()
        if interval and now >= next_ping and engines_healthy(models):
            notifier.watchdog()
            next_ping = now + interval
        states = [f"{engine.name} {engine.status}" for engine in models if not engine.available]
        loaded = f"{len(models.loaded())} of {len(models)} models loaded"
        status = f"serving {names} ({loaded})" if not states else f"degraded ({loaded}): " + ", ".join(states)
        if status != last_status:
            notifier.status(status)
            last_status = status
        await asyncio.sleep(min(interval, _TICK_S) if interval else _TICK_S)
