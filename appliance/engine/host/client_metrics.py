"""What one `EngineClient` reports to Prometheus: the engine's gauges from its `Stats`, speculative
decoding counters, and each request's timings and totals as its events arrive.

`ClientMetrics` does nothing without a registry (`metrics=None`: tests and tools), but the
request's own timings (`RequestStream.first_token_at` and the rest, read by the request log) are
kept either way.
"""

from __future__ import annotations

import time

from appliance.engine.host.streams import RequestStream
from appliance.engine.messages import Delta, Finished, Stats
from appliance.metrics import Metrics

__all__ = ["ClientMetrics"]


class ClientMetrics:
    """The metrics of model `model` (all no-ops when `metrics` is None)."""

    def __init__(self, metrics: Metrics | None, model: str) -> None:
        self._metrics = metrics
        self._model = model
        self._inter_token = metrics.inter_token_latency.labels(model) if metrics else None
        """Observed for every token: its labelled child looked up once (a lookup per token was a
        few percent of the server's CPU in a stream)."""

    def gauges(self, stats: Stats, *, in_flight: int, ready: bool) -> None:
        """Set the gauges from the engine's latest `Stats` and the client's own counts."""
        if self._metrics:
            model = self._model
            self._metrics.running.labels(model).set(stats.running - stats.waiting)
            self._metrics.waiting.labels(model).set(stats.waiting)
            self._metrics.kv_cache_usage.labels(model).set(stats.kv_cache_usage)
            self._metrics.in_flight.labels(model).set(in_flight)
            self._metrics.model_ready.labels(model).set(1 if ready else 0)

    def speculation(self, total: tuple[int, int], previous: Stats, stats: Stats) -> tuple[int, int]:
        """`total` (drafted, accepted) with the tokens drafted and accepted since `previous`."""
        # The engine counts since it started; the client's stats are reset when it restarts.
        drafted = max(0, stats.draft_tokens - previous.draft_tokens)
        accepted = max(0, stats.accepted_tokens - previous.accepted_tokens)
        if not drafted:
            return total
        total = (total[0] + drafted, total[1] + accepted)
        if self._metrics:
            self._metrics.spec_draft_tokens.labels(self._model).inc(drafted)
            self._metrics.spec_accepted_tokens.labels(self._model).inc(accepted)
            self._metrics.spec_acceptance_rate.labels(self._model).set(total[1] / total[0])
        return total

    def restarted(self) -> None:
        if self._metrics:
            self._metrics.engine_restarts.labels(self._model).inc()
            self._metrics.model_ready.labels(self._model).set(0)

    def loaded_on_demand(self) -> None:
        if self._metrics:
            self._metrics.model_loads.labels(self._model).inc()

    def unloaded(self) -> None:
        if self._metrics:
            self._metrics.model_unloads.labels(self._model).inc()
            self._metrics.model_ready.labels(self._model).set(0)

    def load_time(self, seconds: float) -> None:
        if self._metrics:
            self._metrics.model_load_seconds.labels(self._model).observe(seconds)

    def retrieved(self, seconds: float, inputs: int, tokens: int) -> None:
        """An embeddings or rerank request answered: its latency, texts and tokens."""
        if self._metrics:
            model = self._model
            self._metrics.requests.labels(model, "stop").inc()
            self._metrics.prompt_tokens.labels(model).inc(tokens)
            self._metrics.retrieval_inputs.labels(model).inc(inputs)
            self._metrics.e2e_latency.labels(model).observe(seconds)

    def transcribed(self, seconds: float, audio_seconds: float, tokens: int) -> None:
        """A transcription or translation answered: its latency, audio and text tokens."""
        if self._metrics:
            model = self._model
            self._metrics.requests.labels(model, "stop").inc()
            self._metrics.generation_tokens.labels(model).inc(tokens)
            self._metrics.audio_seconds.labels(model).inc(audio_seconds)
            self._metrics.e2e_latency.labels(model).observe(seconds)

    def synthesized(self, seconds: float, audio_seconds: float, tokens: int) -> None:
        """A text spoken: its latency, the audio made and the text's tokens (counted as prompt)."""
        if self._metrics:
            model = self._model
            self._metrics.requests.labels(model, "stop").inc()
            self._metrics.prompt_tokens.labels(model).inc(tokens)
            self._metrics.audio_seconds.labels(model).inc(audio_seconds)
            self._metrics.e2e_latency.labels(model).observe(seconds)

    def cancelled(self, stream: RequestStream) -> None:
        stream.finish_reason = "cancelled"
        if self._metrics:
            self._metrics.requests.labels(self._model, "cancelled").inc()

    def observe(self, stream: RequestStream, event: Delta | Finished, complete: bool) -> None:
        """Update the stream's timings and totals with an event from the engine (before its reader
        sees it), and the latency histograms and request counters with them."""
        now = time.monotonic()
        tokens = stream.count_tokens(event)
        new_tokens = tokens - stream.tokens_seen
        metrics, model = self._metrics, self._model
        if new_tokens > 0:
            if stream.first_token_at is None:
                stream.first_token_at = now
                if metrics:
                    metrics.time_to_first_token.labels(model).observe(now - stream.submitted_at)
            elif self._inter_token is not None and stream.last_token_at is not None:
                gap = (now - stream.last_token_at) / new_tokens
                for _ in range(new_tokens):
                    self._inter_token.observe(gap)
            stream.last_token_at = now
            stream.tokens_seen = tokens
        if complete:
            stream.completion_tokens = tokens
            stream.finish_reason = event.finish_reason
            if metrics:
                metrics.requests.labels(model, event.finish_reason).inc()
                metrics.prompt_tokens.labels(model).inc(event.prompt_tokens)
                metrics.generation_tokens.labels(model).inc(tokens)
                metrics.e2e_latency.labels(model).observe(now - stream.submitted_at)
                if tokens > 1 and stream.first_token_at is not None:
                    metrics.time_per_output_token.labels(model).observe((now - stream.first_token_at) / (tokens - 1))
