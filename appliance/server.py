"""`appliance serve`: load the graph files, check devices, and run the HTTP server (uvicorn)."""

from __future__ import annotations

import errno
import functools
import logging
import socket
from collections.abc import Callable
from pathlib import Path

import msgspec
import uvicorn

from appliance.api import playground
from appliance.api.app import create_app
from appliance.api.gate import Gate
from appliance.api.route_labels import RouteLabels
from appliance.api.socket_edge import SocketLimits
from appliance.connections import (
    ACCEPT_BACKLOG,
    ConnectionLimits,
    event_loop,
    guarded_protocol,
    websocket_protocol,
)
from appliance.cpu_affinity import cpu_list, pin_server
from appliance.cpu_features import isa
from appliance.dialects.lmi import LmiOptions
from appliance.dialects.realtime.session import RealtimeLimits
from appliance.engine import EngineClient
from appliance.engine.host.devices import available_devices
from appliance.engine.host.templates import ToolFormat
from appliance.errors import ConfigError
from appliance.graphfiles import Graph
from appliance.graphfiles.checks import prepare_graphs
from appliance.graphfiles.footprint import over_budget
from appliance.graphfiles.tuning import tune_hint
from appliance.media import ImageLoader, build_policy
from appliance.memory_budget import MemoryBudget, resolve_memory_budget
from appliance.metrics import Metrics
from appliance.runtime.backoff import restart_delay
from appliance.runtime.registry import ModelRegistry
from appliance.runtime.reload import Reloader
from appliance.runtime.sdnotify import Notifier
from appliance.runtime.supervisor import NotifyingServer, supervise
from appliance.settings import Settings, exposure_warning, key_file, state_directory
from appliance.store import StoreLimits, open_store

__all__ = ["CannotListen", "load_api_keys", "serve"]

log = logging.getLogger("appliance.server")


class CannotListen(Exception):
    """The address to listen on is taken, not this machine's, or needs privileges: `serve` says so
    in one line and exits 3, before any engine starts."""


def serve(settings: Settings) -> int:
    """Serve until SIGINT/SIGTERM; returns the process exit code."""
    # First: threads started from here on (OpenVINO's for the device check included) inherit it.
    pinned = pin_server(settings.server_cpus)

    budget = resolve_memory_budget(settings.memory_budget)

    def checked(directory: Path) -> list[Graph]:
        graphs = [
            _with_cache_dir(graph, settings.model_cache_dir)
            for graph in prepare_graphs(directory, available_devices(), allow_empty=True)
        ]
        # At start-up and at each reload: a graph that could never load is refused, naming the sizes.
        too_big = [problem for graph in graphs if (problem := over_budget(graph.name, graph.footprint, budget))]
        if too_big:
            raise ConfigError("; ".join(too_big))
        return graphs

    cpu_isa = isa()

    def announced(graphs: list[Graph]) -> list[Graph]:
        for graph in graphs:  # at start-up and at each reload: what every bound is derived from
            log.info("model %s: %s", graph.name, graph.facts.describe(graph.max_context))
            log.info("model %s: %s", graph.name, graph.footprint.describe())
            if graph.task == "generate":
                log.info("model %s: tools: %s", graph.name, ToolFormat.of(graph, graph.facts.template))
            hint = tune_hint(graph, cpu_isa)
            if hint:
                log.info("model %s: %s", graph.name, hint)
        return graphs

    def prepare(directory: Path) -> list[Graph]:
        return announced(checked(directory))

    graphs = checked(Path(settings.graphs))
    api_keys = load_api_keys(settings.api_key_file)
    admin_keys = load_api_keys(settings.admin_key_file, credential="admin-keys", kind="admin key")
    # Bound here, before the app exists: uvicorn binds after the lifespan has started the engines,
    # so a port in use used to mean an engine traceback (its pipe broken) and exit 3 after seconds.
    listener = _listen(settings.host, settings.port)
    # Opened (and logged) once listening: a port in use stays a one-line error.
    store = open_store(
        settings.store_url,
        state_directory(settings.state_dir),
        StoreLimits(
            max_stored_responses=settings.max_stored_responses,
            max_file_bytes=settings.max_file_bytes,
            max_file_lines=settings.max_file_lines,
            max_stored_file_bytes=settings.max_stored_file_bytes,
        ),
    )
    announced(graphs)  # once listening: a port in use stays a one-line error
    if budget is not None:
        log.info("memory budget: %s for the loaded models together", budget.describe())
    if pinned is not None:  # logged once listening: a port in use stays a one-line error
        log.info(
            "server threads on CPU %s, engines on CPUs %s (server_cpus = %s)",
            cpu_list(pinned[0]),
            cpu_list(pinned[1]),
            settings.server_cpus,
        )
    media = ImageLoader(
        build_policy(
            allowed_domains=settings.allowed_media_domains,
            allowed_networks=settings.allowed_media_networks,
            allowed_local_media_path=settings.allowed_local_media_path,
            max_image_bytes=settings.max_image_bytes,
            fetch_timeout=settings.media_fetch_timeout,
        )
    )
    fatal: list[str] = []
    server: NotifyingServer | None = None

    def on_fatal(message: str) -> None:
        # A model that cannot load at start-up stops the server: better a clear failure that
        # systemd reports than a server that answers 503 forever.
        fatal.append(message)
        if server is not None:
            server.should_exit = True

    metrics = Metrics()
    registry = _registry(settings, graphs, metrics, on_fatal, budget)
    # Engines started by a reload must not stop the server when they fail: the reload reports it.
    reloader = Reloader(
        registry,
        Path(settings.graphs),
        _engine_maker(settings, metrics),
        prepare=prepare,
        drain_seconds=settings.drain_seconds,
    )
    app = create_app(
        registry,
        max_body_size=settings.max_body_size,
        metrics=metrics,
        reloader=reloader,
        background=lambda: supervise(server, registry, reloader),
        media=media,
        lmi=LmiOptions(settings.lmi_output_formatter, settings.tgi_compat, settings.invocations_model),
        serve_playground=not settings.disable_playground,
        store=store,
        realtime=RealtimeLimits(
            max_buffer_seconds=settings.realtime_buffer_seconds, idle_seconds=settings.realtime_idle_seconds
        ),
    )
    open_paths = ["/health", "/health/live"] + (["/metrics"] if settings.metrics_open else [])
    # The page (static files only) loads without a key; it asks for one and sends it with its calls.
    open_paths += [] if settings.disable_playground else list(playground.PUBLIC_PATHS)
    gated = Gate(
        app,
        metrics=metrics,
        api_keys=api_keys,
        admin_keys=admin_keys,
        open_paths=open_paths,
        allowed_hosts=settings.allowed_hosts,
        cors_origins=settings.cors_allowed_origins,
        route_labels=RouteLabels(app.routes),
        socket_limits=SocketLimits(
            max_open=settings.websocket_connections, max_open_per_key=settings.websocket_connections_per_key
        ),
    )
    config = uvicorn.Config(
        gated,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        log_config=None,  # its records reach the root logger, in the format `configure_logging` chose
        access_log=False,
        timeout_graceful_shutdown=settings.drain_seconds,
        lifespan="on",
        http=guarded_protocol(
            ConnectionLimits(
                header_timeout=settings.header_timeout,
                body_timeout=settings.body_timeout,
                max_connections=settings.max_connections,
                write_timeout=settings.write_timeout,
            ).within_fd_limit()
        ),
        backlog=ACCEPT_BACKLOG,
        # A websocket message over the gate's cap is refused by the protocol before it is buffered.
        ws_max_size=SocketLimits().max_message_bytes,
        ws=websocket_protocol,
        loop=event_loop,  # type: ignore[arg-type]  # uvicorn takes a loop factory as well as a name
    )
    server = NotifyingServer(config, Notifier(), models=registry, shutdown_delay=settings.shutdown_delay_seconds)
    if warning := exposure_warning(settings, has_api_keys=bool(api_keys)):
        log.warning("%s", warning)
    if not graphs:
        log.warning(
            "%s holds no graph files: serving no models until graph files are added and reloaded", settings.graphs
        )
    log.info(
        "serving %s on http://%s:%d (API keys: %s)",
        ", ".join(g.name for g in graphs) or "no models",
        settings.host,
        settings.port,
        f"{len(api_keys)} configured" if api_keys else "none, open to every client",
    )
    try:
        server.run(sockets=[listener])
    finally:
        store.database.close()
    for message in fatal:
        log.error("%s", message)
    return 1 if fatal else 0


def _registry(
    settings: Settings,
    graphs: list[Graph],
    metrics: Metrics,
    on_fatal: Callable[[str], None],
    budget: MemoryBudget | None,
) -> ModelRegistry:
    """An engine client per graph (none started yet), served under the settings' load limits."""
    engines = [_engine_maker(settings, metrics, on_fatal)(graph) for graph in graphs]
    return ModelRegistry(
        engines,
        max_loaded_models=settings.max_loaded_models,
        memory_budget=budget.bytes if budget is not None else 0,
        load_queue_size=settings.load_queue_size,
        min_resident_seconds=settings.min_resident_seconds,
        metrics=metrics,
    )


def _engine_maker(
    settings: Settings, metrics: Metrics | None, on_fatal: Callable[[str], None] | None = None
) -> Callable[[Graph], EngineClient]:
    """How the server makes a graph's engine client: the restart policy, the metrics and the
    batch lane's settings. `on_fatal` for the engines of start-up only (a reload reports its own)."""
    return functools.partial(
        EngineClient,
        restart_delay=restart_delay,
        on_fatal=on_fatal,
        metrics=metrics,
        batch_lines=settings.batch_lines_per_model,
        batch_grace_seconds=settings.batch_grace_seconds,
    )


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, or CannotListen saying why in words an operator can act on."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise CannotListen(f"cannot listen on {where}: '{host}' is not an address or a known host name") from exc
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(ACCEPT_BACKLOG)
    except OSError as exc:
        sock.close()
        reason = {
            errno.EADDRINUSE: "the port is already in use by another process (`ss -ltnp` shows which); "
            "stop it, or choose another port with --port",
            errno.EADDRNOTAVAIL: "the address is not one of this machine's (--host 0.0.0.0 listens on all of them)",
            errno.EACCES: "permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)",
        }.get(exc.errno or 0, exc.strerror or str(exc))
        raise CannotListen(f"cannot listen on {where}: {reason}") from exc
    return sock


def _with_cache_dir(graph: Graph, cache_dir: str) -> Graph:
    if not cache_dir or "CACHE_DIR" in graph.plugin_config:
        return graph
    return msgspec.structs.replace(graph, plugin_config={**graph.plugin_config, "CACHE_DIR": cache_dir})


def load_api_keys(path: str, *, credential: str = "api-keys", kind: str = "API key") -> list[str]:
    """Keys from `path`, or from systemd's credential `credential` when no path is set."""
    found = key_file(path, credential)
    if found is None:
        return []
    try:
        lines = Path(found).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"{found}: cannot read {kind} file: {exc.strerror}") from exc
    keys = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    if not keys:
        raise ConfigError(f"{found}: the {kind} file holds no keys")
    return keys
