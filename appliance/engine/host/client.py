"""The server side of an engine process: one model's engine, seen from the server's event loop.

`EngineClient` holds the engine's state (loading, ready, unloading, ... and the status `/health`
shows), the model's facts (confirmed when the engine reports what it loaded) and its counters, and
decides what the engine's messages mean: a stream's deltas, an answer, stats, ready, a failed load.
Its two other parts: the request side (`calls.EngineCalls`: `reserve`, `submit`, `tokenize`,
`embed`, ... with admission and time limits) and the process's life (`process_lifecycle.
ProcessLifecycle`: load on demand, unload, stop, kill, restart after a crash with back-off). The
process and its pipe are `engine_process.EngineProcess` (the event loop never blocks on it).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from appliance.engine.host.batch_lane import BATCH_SLOTS, LIVE_GRACE_SECONDS, BatchLane
from appliance.engine.host.calls import EngineCalls, Reservation
from appliance.engine.host.client_metrics import ClientMetrics
from appliance.engine.host.engine_process import EngineProcess
from appliance.engine.host.process_lifecycle import ProcessLifecycle
from appliance.engine.host.streams import RequestStream
from appliance.engine.host.templates import ToolFormat
from appliance.engine.messages import ANSWERS, PROGRESS, Accepted, Batch, LoadFailed, Ready, Rejected, Stats
from appliance.errors import ContextLengthExceeded, EngineFailure, InvalidRequest
from appliance.graphfiles import Graph
from appliance.graphfiles.chat_template import TemplateTools
from appliance.graphfiles.vision import ImageFit
from appliance.metrics import Metrics

__all__ = ["EngineClient", "Reservation"]

log = logging.getLogger("appliance.engine")

State = Literal["unloaded", "loading", "ready", "restarting", "unloading", "failed", "stopped"]
Status = Literal[State, "degraded", "stalled"]
_STALL_FLOOR_S = 2.0
"""Silence shorter than this never reads as stalled: an idle engine reports every 0.5 s."""


class EngineClient(ProcessLifecycle, EngineCalls):
    """One model's engine process, seen from the server's event loop."""

    def __init__(
        self,
        graph: Graph,
        *,
        restart_delay: Callable[[int], float],
        on_fatal: Callable[[str], None] | None = None,
        metrics: Metrics | None = None,
        batch_lines: int = BATCH_SLOTS,
        batch_grace_seconds: float = LIVE_GRACE_SECONDS,
    ) -> None:
        """`restart_delay(n)`: seconds to wait before the (n+1)-th restart in a row of a dead
        engine process (the runtime's policy, `appliance.runtime.backoff`). `batch_lines`,
        `batch_grace_seconds`: the batch lane's width and grace (`BatchLane`'s `slots`, `grace`)."""
        self.graph = graph
        self._restart_delay = restart_delay
        self._metrics = ClientMetrics(metrics, graph.name)
        self.state: State = "unloaded" if graph.load == "on_demand" else "stopped"
        self.last_used = time.monotonic()
        """When a request last arrived or finished (monotonic seconds): idle unloading and the
        least recently used model to unload first go by it."""
        self.loader: Callable[[EngineClient], Awaitable[None]] | None = None
        """`ensure_loaded` for this engine when the runtime decides when it may load (it waits for
        room under the runtime's limit, then calls `begin_load`); None: it loads at once."""
        self.on_released: Callable[[EngineClient], None] | None = None
        """Called once one of its engine processes has exited (unloaded, stopped, died): the
        memory it held is free."""
        self.peer: Callable[[str], EngineClient] | None = None
        """The engine serving another model by name (the registry's `get`, set when this engine is
        put there): a chat graph's `speech_model` is found through it."""
        self.exiting = 0
        """Engine processes told to exit and not gone yet (they still hold their memory)."""
        self._on_demand: asyncio.Future[None] | None = None
        """While a load on demand runs: done once the engine is ready, failed if it cannot load."""
        self._drain: object | None = None
        """While an unload of a ready engine waits for its requests: that unload's token (`keep`
        cancels it by clearing this)."""
        facts = graph.facts
        self.max_context = graph.max_context
        """Prompt + output tokens one request may use (embedding and rerank: tokens of one text),
        read from the model's files with its graph: every bound holds before the engine loads."""
        self.stats = Stats(running=0, kv_cache_usage=0.0, steps=0)
        self.speculation = (0, 0)
        """Speculative decoding / prompt lookup since this client started: (drafted, accepted) tokens."""
        self.load_error = ""
        self.vision_tokens: tuple[str, ...] = facts.vision_tokens or ()
        """Vision graphs: the model's own image marker tokens (from its tokenizer's files, else
        once loaded)."""
        self.image_fit: ImageFit | None = facts.image_rule.fit if facts.image_rule is not None else None
        """Vision graphs: the size the model uses of an image, read from its folder (None: a
        family not known, or a text graph)."""
        self.tools = ToolFormat.of(graph, facts.template)
        """How tools reach this model's prompt and how its calls are read."""
        self.embedding_size = facts.embedding_size
        """Embedding graphs: the length of the model's vectors (0: its files do not say, known
        once loaded)."""
        self._reserved = 0
        self._asking = 0
        """Tokenize and detokenize commands sent and not answered."""
        self.batch_lane = BatchLane(lambda: self.live_in_flight, slots=batch_lines, grace=batch_grace_seconds)
        """Where batch lines wait for the capacity live traffic leaves (`batch_lane`)."""
        self._audio_seconds = 0.0
        """Speech graphs: seconds of audio sent to transcribe and not answered."""
        self._on_fatal = on_fatal
        self._process: EngineProcess | None = None
        self._outbox: queue.SimpleQueue[bytes | memoryview | None] = queue.SimpleQueue()
        """The running process's frames (`EngineProcess.outbox`)."""
        self._pending: dict[int, asyncio.Future[Accepted]] = {}
        self._listeners: dict[int, Callable[[Any], None]] = {}
        """Calls streamed: where each one's `PROGRESS` events go (a transcript's text, speech's audio)."""
        self._streams: dict[int, RequestStream] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = asyncio.Event()
        self._restarts = 0
        self._restart_task: asyncio.Task[None] | None = None
        self._ever_ready = False
        self.last_heard = time.monotonic()
        """When the engine process last sent anything (monotonic seconds)."""
        self._stuck_since: float | None = None
        """When the stateful engine's running request last got a token, as its stats report it."""

    @property
    def name(self) -> str:
        return self.graph.name

    @property
    def pid(self) -> int | None:
        """The engine process's pid (None while none runs)."""
        return self._process.pid if self._process is not None else None

    @property
    def in_flight(self) -> int:
        """Requests submitted and not finished, plus those holding a `reserve()`d place, plus
        tokenize/detokenize commands not answered yet."""
        return len(self._streams) + self._reserved + self._asking

    @property
    def live_in_flight(self) -> int:
        """`in_flight` less the batch lines holding a turn in the batch lane."""
        return max(0, self.in_flight - self.batch_lane.running)

    @property
    def silent_seconds(self) -> float:
        """How long the ready engine has made no progress (0 while it loads or restarts).

        The continuous-batching engine sends a frame after every step and stats every 0.5 s when
        idle, all from the thread that steps: its silence is the time since its last frame, busy
        or idle. The stateful engine keeps talking while `generate()` runs, so its stats say how
        long the running request has waited for a token. Either way a wedged pipeline counts,
        whether or not its clients are still waiting.
        """
        if self.state != "ready" or self._process is None:
            return 0.0
        since = self.last_heard if self._stuck_since is None else min(self.last_heard, self._stuck_since)
        return max(0.0, time.monotonic() - since)

    @property
    def stall_seconds(self) -> float:
        """Silence after which the engine shows as "stalled" (half `engine_hang_seconds`, at least
        a few stats intervals, at most the hang limit itself)."""
        limit = self.graph.limits.engine_hang_seconds
        return min(limit, max(limit / 2, _STALL_FLOOR_S))

    @property
    def degraded_seconds(self) -> float:
        """Silence after which the engine shows as "degraded" (`engine_degraded_seconds`, at
        least a few stats intervals, at most `stall_seconds`)."""
        return min(self.stall_seconds, max(self.graph.limits.engine_degraded_seconds, _STALL_FLOOR_S))

    @property
    def status(self) -> Status:
        """The state as `/health` shows it: "degraded" for a ready engine silent past
        `degraded_seconds` (still admitting requests: a long step may end), "stalled" past
        `stall_seconds` (refusing them; the watchdog kills it at `engine_hang_seconds`)."""
        if self.state == "ready":
            silent = self.silent_seconds
            if silent > self.stall_seconds:
                return "stalled"
            if silent > self.degraded_seconds:
                return "degraded"
        return self.state

    @property
    def available(self) -> bool:
        """Serving, or able to serve a request by loading on demand (/health counts it ready): a
        model being unloaded too, since its next request waits and loads it again."""
        return self.status == "ready" or self.state in ("unloaded", "unloading") or self._on_demand is not None

    @property
    def processes(self) -> int:
        """Engine processes holding memory: the running one (or the one a restart is about to
        start) and those still exiting."""
        running = self._process is not None or self.state == "restarting"
        return int(running) + self.exiting

    @property
    def loading(self) -> asyncio.Future[None] | None:
        """While a load on demand runs: done once the engine is ready, failed if it cannot load."""
        return self._on_demand

    @property
    def draining(self) -> bool:
        """An unload is waiting for this ready engine's requests to finish (`keep` can cancel it)."""
        return self._drain is not None

    @property
    def idle_seconds(self) -> float:
        """How long the ready engine has had nothing in flight (0 while it has, or is not ready)."""
        if self.state != "ready" or self.in_flight:
            return 0.0
        return max(0.0, time.monotonic() - self.last_used)

    # -- frames from the engine -------------------------------------------------------------

    def _on_message(self, message: object) -> None:
        self.last_heard = time.monotonic()
        self._dispatch(message)

    def _dispatch(self, message: object) -> None:
        if isinstance(message, Batch):
            for event in message.events:
                self._deliver(event)
        elif isinstance(message, Stats):
            self.speculation = self._metrics.speculation(self.speculation, self.stats, message)
            self.stats = message
            stalled = message.stalled_seconds
            self._stuck_since = time.monotonic() - stalled if stalled else None
            self._update_gauges()
        elif isinstance(message, Ready):
            self._stuck_since = None
            self._confirm_facts(message)
            self.state = "ready"
            self._metrics.load_time(message.load_seconds)
            self._ever_ready = True
            self._restarts = 0
            self._ready.set()
            loading, self._on_demand = self._on_demand, None
            if loading is not None and not loading.done():
                loading.set_result(None)
            self._update_gauges()
            log.info(
                "engine %s: ready in %.1f s (context %d tokens%s; tools: %s)",
                self.name,
                message.load_seconds,
                self.max_context,
                f", GGUF_READER={message.gguf_reader}" if message.gguf_reader else "",
                self.tools.describe(),
            )
        elif isinstance(message, LoadFailed):
            self.load_error = message.message
            log.error(
                "engine %s: failed to load %s on %s: %s",
                self.name,
                self.graph.model_dir,
                self.graph.device,
                message.message,
            )

    def _confirm_facts(self, ready: Ready) -> None:
        """Compare what the loaded engine reports with the facts read from the model's files: the
        same unless a file was read differently here (the tokenizer swaps some templates for its
        own, see `graphfiles.chat_template`). A difference is logged and the engine's value kept
        from then on, across this engine's unloads and restarts: it is what the model does. A
        fact the files did not give (marker tokens, a vector length) is simply taken."""
        graph = self.graph
        reported: dict[str, object] = {"max_context": ready.max_context}
        if graph.task == "generate":
            template = TemplateTools(
                ready.template_renders_tools,
                ready.template_renders_tool_calls,
                ready.template_tool_parser or None,
                ready.template_reasoning_parser or None,
                ready.template_tool_reason,
                ready.template_reasoning_reason,
            )
            reported["tools"] = ToolFormat.of(graph, template)
        if graph.accepts_images:
            reported["vision_tokens"] = tuple(ready.vision_tokens)
        if graph.task == "embed":
            reported["embedding_size"] = ready.embedding_size
        unknown = {"vision_tokens": graph.facts.vision_tokens is None, "embedding_size": not graph.facts.embedding_size}
        for name, value in reported.items():
            if value == getattr(self, name):
                continue
            if not unknown.get(name):
                log.warning(
                    "engine %s: the loaded model's %s is %s, its files said %s; using the engine's",
                    self.name,
                    name.replace("_", " "),
                    value,
                    getattr(self, name),
                )
            setattr(self, name, value)

    def _deliver(self, event: object) -> None:
        request_id = event.request_id
        if isinstance(event, PROGRESS) and request_id in self._listeners:
            self.last_used = time.monotonic()
            self._listeners[request_id](event)
            return
        if isinstance(event, ANSWERS):
            future = self._pending.get(request_id)
            if future is None or future.done():
                return
            if not isinstance(event, Rejected):
                future.set_result(event)
            elif event.code == "engine_error":
                future.set_exception(EngineFailure(event.message))
            else:
                error = ContextLengthExceeded if event.code == "context_length_exceeded" else InvalidRequest
                future.set_exception(error(event.message, param=event.param, code=event.code))
            return
        stream = self._streams.get(request_id)
        if stream is None:  # cancelled on this side; the engine has been told
            return
        complete = stream.arrive(event)
        if complete:
            del self._streams[request_id]
            self.last_used = time.monotonic()
        self._metrics.observe(stream, event, complete)

    def _update_gauges(self) -> None:
        self._metrics.gauges(self.stats, in_flight=self.in_flight, ready=self.status == "ready")
