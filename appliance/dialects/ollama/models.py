"""The served models as Ollama describes them: `/api/tags` (the chat and embedding models), `/api/show`
(one model's facts) and `/api/ps` (the loaded ones and when they unload).

Everything comes from the graph and the model's files as read when the graph was validated
(`graphfiles.facts`: context, chat template, architecture, size label, quantization) and from the
lifecycle (the memory a loaded engine holds, as the memory budget counts it; when the idle unload
takes it). A model is named as its graph names it; `name:latest` finds it too, as Ollama's names do.
The `digest` identifies the graph file and the model's files as they are now (a hash of their paths,
sizes and times), not their contents: nothing is hashed on a request.
"""

from __future__ import annotations

import hashlib
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from appliance.engine import EngineClient
from appliance.errors import NotFound
from appliance.graphfiles import Graph
from appliance.protocol.ollama import ListedModel, ModelDetails, RunningModel, ShowResponse
from appliance.runtime.registry import ModelRegistry

__all__ = ["OLLAMA_TASKS", "capabilities", "find_model", "listed", "running", "shown"]

OLLAMA_TASKS = ("generate", "embed")
"""What Ollama's API serves: chat and generate, embeddings. Rerank and speech graphs are not listed."""
_FOREVER = timedelta(days=365 * 292)
"""What `expires_at` says of a model no idle unload takes: Ollama's own "forever" (Go's largest duration)."""


def find_model(models: ModelRegistry, name: str) -> EngineClient:
    """The engine serving `name`, or `name` without Ollama's default tag `:latest`."""
    try:
        return models.get(name)
    except NotFound:
        if not name.endswith(":latest"):
            raise
        return models.get(name.removesuffix(":latest"))


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _files(graph: Graph) -> list[Path]:
    folder = graph.model_dir
    try:
        return [folder] if folder.is_file() else sorted(path for path in folder.iterdir() if path.is_file())
    except OSError:
        return []


def _on_disk(graph: Graph) -> tuple[int, float, str]:
    """The model files' bytes, the latest time the graph or they changed, and the digest."""
    size, changed, seen = 0, 0.0, hashlib.sha256(graph.name.encode())
    for path in [Path(graph.source), *_files(graph)] if graph.source else _files(graph):
        try:
            stat = path.stat()
        except OSError:
            continue
        if path != Path(graph.source):
            size += stat.st_size
        changed = max(changed, stat.st_mtime)
        seen.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    return size, changed, seen.hexdigest()


def _details(graph: Graph) -> ModelDetails:
    identity = graph.facts.identity
    return ModelDetails(
        format="gguf" if graph.gguf else "openvino",
        family=identity.architecture,
        families=[identity.architecture] if identity.architecture else None,
        parameter_size=identity.size_label,
        quantization_level=identity.quantization,
    )


def listed(models: ModelRegistry) -> list[ListedModel]:
    """`/api/tags`: every chat and embedding model, loaded or not."""
    found = []
    for engine in models:
        graph = engine.graph
        if graph.task not in OLLAMA_TASKS:
            continue
        size, changed, digest = _on_disk(graph)
        found.append(
            ListedModel(
                name=graph.name,
                model=graph.name,
                modified_at=_stamp(changed),
                size=size,
                digest=digest,
                details=_details(graph),
            )
        )
    return found


def capabilities(engine: EngineClient) -> list[str]:
    """Ollama's capability names for what `engine` serves."""
    graph = engine.graph
    if graph.task == "embed":
        return ["embedding"]
    if graph.task != "generate":
        return []
    # Every chat model takes tools here: a template that does not show them gets the appliance's tool prompt.
    found = ["completion", "tools"]
    found += ["vision"] if graph.accepts_images else []
    found += ["thinking"] if engine.tools.reasoning else []
    return found


def _parameters(graph: Graph) -> str:
    """The graph's defaults as Ollama's `parameters` text: a name and a value per line."""
    values: list[tuple[str, object]] = [("num_ctx", graph.max_context)]
    defaults = graph.defaults
    for name, value in (
        ("temperature", defaults.temperature),
        ("top_p", defaults.top_p),
        ("num_predict", defaults.max_tokens),
    ):
        if value is not None:
            values.append((name, value))
    return "\n".join(f"{name:<30} {value}" for name, value in values)


def shown(engine: EngineClient) -> ShowResponse:
    """`/api/show`: the model's details, context, chat template, defaults and capabilities."""
    graph = engine.graph
    identity = graph.facts.identity
    _, changed, _ = _on_disk(graph)
    family = identity.architecture or "unknown"
    info: dict[str, object] = {"general.architecture": family, f"{family}.context_length": graph.max_context}
    if identity.size_label:
        info["general.size_label"] = identity.size_label
    if engine.embedding_size:
        info[f"{family}.embedding_length"] = engine.embedding_size
    parameters = _parameters(graph)
    modelfile = (
        f"# Served from the graph file {graph.source or graph.name}: models are configured there, not by a Modelfile.\n"
        f"FROM {graph.model_dir}\n" + "".join(f"PARAMETER {line}\n" for line in parameters.splitlines())
    )
    return ShowResponse(
        modelfile=modelfile,
        parameters=parameters,
        template=identity.template,
        details=_details(graph),
        model_info=info,
        capabilities=capabilities(engine),
        modified_at=_stamp(changed),
    )


def running(models: ModelRegistry) -> list[RunningModel]:
    """`/api/ps`: the models whose engine holds memory, the bytes it holds and when it unloads."""
    found = []
    for engine in models.loaded():
        graph = engine.graph
        if graph.task not in OLLAMA_TASKS:
            continue
        held = models.lifecycle.held_bytes(engine)
        unloads_in = models.lifecycle.unloads_in(engine)
        expires = timedelta(seconds=unloads_in) if unloads_in is not None else _FOREVER
        if engine.state == "unloading":
            expires = timedelta(0)
        _, _, digest = _on_disk(graph)
        found.append(
            RunningModel(
                name=graph.name,
                model=graph.name,
                size=held,
                digest=digest,
                details=_details(graph),
                expires_at=_stamp(time.time() + expires.total_seconds()),
                size_vram=held if graph.device.startswith("GPU") else 0,
                context_length=graph.max_context,
            )
        )
    return found
