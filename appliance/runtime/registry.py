"""The served models by name, and the budget of how many may be loaded at once.

A model loaded on demand (`load = "on_demand"`, or unloaded when idle) asks the registry for room
first (`EngineClient.make_room`): with `max_loaded_models` set, the least recently used loaded
model with nothing in flight is unloaded to make it; if every loaded model is busy the request
gets a 503 with Retry-After, never a load that would not fit.
"""

from __future__ import annotations

from collections.abc import Iterator

from appliance.engine import EngineClient
from appliance.errors import NotFound, Overloaded

__all__ = ["ModelRegistry"]


class ModelRegistry:
    """Engine clients keyed by model name, in graph-file order."""

    def __init__(self, engines: list[EngineClient], *, max_loaded_models: int = 0) -> None:
        self._engines: dict[str, EngineClient] = {}
        self.max_loaded_models = max_loaded_models
        """At most this many engines loaded (or loading) at once; 0: no limit."""
        for engine in engines:
            self.put(engine)
        # Set once the server is stopping: /health answers 503 so load balancers stop sending.
        self.draining = False

    def __iter__(self) -> Iterator[EngineClient]:
        return iter(self._engines.values())

    def __len__(self) -> int:
        return len(self._engines)

    def get(self, name: str) -> EngineClient:
        """The engine serving the model `name`, or the model with `name` among its graph's aliases."""
        try:
            return self._engines[name]
        except KeyError:
            for engine in self._engines.values():
                if name in engine.graph.aliases:
                    return engine
            raise NotFound(
                f"The model '{name}' does not exist. Served models: {', '.join(self._engines)}.",
                param="model",
                code="model_not_found",
            ) from None

    def names(self) -> list[str]:
        return list(self._engines)

    def put(self, engine: EngineClient) -> EngineClient | None:
        """Serve `engine` under its name from now on; returns the engine it replaced, if any."""
        previous = self._engines.get(engine.name)
        self._engines[engine.name] = engine
        engine.make_room = self._make_room
        return previous

    def remove(self, name: str) -> EngineClient | None:
        """Stop routing requests to `name`; its in-flight requests are the caller's to drain."""
        return self._engines.pop(name, None)

    @property
    def all_ready(self) -> bool:
        """Every engine loaded and making progress (a stalled one is not ready), or unloaded and
        available on demand."""
        return all(engine.available for engine in self)

    def loaded(self) -> list[EngineClient]:
        """The engines that hold (or are taking) memory: loading, ready, restarting, unloading."""
        return [engine for engine in self if engine.state in ("loading", "ready", "restarting", "unloading")]

    async def _make_room(self, loading: EngineClient) -> None:
        """Unload least recently used idle engines until `loading` fits `max_loaded_models`."""
        while self.max_loaded_models and len(others := [e for e in self.loaded() if e is not loading]) >= (
            self.max_loaded_models
        ):
            idle = [engine for engine in others if engine.state == "ready" and not engine.in_flight]
            if not idle:
                raise Overloaded(
                    f"Model '{loading.name}' is not loaded and {len(others)} models are, the limit "
                    f"(max_loaded_models), all of them busy; try again shortly.",
                    retry_after=5,
                )
            victim = min(idle, key=lambda engine: engine.last_used)
            await victim.unload()
