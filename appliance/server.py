"""`appliance serve`: load the graph files, check devices, and run the HTTP server (uvicorn)."""

from __future__ import annotations

import logging
from pathlib import Path

import uvicorn

from appliance.api.app import create_app
from appliance.config import Graph, load_graphs
from appliance.engine import EngineClient
from appliance.engine.devices import available_devices, check_device
from appliance.errors import ConfigError
from appliance.sdnotify import Notifier
from appliance.service.registry import ModelRegistry
from appliance.supervisor import NotifyingServer, supervise

__all__ = ["prepare", "serve"]

log = logging.getLogger("appliance.server")


def prepare(graphs_dir: Path) -> list[Graph]:
    """Load and validate every graph file and its device; raises ConfigError."""
    graphs = load_graphs(graphs_dir)
    devices = available_devices()
    for graph in graphs:
        check_device(graph, devices)
        for required in ("openvino_model.xml", "openvino_tokenizer.xml", "openvino_detokenizer.xml"):
            if not (graph.model_dir / required).is_file():
                raise ConfigError(
                    f"{graph.source}: {graph.model_dir} has no {required} "
                    "(export the model with optimum-intel, tokenizer included)"
                )
    return graphs


def serve(
    graphs_dir: Path,
    *,
    host: str,
    port: int,
    max_body_size: int,
    log_level: str,
    drain_seconds: float = 30.0,
) -> int:
    """Serve until SIGINT/SIGTERM; returns the process exit code."""
    graphs = prepare(graphs_dir)
    fatal: list[str] = []
    server: NotifyingServer | None = None

    def on_fatal(message: str) -> None:
        # A model that cannot load at start-up stops the server: better a clear failure that
        # systemd reports than a server that answers 503 forever.
        fatal.append(message)
        if server is not None:
            server.should_exit = True

    engines = [EngineClient(graph, on_fatal=on_fatal) for graph in graphs]
    registry = ModelRegistry(engines)
    app = create_app(
        registry, max_body_size=max_body_size, background=lambda: supervise(server, registry)
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=drain_seconds,
        lifespan="on",
    )
    server = NotifyingServer(config, Notifier())
    log.info("serving %s on http://%s:%d", ", ".join(g.name for g in graphs), host, port)
    server.run()
    for message in fatal:
        log.error("%s", message)
    return 1 if fatal else 0
