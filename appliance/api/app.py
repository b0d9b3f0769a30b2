"""The Litestar application: routes, dependencies, error handlers and the engines' lifespan."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar
from litestar.di import Provide

from appliance.api import (
    batch_routes,
    elastic_routes,
    files_routes,
    lmi_routes,
    messages_routes,
    ollama_routes,
    openai_routes,
    openapi,
    ops_routes,
    playground,
    realtime_routes,
    responses_routes,
    retrieval_routes,
    speech_routes,
    tokenize_routes,
    tts_routes,
)
from appliance.api.errors import exception_handlers
from appliance.api.loop_monitor import LoopMonitor
from appliance.batches import BatchRunner
from appliance.dialects.lmi import LmiOptions
from appliance.dialects.realtime.session import RealtimeLimits
from appliance.dialects.responses.store import ResponseStore
from appliance.entry import Entry
from appliance.media import ImageLoader
from appliance.metrics import Metrics
from appliance.runtime.registry import ModelRegistry
from appliance.runtime.reload import Reloader
from appliance.store import Store, open_store

__all__ = ["create_app"]

log = logging.getLogger("appliance.server")

DEFAULT_MAX_BODY_SIZE = 32 * 1024 * 1024


def create_app(
    models: ModelRegistry,
    *,
    max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    start_engines: bool = True,
    background: Callable[[], Coroutine[Any, Any, None]] | None = None,
    metrics: Metrics | None = None,
    reloader: Reloader | None = None,
    media: ImageLoader | None = None,
    lmi: LmiOptions | None = None,
    store: Store | None = None,
    serve_playground: bool = True,
    realtime: RealtimeLimits | None = None,
) -> Litestar:
    """The app serving `models`. With `start_engines`, the lifespan spawns and stops the engines
    (the server listens while they load; /health answers 503 until all are ready). `background`
    runs for the app's lifetime (e.g. the systemd supervisor). `media` loads chat images (default:
    base64 data URLs only); the app closes it. `lmi`: the /invocations settings. `store`: the
    stored responses, files and batches (default: an empty store in memory, the default bounds);
    its opener closes it (a test app runs its lifespan more than once).
    `serve_playground`: the chat page at /playground, a browser's visit to / sent to it.
    `realtime`: the bounds of each Realtime API session (default: `RealtimeLimits()`)."""
    metrics = metrics or Metrics()
    media = media or ImageLoader()
    store = store or open_store()
    entry = Entry(models, media, ResponseStore(store.responses))
    batch_runner = BatchRunner(entry, store)
    monitor = LoopMonitor(on_sample=metrics.event_loop_lag.observe)
    for pool in media.pools():
        metrics.work_pool_running.labels(pool=pool.name).set_function(lambda pool=pool: pool.running)
        metrics.work_pool_threads.labels(pool=pool.name).set(pool.workers)

    @asynccontextmanager
    async def lifespan(_: Litestar) -> AsyncIterator[None]:
        monitor.start()
        if start_engines:
            for engine in models:
                if engine.graph.load == "start":  # the others load on their first request
                    engine.start()
        task = asyncio.get_running_loop().create_task(background()) if background else None
        batch_runner.start()  # batches a stop or a crash interrupted resume
        try:
            yield
        finally:
            await batch_runner.stop()
            if task is not None:
                task.cancel()
            monitor.stop()
            await models.lifecycle.close()  # engines retiring after a reload stop first
            await media.aclose()
            if start_engines:
                for engine in list(models):
                    await engine.stop()

    def provide(value: object) -> Callable[[], object]:
        return lambda: value

    return Litestar(
        route_handlers=[
            openai_routes.router,
            lmi_routes.router,
            elastic_routes.router,
            *responses_routes.routes,
            *files_routes.routes,
            *batch_routes.routes,
            *messages_routes.routers,
            *ollama_routes.routers(playground.PAGE if serve_playground else None),
            *tokenize_routes.routes,
            *retrieval_routes.routes,
            *speech_routes.routes,
            *realtime_routes.routers,
            *tts_routes.routes,
            *ops_routes.routes,
            *openapi.routes,
            *(playground.routes() if serve_playground else []),
        ],
        dependencies={
            "models": Provide(provide(models), sync_to_thread=False),
            "loop_monitor": Provide(provide(monitor), sync_to_thread=False),
            "metrics": Provide(provide(metrics), sync_to_thread=False),
            "reloader": Provide(provide(reloader), sync_to_thread=False),
            "media": Provide(provide(media), sync_to_thread=False),
            "audio": Provide(lambda: media.audio, sync_to_thread=False),
            "realtime_limits": Provide(provide(realtime or RealtimeLimits()), sync_to_thread=False),
            "lmi_options": Provide(provide(lmi or LmiOptions()), sync_to_thread=False),
            "store": Provide(provide(store), sync_to_thread=False),
            "response_store": Provide(provide(entry.responses), sync_to_thread=False),
            "entry": Provide(provide(entry), sync_to_thread=False),
            "batch_runner": Provide(provide(batch_runner), sync_to_thread=False),
        },
        exception_handlers=exception_handlers,
        lifespan=[lifespan],
        request_max_body_size=max_body_size,
        openapi_config=None,
        logging_config=None,
    )
