"""The served models by name."""

from __future__ import annotations

from collections.abc import Iterator

from appliance.engine import EngineClient
from appliance.errors import NotFound

__all__ = ["ModelRegistry"]


class ModelRegistry:
    """Engine clients keyed by model name, in graph-file order."""

    def __init__(self, engines: list[EngineClient]) -> None:
        self._engines = {engine.name: engine for engine in engines}
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
        return previous

    def remove(self, name: str) -> EngineClient | None:
        """Stop routing requests to `name`; its in-flight requests are the caller's to drain."""
        return self._engines.pop(name, None)

    @property
    def all_ready(self) -> bool:
        """Every engine loaded and making progress (a stalled one is not ready)."""
        return all(engine.status == "ready" for engine in self)
