"""Prometheus metrics (prometheus-client): request counts, token counters, latency histograms
(time to first token, inter-token latency, time per output token, end-to-end) and per-model engine
gauges. Names follow vLLM's where they mean the same thing, prefixed `appliance_`.

One `Metrics` object per server (its own registry, so tests can run several side by side).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]

_LATENCY_BUCKETS = (
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
_TOKEN_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.http_requests = Counter(
            "appliance_http_requests",
            "HTTP requests by route, method and status",
            ["route", "method", "status"],
            registry=r,
        )
        self.requests = Counter(
            "appliance_requests",
            "Generation requests finished, by model and finish reason",
            ["model", "finish_reason"],
            registry=r,
        )
        self.prompt_tokens = Counter("appliance_prompt_tokens", "Prompt tokens processed", ["model"], registry=r)
        self.generation_tokens = Counter("appliance_generation_tokens", "Tokens generated", ["model"], registry=r)
        self.retrieval_inputs = Counter(
            "appliance_retrieval_inputs", "Texts embedded, or documents reranked", ["model"], registry=r
        )
        self.audio_seconds = Counter(
            "appliance_audio_seconds", "Seconds of audio transcribed or translated, or spoken", ["model"], registry=r
        )
        self.time_to_first_token = Histogram(
            "appliance_time_to_first_token_seconds",
            "Time from submission to the first generated token",
            ["model"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.inter_token_latency = Histogram(
            "appliance_inter_token_latency_seconds",
            "Time between consecutive generated tokens",
            ["model"],
            buckets=_TOKEN_BUCKETS,
            registry=r,
        )
        self.time_per_output_token = Histogram(
            "appliance_request_time_per_output_token_seconds",
            "Per request: (end - first token) / (tokens - 1)",
            ["model"],
            buckets=_TOKEN_BUCKETS,
            registry=r,
        )
        self.e2e_latency = Histogram(
            "appliance_e2e_request_latency_seconds",
            "Time from submission to the last token",
            ["model"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge(
            "appliance_requests_in_flight", "Requests accepted and not finished", ["model"], registry=r
        )
        self.running = Gauge(
            "appliance_num_requests_running", "Requests scheduled in the pipeline", ["model"], registry=r
        )
        self.waiting = Gauge(
            "appliance_num_requests_waiting", "Requests in the pipeline waiting to be scheduled", ["model"], registry=r
        )
        self.kv_cache_usage = Gauge(
            "appliance_kv_cache_usage_ratio", "Fraction of the KV cache in use (0..1)", ["model"], registry=r
        )
        self.spec_draft_tokens = Counter(
            "appliance_spec_draft_tokens",
            "Speculative decoding / prompt lookup: candidate tokens validated",
            ["model"],
            registry=r,
        )
        self.spec_accepted_tokens = Counter(
            "appliance_spec_accepted_tokens",
            "Speculative decoding / prompt lookup: candidate tokens accepted",
            ["model"],
            registry=r,
        )
        self.spec_acceptance_rate = Gauge(
            "appliance_spec_acceptance_rate",
            "Accepted / candidate tokens since the server started (0..1)",
            ["model"],
            registry=r,
        )
        self.model_ready = Gauge(
            "appliance_model_ready", "1 when the model is loaded and serving", ["model"], registry=r
        )
        self.engine_restarts = Counter(
            "appliance_engine_restarts", "Engine processes restarted after a failure", ["model"], registry=r
        )
        self.model_loads = Counter(
            "appliance_model_loads", "Engines loaded on demand (a request for an unloaded model)", ["model"], registry=r
        )
        self.model_unloads = Counter(
            "appliance_model_unloads", "Engines unloaded (idle, to make room, or by an admin)", ["model"], registry=r
        )
        self.model_load_seconds = Histogram(
            "appliance_model_load_seconds",
            "Time from starting an engine to its model being ready",
            ["model"],
            buckets=(0.5, 1, 2, 5, 10, 20, 60, 120, 300, 600),
            registry=r,
        )
        self.load_queue_length = Gauge(
            "appliance_load_queue_length", "Models waiting for room to load under max_loaded_models", registry=r
        )
        self.load_queue_wait = Histogram(
            "appliance_load_queue_wait_seconds",
            "Time a model waited for room to load, from its first request queued to its load starting",
            ["model"],
            buckets=(0.01, 0.1, 0.5, 1, 2, 5, 10, 20, 60, 120, 300, 600),
            registry=r,
        )
        self.load_queue_refused = Counter(
            "appliance_load_queue_refused",
            "Requests refused a place in the load queue (reason: full) or that waited load_timeout_seconds (timeout)",
            ["model", "reason"],
            registry=r,
        )
        self.model_evictions = Counter(
            "appliance_model_evictions",
            "Engines unloaded to make room for a waiting model (also counted in appliance_model_unloads_total)",
            ["model"],
            registry=r,
        )
        self.loaded_engines = Gauge(
            "appliance_loaded_engines",
            "Engine processes counted against max_loaded_models (loading, ready, draining, retiring, exiting)",
            registry=r,
        )
        self.memory_budget = Gauge(
            "appliance_memory_budget_bytes",
            "memory_budget: bytes the loaded engines may hold together (0: none)",
            registry=r,
        )
        self.memory_counted = Gauge(
            "appliance_memory_counted_bytes",
            "Bytes counted against memory_budget: per engine process the larger of its estimated footprint and "
            "its measured RSS (0 without a budget)",
            registry=r,
        )
        self.model_rss = Gauge(
            "appliance_model_rss_bytes",
            "Resident memory of the model's engine process (VmRSS; 0 while none runs)",
            ["model"],
            registry=r,
        )
        self.work_pool_running = Gauge(
            "appliance_work_pool_running",
            "Pieces of blocking work (decoding uploads and images, encoding speech) holding a thread of their "
            "pool, work whose client left included until it stops",
            ["pool"],
            registry=r,
        )
        self.work_pool_threads = Gauge(
            "appliance_work_pool_threads", "Threads of each pool of blocking work: its bound", ["pool"], registry=r
        )
        self.event_loop_lag = Histogram(
            "appliance_event_loop_lag_seconds",
            "How late the server's event loop runs a 10 ms timer",
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5),
            registry=r,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
