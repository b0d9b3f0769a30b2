"""The served models by name, and their lifecycle.

Requests are routed through the registry (`get`); when an engine may load or must unload to stay
within `max_loaded_models` and `memory_budget` is the registry's `lifecycle` (`runtime.lifecycle.Lifecycle`), which
every engine put here asks before it loads on demand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from appliance.engine import EngineClient
from appliance.errors import NotFound
from appliance.memory_budget import process_rss_bytes
from appliance.metrics import Metrics
from appliance.runtime.lifecycle import Lifecycle

__all__ = ["ModelRegistry"]


class ModelRegistry:
    """Engine clients keyed by model name, in graph-file order."""

    def __init__(
        self,
        engines: list[EngineClient],
        *,
        max_loaded_models: int = 0,
        memory_budget: int = 0,
        load_queue_size: int = 8,
        min_resident_seconds: float = 10.0,
        metrics: Metrics | None = None,
        measure_rss: Callable[[int | None], int] = process_rss_bytes,
    ) -> None:
        self._engines: dict[str, EngineClient] = {}
        self.lifecycle = Lifecycle(
            self._engines.values,
            max_loaded_models=max_loaded_models,
            memory_budget=memory_budget,
            load_queue_size=load_queue_size,
            min_resident_seconds=min_resident_seconds,
            metrics=metrics,
            measure_rss=measure_rss,
        )
        for engine in engines:
            self.put(engine)
        # Set once the server is stopping: /health answers 503 so load balancers stop sending.
        self.draining = False

    @property
    def max_loaded_models(self) -> int:
        """At most this many engines loaded (or loading, draining, retiring) at once; 0: no limit."""
        return self.lifecycle.max_loaded_models

    @property
    def memory_budget(self) -> int:
        """Bytes the loaded engines may hold together (0: no budget); see `Lifecycle`."""
        return self.lifecycle.memory_budget

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
        engine.peer = self.get
        self.lifecycle.attach(engine)
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
