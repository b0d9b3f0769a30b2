"""The life of `EngineClient`'s engine process: loaded on demand, unloaded after a drain, stopped,
killed when hung, restarted with back-off when it dies.

When a model loads or unloads, and how many may be loaded at once, is the runtime's decision
(`appliance.runtime.lifecycle`, across models): it sets the client's `loader` and `on_released`.
Here is what one engine does when told, and what its process's exit means: a crash to restart
after (`restart_delay`), a failed load (on demand: a 503 for its waiters, the others served on;
at start-up: fatal), an unload or a stop.
"""

from __future__ import annotations

import asyncio
import logging
import time

from appliance.engine.host.engine_process import EngineProcess
from appliance.engine.messages import Stats
from appliance.errors import EngineFailure, ModelNotReady

__all__ = ["ProcessLifecycle"]

log = logging.getLogger("appliance.engine")


class ProcessLifecycle:
    """Starting, unloading, stopping and restarting `EngineClient`'s engine process (a part of the
    client: the state it changes is the client's)."""

    async def ensure_loaded(self) -> None:
        """Load an unloaded engine and wait until it is ready (concurrent callers share one load,
        bounded by `load_timeout_seconds`); at once for an engine already loaded or loading at
        start-up. With a `loader`, the runtime decides when the load starts. Raises ModelNotReady
        (503) if it does not load in time, Overloaded if there is no room."""
        self.last_used = time.monotonic()
        if self.loader is not None:
            await self.loader(self)
            return
        if self.state == "unloaded":
            self.begin_load()
        await self.wait_loaded(self._on_demand, self.graph.load_timeout_seconds)

    def begin_load(self) -> asyncio.Future[None]:
        """Start loading the unloaded engine on demand; the future is done once it is ready, failed
        if it cannot load."""
        self.load_error = ""
        loading = self._on_demand = asyncio.get_running_loop().create_future()
        self._metrics.loaded_on_demand()
        self.start()
        return loading

    async def wait_loaded(self, loading: asyncio.Future[None] | None, seconds: float) -> None:
        """Wait for the load on demand `loading` (None: nothing to wait for), at most `seconds`;
        ModelNotReady (503) when it fails or is not ready by then."""
        if loading is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(loading), max(0.0, seconds))
        except TimeoutError:
            timeout = self.graph.load_timeout_seconds
            raise ModelNotReady(
                f"Model '{self.name}' is loading and was not ready within {timeout:g} s "
                "(load_timeout_seconds); try again shortly.",
                retry_after=5,
            ) from None

    async def unload(self, drain_seconds: float = 0.0) -> bool:
        """Stop the engine once its requests finish (waiting at most `drain_seconds`; requests
        still running then fail); the next request loads it again. False if it was not loaded,
        or if `keep` cancelled the unload while it waited for its requests."""
        if self.state not in ("ready", "loading", "restarting"):
            return False
        drain = self._drain = object() if self.state == "ready" else None
        self.state = "unloading"
        deadline = time.monotonic() + drain_seconds
        while self.in_flight and time.monotonic() < deadline and self._drain is drain:
            await asyncio.sleep(0.05)
        if self._drain is not drain:  # kept (and perhaps being unloaded again by another call)
            return False
        self._drain = None
        self.state = "unloaded"
        self._ever_ready = False
        self._metrics.unloaded()
        log.info("engine %s: unloaded", self.name)
        await self._shut_down(ModelNotReady(f"Model '{self.name}' was unloaded.", retry_after=1))
        return True

    def keep(self) -> bool:
        """Cancel an unload still waiting for this engine's requests to finish: it serves on, the
        same process. False when there is none to cancel (not unloading, or its process is already
        being stopped)."""
        if self._drain is None or self.state != "unloading":
            return False
        self._drain = None
        self.state = "ready"
        log.info("engine %s: unload cancelled; serving on", self.name)
        return True

    def start(self) -> None:
        """Spawn the engine process; returns at once (the model loads in the background)."""
        self._loop = asyncio.get_running_loop()
        self.state = "restarting" if self._ever_ready else "loading"
        self._ready.clear()
        self._process = EngineProcess(self.graph, on_message=self._on_message, on_exit=self._on_engine_died)
        self._outbox = self._process.outbox
        log.info(
            "engine %s: loading %s on %s (pid %d)",
            self.name,
            self.graph.model_dir,
            self.graph.device,
            self._process.pid,
        )

    def kill(self, reason: str) -> None:
        """Kill a hung engine process; its death is handled like a crash (errors, then restart)."""
        if self._process is not None and self._process.is_alive():
            log.error("engine %s: killing pid %s: %s", self.name, self._process.pid, reason)
            self._process.kill()

    async def wait_ready(self) -> None:
        await self._ready.wait()

    async def stop(self, timeout: float = 5.0) -> None:
        """Ask the engine to exit; kill it if it does not within `timeout`."""
        self.state = "stopped"
        await self._shut_down(ModelNotReady(f"Model '{self.name}' is shutting down."), timeout)

    async def _shut_down(self, error: Exception, timeout: float = 5.0) -> None:
        """Fail what is in flight with `error`, ask the process to exit, kill it after `timeout`.
        The client lets go of the process at once: a load on demand may start another meanwhile."""
        if self._restart_task is not None:
            self._restart_task.cancel()
        self._fail_all(error)
        process, self._process = self._process, None
        if process is None:
            return
        self._ready.clear()
        self.stats = Stats(running=0, kv_cache_usage=0.0, steps=0)
        self._update_gauges()
        self.exiting += 1
        try:
            await process.shut_down(timeout)
        finally:
            self.exiting -= 1
            self._released()

    def _released(self) -> None:
        if self.on_released is not None:
            self.on_released(self)

    # -- failure and restart ----------------------------------------------------------------

    def _fail_all(self, error: Exception) -> None:
        loading, self._on_demand = self._on_demand, None
        if loading is not None and not loading.done():
            loading.set_exception(error)
            loading.exception()  # retrieved here: no waiter may be left to see it
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        for stream in self._streams.values():
            stream.fail(str(error))
        self._streams.clear()

    def _on_engine_died(self) -> None:
        try:
            self._handle_death()
        finally:
            self._released()

    def _handle_death(self) -> None:
        process, self._process = self._process, None
        exit_code = process.exit_code() if process is not None else None
        self._ready.clear()
        self.stats = Stats(running=0, kv_cache_usage=0.0, steps=0)
        self._update_gauges()
        if self.state in ("stopped", "unloaded"):
            return
        if self._on_demand is not None:  # a load on demand failed: the server keeps serving the others
            self.state = "unloaded"
            reason = self.load_error or f"engine exited with code {exit_code}"
            log.error("engine %s: failed to load on demand: %s", self.name, reason)
            self._fail_all(ModelNotReady(f"Model '{self.name}' failed to load: {reason}", retry_after=30))
            return
        if not self._ever_ready:
            self.state = "failed"
            message = (
                f"graph {self.graph.source}: model '{self.name}' failed to load on device "
                f"{self.graph.device}: {self.load_error or f'engine exited with code {exit_code}'}"
            )
            self._fail_all(EngineFailure(message))
            if self._on_fatal is not None:
                self._on_fatal(message)
            return
        log.error("engine %s: process died (exit code %s); restarting", self.name, exit_code)
        self._fail_all(EngineFailure(f"The engine of model '{self.name}' failed; the request was lost."))
        self.state = "restarting"
        self._metrics.restarted()
        delay = self._restart_delay(self._restarts)
        self._restarts += 1
        self._restart_task = self._loop.create_task(self._restart_after(delay))

    async def _restart_after(self, delay: float) -> None:
        await asyncio.sleep(delay)
        if self.state == "restarting":
            self.start()
