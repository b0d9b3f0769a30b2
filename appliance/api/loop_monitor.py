"""Measures the event loop's lag: how late a periodic timer fires.

A blocked loop delays every stream; the lag is the server's own health signal (the engine runs
in other processes precisely so that this stays near zero).

The timer fires every 50 ms: a stall that long or longer is always seen. At every 10 ms it woke
the server 100 times a second, idle or not (2% of a core on an idle 2-core box), and each wake-up
took a core from the engine's threads in the middle of a step.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

__all__ = ["LoopMonitor"]


class LoopMonitor:
    def __init__(
        self,
        interval: float = 0.05,
        keep_seconds: float = 600.0,
        on_sample: Callable[[float], None] | None = None,
    ) -> None:
        self.interval = interval
        self._on_sample = on_sample
        self._samples: deque[tuple[float, float]] = deque(maxlen=int(keep_seconds / interval))
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _run(self) -> None:
        while True:
            expected = time.perf_counter() + self.interval
            await asyncio.sleep(self.interval)
            lag = max(0.0, time.perf_counter() - expected)
            self._samples.append((time.time(), lag * 1000.0))
            if self._on_sample is not None:
                self._on_sample(lag)

    def summary(self, since: float = 0.0) -> dict[str, float]:
        """Lag percentiles in milliseconds over the samples taken after `since` (Unix seconds)."""
        lags = sorted(lag for at, lag in self._samples if at >= since)
        if not lags:
            return {"samples": 0, "p50": 0.0, "p99": 0.0, "max": 0.0}

        def pick(q: float) -> float:
            return round(lags[min(len(lags) - 1, int(q * len(lags)))], 3)

        return {"samples": len(lags), "p50": pick(0.5), "p99": pick(0.99), "max": round(lags[-1], 3)}
