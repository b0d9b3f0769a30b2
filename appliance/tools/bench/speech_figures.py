"""The speech bench's figures: one system's closed-loop level (`SystemRun`), a level across the
systems (`SpeechLevel`), and the arithmetic behind them.

Throughput is audio seconds transcribed per wall-clock second (the real-time factor: 20 means an
hour of audio in three minutes; higher is faster), then requests per second; latency is each
request's time from sending to its answer, p50 and p95.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

__all__ = ["SpeechLevel", "SystemRun", "closed_loop_latencies", "percentile", "word_count"]


@dataclass
class SystemRun:
    """One system at one concurrency level in one round."""

    system: str
    concurrency: int
    requests: int
    audio_seconds: float
    """Of each request's recording."""
    wall_seconds: float
    latencies: list[float]
    words: int
    """Words in all the answers' texts (the same recording each time: a system that heard less
    shows it here)."""

    @property
    def audio_per_second(self) -> float:
        return self.requests * self.audio_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def requests_per_second(self) -> float:
        return self.requests / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def p50(self) -> float:
        return percentile(self.latencies, 50)

    @property
    def p95(self) -> float:
        return percentile(self.latencies, 95)

    def as_dict(self) -> dict[str, float | int]:
        return {
            "requests": self.requests,
            "wall_seconds": round(self.wall_seconds, 4),
            "audio_seconds_per_second": round(self.audio_per_second, 3),
            "requests_per_second": round(self.requests_per_second, 4),
            "latency_p50_s": round(self.p50, 4),
            "latency_p95_s": round(self.p95, 4),
            "words": self.words,
        }


@dataclass
class SpeechLevel:
    """One concurrency level in one round: each system's run, by name, in the order measured."""

    concurrency: int
    requests: int
    runs: dict[str, SystemRun] = field(default_factory=dict)

    def served_over(self, system: str) -> float:
        """served's audio seconds per second over `system`'s (0 where either is missing)."""
        served, other = self.runs.get("served"), self.runs.get(system)
        if served is None or other is None or other.audio_per_second == 0:
            return 0.0
        return served.audio_per_second / other.audio_per_second


def closed_loop_latencies(finished: list[float], concurrency: int) -> list[float]:
    """Latencies of requests served one at a time, back to back, to `concurrency` clients in a
    closed loop: `finished[k]` is when request k ended (from the start); the client of request k
    sent it when its previous request (k - concurrency) ended, or at the start."""
    return [end - (finished[k - concurrency] if k >= concurrency else 0.0) for k, end in enumerate(finished)]


def percentile(values: list[float], percent: float) -> float:
    """The nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(percent / 100 * len(ordered)) - 1)]


def word_count(text: str) -> int:
    return len(re.findall(r"[A-Za-z0-9']+", text))
