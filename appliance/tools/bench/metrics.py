"""Serving metrics from per-request timings, as vLLM's serving benchmark defines them.

- TTFT: time from sending the request to the first chunk that carries output text.
- TPOT: per request, (latency - TTFT) / (output tokens - 1): the mean time per token after the first.
- ITL: every gap between consecutive output chunks, pooled over all requests. A chunk that carries
  several tokens is one gap, exactly as vLLM counts it.
- Throughputs divide totals over the successful requests by the level's wall-clock duration.
- Goodput (DistServe's term, as vLLM's benchmark reports it): successful requests per second whose
  TTFT and TPOT both meet their targets (`Slo`).
- Multi-turn conversations: TTFT and the prompt length the server counted, per turn number
  (`summarize_turns`), so the last turn, which carries the whole history, can be compared.

The same code summarizes the HTTP run and the raw-pipeline run, so their ratios compare like with like.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

__all__ = [
    "Distribution",
    "LevelMetrics",
    "RequestResult",
    "Slo",
    "TurnMetrics",
    "distribution",
    "percentile",
    "summarize",
    "summarize_turns",
]


@dataclass
class RequestResult:
    """One request's outcome; times are seconds relative to when the request was sent."""

    ok: bool
    prompt_tokens: int = 0
    """As reported by the server (usage.prompt_tokens), or the ids submitted for the raw pipeline."""
    output_tokens: int = 0
    chunk_times: list[float] = field(default_factory=list)
    """Arrival time of each chunk that carried output."""
    latency: float = 0.0
    """Until the response ended (`[DONE]`, or the pipeline finished the request)."""
    error: str = ""
    send_delay: float = 0.0
    """Open loop: how long after its scheduled arrival the bench's client sent it (counted in its times)."""
    text: str = ""
    """The output text (a multi-turn conversation sends it back as the assistant's message)."""
    cached_tokens: int | None = None
    """Prompt tokens the server reported taking from its prefix cache; None: it did not say."""

    @property
    def ttft(self) -> float | None:
        return self.chunk_times[0] if self.chunk_times else None

    @property
    def tpot(self) -> float | None:
        """None for a single-token output (no time *between* tokens)."""
        if self.ttft is None or self.output_tokens < 2:
            return None
        return (self.latency - self.ttft) / (self.output_tokens - 1)

    @property
    def itl(self) -> list[float]:
        return [later - earlier for earlier, later in zip(self.chunk_times, self.chunk_times[1:])]


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation between ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class Distribution:
    """mean / median / p99 in milliseconds (NaN when there were no samples)."""

    mean: float
    median: float
    p99: float

    def as_dict(self) -> dict[str, float | None]:
        return {name: (None if math.isnan(value) else round(value, 3)) for name, value in asdict(self).items()}


def distribution(seconds: Sequence[float]) -> Distribution:
    """Summarize durations given in seconds as milliseconds."""
    if not seconds:
        return Distribution(math.nan, math.nan, math.nan)
    ms = [value * 1000.0 for value in seconds]
    return Distribution(mean=sum(ms) / len(ms), median=percentile(ms, 50), p99=percentile(ms, 99))


@dataclass(frozen=True)
class Slo:
    """The service-level targets goodput counts against, in milliseconds."""

    ttft_ms: float = 1000.0
    tpot_ms: float = 100.0

    def met_by(self, result: RequestResult) -> bool:
        """A successful request whose TTFT and TPOT (if defined: one token has none) are within target."""
        if not result.ok or result.ttft is None or result.ttft * 1000.0 > self.ttft_ms:
            return False
        return result.tpot is None or result.tpot * 1000.0 <= self.tpot_ms


@dataclass(frozen=True)
class LevelMetrics:
    """Everything reported for one concurrency level of one run (served or raw)."""

    concurrency: int | None
    """None in an open-loop level."""
    requests: int
    completed: int
    failed: int
    duration_s: float
    request_throughput: float
    """Successful requests per second."""
    output_throughput: float
    """Output tokens of successful requests per second."""
    total_token_throughput: float
    """Prompt + output tokens of successful requests per second."""
    ttft_ms: Distribution
    tpot_ms: Distribution
    itl_ms: Distribution
    e2el_ms: Distribution
    prompt_token_mismatches: int
    """Successful requests whose reported prompt length differs from the intended one."""
    errors: tuple[str, ...]
    """The first few distinct failure messages."""
    output_token_mismatches: int = 0
    """Failed requests that did end, but with a token count other than the one asked for."""
    max_send_delay_ms: float = 0.0
    """Open loop: the latest the bench's client sent a request after its scheduled arrival."""
    goodput: float = 0.0
    """Requests per second that succeeded within the `Slo`."""
    slo_met: int = 0
    """How many requests that is."""

    def as_dict(self) -> dict[str, object]:
        data = asdict(self)
        for name in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"):
            data[name] = getattr(self, name).as_dict()
        data["errors"] = list(self.errors)
        return data


def summarize(
    results: Sequence[RequestResult],
    *,
    concurrency: int | None,
    duration_s: float,
    prompt_tokens: int | None,
    output_tokens: int | None = None,
    slo: Slo | None = None,
) -> LevelMetrics:
    """Aggregate one level's request results; failed requests count only in `failed` and `errors`.
    `concurrency` is None for an open-loop level; `prompt_tokens` None: prompts of no fixed length
    (multi-turn), so no mismatches are counted; `slo` None: the default targets."""
    good = [result for result in results if result.ok]
    failed = [result for result in results if not result.ok]
    output = sum(result.output_tokens for result in good)
    prompt = sum(result.prompt_tokens for result in good)
    per_second = 1.0 / duration_s if duration_s > 0 else 0.0
    slo_met = sum(1 for result in good if (slo or Slo()).met_by(result))
    return LevelMetrics(
        concurrency=concurrency,
        requests=len(results),
        completed=len(good),
        failed=len(failed),
        duration_s=round(duration_s, 4),
        request_throughput=len(good) * per_second,
        output_throughput=output * per_second,
        total_token_throughput=(prompt + output) * per_second,
        ttft_ms=distribution([r.ttft for r in good if r.ttft is not None]),
        tpot_ms=distribution([r.tpot for r in good if r.tpot is not None]),
        itl_ms=distribution([gap for r in good for gap in r.itl]),
        e2el_ms=distribution([r.latency for r in good]),
        prompt_token_mismatches=sum(1 for r in good if prompt_tokens is not None and r.prompt_tokens != prompt_tokens),
        errors=tuple(dict.fromkeys(r.error for r in failed))[:5],
        output_token_mismatches=sum(
            1 for r in failed if output_tokens is not None and r.output_tokens and r.output_tokens != output_tokens
        ),
        max_send_delay_ms=round(max((r.send_delay for r in results), default=0.0) * 1000.0, 3),
        goodput=slo_met * per_second,
        slo_met=slo_met,
    )


@dataclass(frozen=True)
class TurnMetrics:
    """One turn number of a multi-turn level: the request of that turn in every conversation."""

    turn: int
    """1 for the first user message."""
    completed: int
    failed: int
    ttft_ms: Distribution
    e2el_ms: Distribution
    prompt_tokens: float
    """Mean prompt length the server reported (usage.prompt_tokens) for the successful requests; NaN: none."""
    errors: tuple[str, ...]
    """The first few distinct failure messages."""
    cached_tokens: float = math.nan
    """Mean cached prompt tokens over the successful requests whose server reported them
    (usage.prompt_tokens_details.cached_tokens); NaN: none did."""

    def as_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["ttft_ms"], data["e2el_ms"] = self.ttft_ms.as_dict(), self.e2el_ms.as_dict()
        data["prompt_tokens"] = None if math.isnan(self.prompt_tokens) else round(self.prompt_tokens, 1)
        data["cached_tokens"] = None if math.isnan(self.cached_tokens) else round(self.cached_tokens, 1)
        data["errors"] = list(self.errors)
        return data


def summarize_turns(conversations: Sequence[Sequence[RequestResult]]) -> tuple[TurnMetrics, ...]:
    """Per turn number, the requests of that turn over all `conversations` (each a result per turn)."""
    turns = []
    for index in range(max((len(conversation) for conversation in conversations), default=0)):
        results = [conversation[index] for conversation in conversations if len(conversation) > index]
        good = [result for result in results if result.ok]
        cached = [result.cached_tokens for result in good if result.cached_tokens is not None]
        turns.append(
            TurnMetrics(
                turn=index + 1,
                completed=len(good),
                failed=len(results) - len(good),
                ttft_ms=distribution([r.ttft for r in good if r.ttft is not None]),
                e2el_ms=distribution([r.latency for r in good]),
                prompt_tokens=sum(r.prompt_tokens for r in good) / len(good) if good else math.nan,
                errors=tuple(dict.fromkeys(r.error for r in results if not r.ok))[:5],
                cached_tokens=sum(cached) / len(cached) if cached else math.nan,
            )
        )
    return tuple(turns)
