"""Reloads without a restart (SIGHUP or `POST /admin/reload`), and recycling one engine.

A reload validates the whole graph directory first (`prepare`, which runs
`graphfiles.checks.prepare_graphs`): one bad file fails the reload and leaves every running model
untouched. Then new graphs start, changed ones start beside the old engine and take over once
loaded, and removed ones stop taking requests and stop after their in-flight requests finish. A recycle (the watchdog's answer to an engine grown too large)
is the same swap for one unchanged graph. The registry's lifecycle counts every engine involved
against `max_loaded_models` until it is gone: a replacement from the moment it starts (it loads
at once, beside the old one), a replaced or removed engine until its drain has ended and its
process exited.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path

from appliance.engine import EngineClient
from appliance.errors import ConfigError
from appliance.graphfiles import Graph
from appliance.runtime.registry import ModelRegistry

__all__ = ["Reloader"]

log = logging.getLogger("appliance.reload")


class Reloader:
    """Applies the graph directory's current contents to a running registry."""

    def __init__(
        self,
        registry: ModelRegistry,
        graphs_dir: Path,
        make_engine: Callable[[Graph], EngineClient],
        *,
        prepare: Callable[[Path], list[Graph]],
        drain_seconds: float = 30.0,
        load_timeout: float = 600.0,
    ) -> None:
        self.registry = registry
        self.graphs_dir = graphs_dir
        self._make_engine = make_engine
        self._prepare = prepare
        self._drain_seconds = drain_seconds
        self._load_timeout = load_timeout
        self._lock = asyncio.Lock()

    async def reload(self) -> dict[str, object]:
        """Returns what changed: {"added", "replaced", "removed", "unchanged", "failed", "error"}."""
        async with self._lock:  # one reload at a time; a second SIGHUP waits its turn
            report: dict[str, object] = {"added": [], "replaced": [], "removed": [], "unchanged": [], "failed": {}}
            try:
                graphs = await asyncio.to_thread(self._prepare, self.graphs_dir)
            except ConfigError as exc:
                log.error("reload refused, running models untouched: %s", exc)
                return {**report, "error": str(exc)}
            wanted = {graph.name: graph for graph in graphs}
            starting: list[tuple[EngineClient, EngineClient | None]] = []
            for name, graph in wanted.items():
                current = self._current(name)
                if current is not None and current.graph == graph:
                    report["unchanged"].append(name)
                    continue
                engine = self._make_engine(graph)
                if graph.load == "on_demand":  # takes over at once, unloaded: its first request loads it
                    self._retire(self.registry.put(engine))
                    report["replaced" if current else "added"].append(name)
                    continue
                self._start_beside(engine)
                starting.append((engine, current))
            for engine, current in starting:
                if await self._loaded(engine):
                    self._retire(self.registry.put(engine))
                    report["replaced" if current else "added"].append(engine.name)
                else:
                    report["failed"][engine.name] = engine.load_error or "did not load in time"
                    await engine.stop()
            for name in set(self.registry.names()) - set(wanted):
                self._retire(self.registry.remove(name))
                report["removed"].append(name)
            log.info("reload: %s", _summary(report), extra={"fields": {"event": "reload", **report}})
            return report

    def _current(self, name: str) -> EngineClient | None:
        return next((engine for engine in self.registry if engine.name == name), None)

    async def _loaded(self, engine: EngineClient) -> bool:
        deadline = time.monotonic() + self._load_timeout
        while engine.state not in ("ready", "failed") and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        return engine.state == "ready"

    def _start_beside(self, engine: EngineClient) -> None:
        engine.start()
        self.registry.lifecycle.adopt(engine)

    def _retire(self, engine: EngineClient | None) -> None:
        """Stop `engine` once its in-flight requests finished (or the drain time ran out)."""
        self.registry.lifecycle.retire(engine, self._drain_seconds)

    async def recycle(self, engine: EngineClient, reason: str) -> bool:
        """Replace `engine` by a fresh process of the same graph without dropping requests: the new
        one loads beside it, takes over once ready, and the old one drains and stops."""
        async with self._lock:
            if self._current(engine.name) is not engine:
                return False  # replaced or removed meanwhile
            log.warning("engine %s: recycling (%s)", engine.name, reason)
            fresh = self._make_engine(engine.graph)
            self._start_beside(fresh)
            if not await self._loaded(fresh):
                log.error(
                    "engine %s: the replacement failed to load (%s); keeping the old one", engine.name, fresh.load_error
                )
                await fresh.stop()
                return False
            self._retire(self.registry.put(fresh))
            return True


def _summary(report: dict[str, object]) -> str:
    """`added a, b; removed c` (the lists that are not empty), or `no change`: for the log line."""
    parts = []
    for key in ("added", "replaced", "removed", "unchanged"):
        names = report.get(key)
        if isinstance(names, list) and names:
            parts.append(f"{key} {', '.join(names)}")
    failed = report.get("failed")
    if isinstance(failed, dict) and failed:
        parts.append("failed " + ", ".join(f"{name} ({reason})" for name, reason in failed.items()))
    return "; ".join(parts) or "no change"
