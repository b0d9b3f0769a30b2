"""Operator routes: health (liveness and readiness) and runtime statistics."""

from __future__ import annotations

import asyncio
import os

from litestar import Response, get, post

from appliance.api.loop_monitor import LoopMonitor
from appliance.api.profiles import OPERATION, Operation
from appliance.engine import EngineClient
from appliance.errors import InvalidRequest, NotFound
from appliance.metrics import CONTENT_TYPE_LATEST, Metrics
from appliance.runtime.registry import ModelRegistry
from appliance.runtime.reload import Reloader
from appliance.runtime.watchdog import engine_rss_mb
from appliance.settings import MAX_DRAIN_SECONDS

__all__ = ["routes"]

_SILENT = ("degraded", "stalled")
_MIB = 1024 * 1024
_ADMIN = (401, 403)  # a missing admin key; a client not on this machine when no admin key is set


def _model_status(models: ModelRegistry) -> dict[str, dict[str, object]]:
    return {
        engine.name: {
            "state": engine.status,
            "load": engine.graph.load,
            "device": engine.graph.device,
            "pipeline": engine.graph.pipeline_kind,
            "pid": engine.pid,
            # What memory_budget counts: the estimate from the graph's files, the engine's VmRSS.
            "footprint_bytes": engine.graph.footprint_bytes,
            "rss_bytes": models.lifecycle.measured_bytes(engine),
            "in_flight": engine.in_flight,
            "max_queued_requests": engine.graph.limits.max_queued_requests,
            "running": engine.stats.running,
            "waiting": engine.stats.waiting,
            "kv_cache_usage": engine.stats.kv_cache_usage,
            # Pipeline steps since the engine (re)started; the stateful pipeline steps once per token.
            "steps": engine.stats.steps,
            **({"silent_seconds": round(engine.silent_seconds, 1)} if engine.status in _SILENT else {}),
            **({"speculative": _speculation(engine)} if engine.graph.assisted else {}),
            **({"error": engine.load_error} if engine.load_error else {}),
        }
        for engine in models
    }


def _speculation(engine: EngineClient) -> dict[str, object]:
    drafted, accepted = engine.speculation
    return {
        "mode": engine.graph.assisted,
        "draft_tokens": drafted,
        "accepted_tokens": accepted,
        "acceptance_rate": accepted / drafted if drafted else None,
    }


@get(
    "/health",
    cache=False,
    opt={
        OPERATION: Operation(
            summary="Readiness: every model loaded and ready",
            errors=(),
            statuses=((503, "a model is loading, restarting, degraded or stalled; no models; or draining"),),
        )
    },
)
async def health(models: ModelRegistry) -> Response:
    """200 once every model is loaded and ready; 503 (with each model's state) before, and while
    a model is restarting, "degraded" (its engine has made no progress for a few seconds) or
    "stalled" (for longer: it refuses requests until it steps again or is restarted); 503
    `no_models` while the graphs directory holds no graph file (add some, then reload); 503
    `draining` from the moment the server is asked to stop."""
    if not models.names():
        return Response(
            {
                "status": "no_models",
                "models": {},
                "message": "No models are served: add graph files to the graphs directory and reload.",
            },
            status_code=503,
            media_type="application/json",
        )
    ready = models.all_ready and not models.draining
    status = "draining" if models.draining else "ready" if ready else "not_ready"
    return Response(
        {"status": status, "models": _model_status(models)},
        status_code=200 if ready else 503,
        media_type="application/json",
    )


@get("/health/live", cache=False, opt={OPERATION: Operation(summary="Liveness", errors=())})
async def live() -> dict[str, str]:
    """200 as long as the HTTP server answers (a liveness probe; models may still be loading)."""
    return {"status": "alive"}


@get("/stats", cache=False)
async def stats(models: ModelRegistry, loop_monitor: LoopMonitor, since: float = 0.0) -> dict[str, object]:
    """Per-model engine counters and the event loop's lag (ms) over samples taken after `since`
    (Unix seconds; 0 = the last ten minutes)."""
    return {
        "pid": os.getpid(),
        "models": _model_status(models),
        "event_loop_lag_ms": loop_monitor.summary(since),
    }


@get(
    "/metrics",
    cache=False,
    opt={OPERATION: Operation(summary="Prometheus metrics", answer_media_type="text/plain", errors=(401,))},
)
async def metrics(metrics: Metrics) -> Response:
    """Prometheus text exposition, rendered on a worker thread: its size grows with the label
    values in use, and the event loop serves every stream meanwhile."""
    return Response(await asyncio.to_thread(metrics.render), media_type=CONTENT_TYPE_LATEST)


@post(
    "/admin/reload",
    status_code=200,
    opt={OPERATION: Operation(summary="Re-read the graph directory", errors=(400, *_ADMIN, 404))},
)
async def reload(reloader: Reloader | None) -> Response:
    """Re-read the graph directory (like SIGHUP) and answer with what changed. Behind the API key."""
    if reloader is None:
        raise NotFound("Reloading is not available in this server.")
    report = await reloader.reload()
    status = 400 if "error" in report else 200
    return Response(report, status_code=status, media_type="application/json")


def _lifecycle(engine: EngineClient) -> dict[str, object]:
    return {
        "state": engine.status,
        "load": engine.graph.load,
        "idle_unload_seconds": engine.graph.idle_unload_seconds,
        "pid": engine.pid,
        "footprint_mb": round(engine.graph.footprint_bytes / _MIB, 1),
        "footprint": engine.graph.footprint.describe(),
        "rss_mb": round(engine_rss_mb(engine.pid), 1) if engine.pid else None,
        "in_flight": engine.in_flight,
        "idle_seconds": round(engine.idle_seconds, 1),
        **({"error": engine.load_error} if engine.load_error else {}),
    }


@get("/admin/models", cache=False, opt={OPERATION: Operation(summary="Every model's state", errors=_ADMIN)})
async def admin_models(models: ModelRegistry) -> dict[str, object]:
    """Every graph's model with its state (unloaded, loading, ready, ...), memory and idle time."""
    return {
        "max_loaded_models": models.max_loaded_models,
        "memory_budget_mb": round(models.memory_budget / _MIB, 1),
        # Per engine process the larger of its estimate and its RSS (an exiting one: its estimate).
        "memory_counted_mb": round(models.lifecycle.counted_bytes / _MIB, 1),
        "loaded": len(models.loaded()),
        # Engine processes counted against the limit: engines retiring after a reload and exiting
        # ones included, so this may exceed `loaded` for a moment.
        "engines": models.lifecycle.engines,
        "load_queue": models.lifecycle.waiting,
        "models": {engine.name: _lifecycle(engine) for engine in models},
    }


@post(
    "/admin/models/{name:str}/load",
    status_code=200,
    opt={OPERATION: Operation(summary="Load a model now", errors=(*_ADMIN, 404, 503))},
)
async def admin_load(name: str, models: ModelRegistry) -> dict[str, object]:
    """Load the model now (as its first request would, waiting for room in the same queue) and
    answer once it is ready. During an unload's drain it cancels the unload: the model serves on
    (unless the unload makes room for a waiting model: then it waits its turn to load again)."""
    engine = models.get(name)
    await models.lifecycle.load(engine)
    return {"model": engine.name, **_lifecycle(engine)}


@post(
    "/admin/models/{name:str}/unload",
    status_code=200,
    opt={OPERATION: Operation(summary="Unload a model once its requests finish", errors=(*_ADMIN, 404))},
)
async def admin_unload(name: str, models: ModelRegistry, drain_seconds: float = 30.0) -> dict[str, object]:
    """Unload the model once its requests finish (at most `drain_seconds`, up to an hour; those
    still running then fail); its next request loads it again."""
    if not 0 <= drain_seconds <= MAX_DRAIN_SECONDS:  # false for nan too (Litestar reads "nan" and "inf")
        raise InvalidRequest(
            f"drain_seconds must be a number of seconds from 0 to {MAX_DRAIN_SECONDS:g}.", param="drain_seconds"
        )
    engine = models.get(name)
    unloaded = await models.lifecycle.unload(engine, drain_seconds)
    return {"model": engine.name, "unloaded": unloaded, **_lifecycle(engine)}


routes = [health, live, stats, metrics, reload, admin_models, admin_load, admin_unload]
