"""The engine watchdog: what the supervisor checks on every tick.

An engine idle for its graph's `idle_unload_seconds` is unloaded (loaded again by its next
request). An engine that makes no progress for `limits.engine_hang_seconds` is killed (its client then
restarts it like after a crash, with back-off); one whose process grew past
`limits.engine_max_rss_mb` is replaced by a fresh process without dropping requests. A failed
engine stops the systemd watchdog pings, so systemd restarts the whole service.
"""

from __future__ import annotations

import asyncio
import logging

from appliance.memory_budget import process_rss_bytes
from appliance.runtime.registry import ModelRegistry
from appliance.runtime.reload import Reloader

__all__ = ["engine_rss_mb", "engines_healthy", "recycle_large_engines", "restart_hung_engines", "unload_idle_engines"]

log = logging.getLogger("appliance.server")


def engines_healthy(models: ModelRegistry) -> bool:
    """False when an engine failed for good (hung ones are killed and restarted, see below)."""
    return all(engine.state != "failed" for engine in models)


def engine_rss_mb(pid: int | None) -> float:
    """Resident memory of a process in MiB (0 when it cannot be read)."""
    return process_rss_bytes(pid) / (1024 * 1024)


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


def unload_idle_engines(models: ModelRegistry, busy: set[str]) -> None:
    """Unload every engine idle (nothing in flight) for its graph's `idle_unload_seconds`; its next
    request loads it again. `busy` holds the names being unloaded."""
    for engine in models:
        idle = engine.graph.idle_unload_seconds
        if not idle or engine.name in busy or engine.idle_seconds < idle:
            continue
        log.info(
            "engine %s: idle for %.1f s (idle_unload_seconds = %g): unloading", engine.name, engine.idle_seconds, idle
        )
        busy.add(engine.name)
        task = asyncio.get_running_loop().create_task(models.lifecycle.unload(engine))
        task.add_done_callback(lambda _, name=engine.name: busy.discard(name))
