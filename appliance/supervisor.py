"""Tells systemd how the server is doing: READY once it listens and every model is loaded,
STATUS lines, EXTEND_TIMEOUT while models compile, and WATCHDOG pings tied to engine health.
Also watches the engines: restarts those that stopped making progress or grew too large."""

from __future__ import annotations

import asyncio
import logging
import signal
import time

import uvicorn

from appliance.sdnotify import Notifier
from appliance.service.graphs import Reloader
from appliance.service.registry import ModelRegistry

__all__ = ["NotifyingServer", "supervise"]

log = logging.getLogger("appliance.server")

# While models load, ask systemd for this much more start-up time at every check (a large model
# can compile for minutes on a GPU; each extension only holds while we keep making progress).
_LOAD_EXTENSION_S = 30.0
_TICK_S = 0.5


class NotifyingServer(uvicorn.Server):
    """uvicorn's server that says STOPPING=1 the moment a stop is asked for."""

    def __init__(self, config: uvicorn.Config, notifier: Notifier) -> None:
        super().__init__(config)
        self.notifier = notifier

    def handle_exit(self, sig: int, frame: object) -> None:
        if not self.should_exit:
            self.notifier.stopping()
            log.info("stopping: no new connections; in-flight requests may finish")
        super().handle_exit(sig, frame)
        # uvicorn re-raises captured signals once it has shut down, so the process would die by
        # SIGTERM; a drained, orderly stop should exit 0 instead.
        captured = getattr(self, "_captured_signals", None)
        if isinstance(captured, list) and sig == signal.SIGTERM and sig in captured:
            captured.remove(sig)


async def _reload(notifier: Notifier, reloader: Reloader) -> None:
    # systemd's reload protocol: RELOADING=1 ... READY=1 (with MONOTONIC_USEC since v253).
    notifier.notify("RELOADING=1", f"MONOTONIC_USEC={time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000}")
    report = await reloader.reload()
    notifier.ready("reloaded" if "error" not in report else f"reload refused: {report['error']}")


def engines_healthy(models: ModelRegistry) -> bool:
    """False when an engine failed for good (hung ones are killed and restarted, see below)."""
    return all(engine.state != "failed" for engine in models)


def engine_rss_mb(pid: int | None) -> float:
    """Resident memory of a process in MiB (0 when it cannot be read)."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def recycle_large_engines(models: ModelRegistry, reloader: Reloader, busy: set[str]) -> None:
    """Start a replacement for every engine above its graph's `engine_max_rss_mb`."""
    for engine in models:
        limit = engine.graph.limits.engine_max_rss_mb
        if not limit or engine.state != "ready" or engine.name in busy:
            continue
        rss = engine_rss_mb(engine.pid)
        if rss > limit:
            busy.add(engine.name)
            task = asyncio.get_running_loop().create_task(reloader.recycle(engine, f"RSS {rss:.0f} MiB > {limit} MiB"))
            task.add_done_callback(lambda _, name=engine.name: busy.discard(name))


def restart_hung_engines(models: ModelRegistry, stalled: set[str]) -> None:
    """Kill engines that made no progress for `engine_hang_seconds`, whether or not clients still
    wait on them (a wedged engine whose clients left would otherwise hold its memory and the next
    request): their requests end with an error, and the engine restarts like after a crash.

    Loading does not count (an engine is watched once it is ready); `stalled` holds the names
    already logged as stalled, so each stall is logged once.
    """
    for engine in models:
        silent, limit = engine.silent_seconds, engine.graph.limits.engine_hang_seconds
        if silent > limit:
            engine.kill(
                f"no progress for {silent:.1f} s (limits.engine_hang_seconds = {limit:g}) "
                f"with {engine.in_flight} requests in flight; it will be restarted"
            )
        elif engine.status != "stalled":
            stalled.discard(engine.name)
        elif engine.name not in stalled:
            stalled.add(engine.name)
            log.warning(
                "engine %s: no progress for %.1f s; /health shows it stalled (killed after %g s)",
                engine.name,
                silent,
                limit,
            )


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
    while True:
        restart_hung_engines(models, stalled)
        if reloader is not None:
            recycle_large_engines(models, reloader, recycling)
        now = time.monotonic()
        if interval and now >= next_ping and engines_healthy(models):
            notifier.watchdog()
            next_ping = now + interval
        states = [f"{engine.name} {engine.status}" for engine in models if engine.status != "ready"]
        status = f"serving {names}" if not states else "degraded: " + ", ".join(states)
        if status != last_status:
            notifier.status(status)
            last_status = status
        await asyncio.sleep(min(interval, _TICK_S) if interval else _TICK_S)
