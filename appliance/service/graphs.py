"""Graph files -> engines: validation at start-up and reloads without a restart (SIGHUP or
`POST /admin/reload`).

A reload validates the whole directory first: one bad file fails the reload and leaves every
running model untouched. Then new graphs start, changed ones start beside the old engine and take
over once loaded, and removed ones stop taking requests and stop after their in-flight requests
finish.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from collections.abc import Callable
from pathlib import Path

from appliance.config import VISION_ENCODER_IR, Graph, is_npu, load_graphs
from appliance.engine import EngineClient
from appliance.engine.devices import available_devices, check_device
from appliance.errors import ConfigError
from appliance.service.registry import ModelRegistry

__all__ = ["Reloader", "prepare_graphs"]

log = logging.getLogger("appliance.reload")

REQUIRED_FILES = ("openvino_tokenizer.xml", "openvino_detokenizer.xml")


def prepare_graphs(graphs_dir: Path) -> list[Graph]:
    """Load and validate every graph file, its model folder and its device; raises ConfigError."""
    graphs = load_graphs(graphs_dir)
    devices = available_devices()
    for graph in graphs:
        check_device(graph, devices)
        model_ir = graph.model_dir / "openvino_model.xml"
        vlm_ir = graph.model_dir / "openvino_language_model.xml"
        missing = [name for name in REQUIRED_FILES if not (graph.model_dir / name).is_file()]
        if not model_ir.is_file() and not vlm_ir.is_file():
            missing.insert(0, "openvino_model.xml")
        if missing:
            raise ConfigError(
                f"{graph.source}: {graph.model_dir} has no {', '.join(missing)} "
                "(export the model with optimum-intel, tokenizer included: see `appliance export`)"
            )
        has_vision = (graph.model_dir / VISION_ENCODER_IR).is_file()
        if graph.pipeline in ("VLM_CB", "VLM") and not has_vision:
            raise ConfigError(
                f"{graph.source}: `pipeline` is {graph.pipeline} but {graph.model_dir} has no {VISION_ENCODER_IR} "
                "(not a vision-language model export)"
            )
        if graph.pipeline in ("LM_CB", "LM") and has_vision:
            raise ConfigError(
                f"{graph.source}: `pipeline` is {graph.pipeline} but {graph.model_dir} holds a vision-language model "
                f"(use {graph.pipeline.replace('LM', 'VLM', 1)} or AUTO)"
            )
        if graph.draft_dir is not None:
            _check_draft(graph, graph.draft_dir)
        if graph.stateful and not is_npu(graph.device) and "MIN_RESPONSE_LEN" in graph.plugin_config:
            # Kept valid so one graph file can move between an NPU box and a CPU one, but said.
            log.warning(
                "%s: plugin_config.MIN_RESPONSE_LEN sizes the NPU's KV cache and has no effect on %s "
                "(the stateful pipeline's cache grows there); MAX_PROMPT_LEN is still enforced",
                graph.source,
                graph.device,
            )
    return graphs


def _check_draft(graph: Graph, draft_dir: Path) -> None:
    if not (draft_dir / "openvino_model.xml").is_file():
        raise ConfigError(f"{graph.source}: draft model {draft_dir} has no openvino_model.xml")
    if not (draft_dir / "openvino_tokenizer.bin").is_file():
        raise ConfigError(
            f"{graph.source}: draft model {draft_dir} has no openvino_tokenizer.xml/.bin: export it "
            "with its tokenizer so it can be checked against the main model's"
        )
    if _tokenizer_identity(graph.model_dir) != _tokenizer_identity(draft_dir):
        raise ConfigError(
            f"{graph.source}: the draft model {draft_dir} has a different tokenizer from the main "
            f"model {graph.model_dir}: speculative decoding needs the main model's tokenizer"
        )


_IGNORED_RT_INFO = ("info", "chat_template")
_RT_INFO = re.compile(r"<rt_info>(.*)</rt_info>", re.S)
_RT_ENTRY = re.compile(r'<(\w+)(?: name="([^"]*)")?(?: value="([^"]*)")? ?/>')


def _tokenizer_identity(model_dir: Path) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The tokenizer's constants (vocabulary, merges) and settings (special-token ids, ...).

    Left out: the IR's layer names (they differ between two exports of one tokenizer), the tool
    versions in its rt_info, and the chat template (only the main model's renders prompts; the
    draft sees token ids)."""
    with (model_dir / "openvino_tokenizer.bin").open("rb") as file:
        constants = hashlib.file_digest(file, "sha256").hexdigest()
    xml = (model_dir / "openvino_tokenizer.xml").read_text(encoding="utf-8", errors="replace")
    blocks = _RT_INFO.findall(xml)
    entries = _RT_ENTRY.findall(blocks[-1]) if blocks else []
    settings = tuple(
        sorted((tag, value) for tag, name, value in entries if tag not in _IGNORED_RT_INFO and "version" not in tag)
    )
    return constants, settings


class Reloader:
    """Applies the graph directory's current contents to a running registry."""

    def __init__(
        self,
        registry: ModelRegistry,
        graphs_dir: Path,
        make_engine: Callable[[Graph], EngineClient],
        *,
        prepare: Callable[[Path], list[Graph]] = prepare_graphs,
        drain_seconds: float = 30.0,
        load_timeout: float = 600.0,
    ) -> None:
        self.registry = registry
        self.graphs_dir = graphs_dir
        self._make_engine = make_engine
        self._prepare = prepare
        self._drain_seconds = drain_seconds
        self._load_timeout = load_timeout
        self._lock = asyncio.Lock()
        self._retiring: set[asyncio.Task[None]] = set()

    async def reload(self) -> dict[str, object]:
        """Returns what changed: {"added", "replaced", "removed", "unchanged", "failed", "error"}."""
        async with self._lock:  # one reload at a time; a second SIGHUP waits its turn
            report: dict[str, object] = {"added": [], "replaced": [], "removed": [], "unchanged": [], "failed": {}}
            try:
                graphs = await asyncio.to_thread(self._prepare, self.graphs_dir)
            except ConfigError as exc:
                log.error("reload refused, running models untouched: %s", exc)
                return {**report, "error": str(exc)}
            wanted = {graph.name: graph for graph in graphs}
            starting: list[tuple[EngineClient, EngineClient | None]] = []
            for name, graph in wanted.items():
                current = self._current(name)
                if current is not None and current.graph == graph:
                    report["unchanged"].append(name)
                    continue
                engine = self._make_engine(graph)
                engine.start()
                starting.append((engine, current))
            for engine, current in starting:
                if await self._loaded(engine):
                    self._retire(self.registry.put(engine))
                    report["replaced" if current else "added"].append(engine.name)
                else:
                    report["failed"][engine.name] = engine.load_error or "did not load in time"
                    await engine.stop()
            for name in set(self.registry.names()) - set(wanted):
                self._retire(self.registry.remove(name))
                report["removed"].append(name)
            log.info("reload: %s", report)
            return report

    def _current(self, name: str) -> EngineClient | None:
        return next((engine for engine in self.registry if engine.name == name), None)

    async def _loaded(self, engine: EngineClient) -> bool:
        deadline = time.monotonic() + self._load_timeout
        while engine.state not in ("ready", "failed") and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        return engine.state == "ready"

    def _retire(self, engine: EngineClient | None) -> None:
        """Stop `engine` once its in-flight requests finished (or the drain time ran out)."""
        if engine is None:
            return

        async def drain_then_stop() -> None:
            deadline = time.monotonic() + self._drain_seconds
            while engine.in_flight and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            await engine.stop()
            log.info("engine %s (%s): stopped after drain", engine.name, engine.graph.source)

        task = asyncio.get_running_loop().create_task(drain_then_stop())
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def recycle(self, engine: EngineClient, reason: str) -> bool:
        """Replace `engine` by a fresh process of the same graph without dropping requests: the new
        one loads beside it, takes over once ready, and the old one drains and stops."""
        async with self._lock:
            if self._current(engine.name) is not engine:
                return False  # replaced or removed meanwhile
            log.warning("engine %s: recycling (%s)", engine.name, reason)
            fresh = self._make_engine(engine.graph)
            fresh.start()
            if not await self._loaded(fresh):
                log.error("engine %s: the replacement failed to load (%s); keeping the old one", engine.name, fresh.load_error)
                await fresh.stop()
                return False
            self._retire(self.registry.put(fresh))
            return True

    async def close(self) -> None:
        """Wait for engines being retired (at shutdown)."""
        if self._retiring:
            await asyncio.gather(*self._retiring, return_exceptions=True)
