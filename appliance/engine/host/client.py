"""The server side of an engine process: spawn it, talk to it, restart it when it dies.

`EngineClient.submit()` sends a request and waits for the engine to accept it (so a bad prompt is a
clean 4xx before any response starts), then returns a `RequestStream` to iterate `Delta`s and the
`Finished` of each returned sequence. Closing the stream early cancels the request inside the
pipeline. `tokenize()` / `detokenize()` use the engine's tokenizer without generating; they are
admitted like generations (counted in `in_flight`, under `max_queued_requests`, within
`request_timeout_seconds`), and abandoned when their caller is cancelled (the client left).

The process and its pipe are `engine_process.EngineProcess` (the event loop never blocks on it);
here is what its messages and its exit mean: accepted requests and their streams, admission, loads
on demand and unloads, restarts after a crash with back-off. When a model loads or unloads, and how
many may be loaded at once, is the runtime's decision (`appliance.runtime.lifecycle`): it sets
`loader` and `on_released`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import queue
import time
from collections.abc import Awaitable, Callable
from typing import Literal

from appliance.engine.host.client_metrics import ClientMetrics
from appliance.engine.host.engine_process import EngineProcess
from appliance.engine.host.streams import RequestStream, timed_out
from appliance.engine.host.templates import ToolFormat
from appliance.engine.messages import (
    Accepted,
    Batch,
    Cancel,
    ChatPrompt,
    Delta,
    Detokenize,
    Detokenized,
    Embed,
    Embedded,
    LoadFailed,
    Ready,
    Rejected,
    Rerank,
    Reranked,
    SamplingParams,
    Stats,
    Submit,
    Synthesize,
    Synthesized,
    TextPrompt,
    Tokenize,
    Tokenized,
    TokenPrompt,
    Transcribe,
    Transcribed,
    TranscribeOptions,
    encode_to_engine,
    encoder,
)
from appliance.errors import (
    ContextLengthExceeded,
    EngineFailure,
    InvalidRequest,
    ModelNotReady,
    Overloaded,
)
from appliance.graphfiles import Graph
from appliance.graphfiles.chat_template import TemplateTools
from appliance.graphfiles.vision import ImageFit
from appliance.metrics import Metrics

__all__ = ["EngineClient", "Reservation"]

log = logging.getLogger("appliance.engine")

State = Literal["unloaded", "loading", "ready", "restarting", "unloading", "failed", "stopped"]
Task = Literal["generate", "embed", "rerank", "transcribe", "synthesize"]
_TASK_ROUTES = {
    "generate": "chat, completions and responses",
    "embed": "/v1/embeddings",
    "rerank": "/v1/rerank",
    "transcribe": "/v1/audio/transcriptions and /v1/audio/translations",
    "synthesize": "/v1/audio/speech",
}
Status = Literal[State, "degraded", "stalled"]
_ids = itertools.count(1)
_STALL_FLOOR_S = 2.0
"""Silence shorter than this never reads as stalled: an idle engine reports every 0.5 s."""


class Reservation:
    """A place in a model's queue, held from `EngineClient.reserve()` until `submit` or `release`.

    Use it as a context manager so the place is given back if preparing the request fails.
    """

    def __init__(self, give_back: Callable[[], None]) -> None:
        self._give_back = give_back
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self._give_back()

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def _frames(
    message: Submit | Tokenize | Detokenize | Embed | Rerank | Transcribe | Synthesize,
) -> list[bytes | memoryview]:
    """`message` framed for the pipe, before anything is admitted or registered for it. msgpack
    holds integers of 64 bits; a larger one in free-form JSON (a tool's schema, a call's arguments,
    template kwargs) is the client's error, not the server's."""
    try:
        return encode_to_engine(message)
    except OverflowError:
        raise InvalidRequest(
            "The request holds an integer beyond 64 bits (below -2**63 or above 2**64-1), in a tool's "
            "schema, a tool call's arguments or chat_template_kwargs; the engine cannot take it.",
            code="integer_too_large",
        ) from None


class EngineClient:
    """One model's engine process, seen from the server's event loop."""

    def __init__(
        self,
        graph: Graph,
        *,
        restart_delay: Callable[[int], float],
        on_fatal: Callable[[str], None] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        """`restart_delay(n)`: seconds to wait before the (n+1)-th restart in a row of a dead
        engine process (the runtime's policy, `appliance.runtime.backoff`)."""
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
        self._audio_seconds = 0.0
        """Speech graphs: seconds of audio sent to transcribe and not answered."""
        self._on_fatal = on_fatal
        self._process: EngineProcess | None = None
        self._outbox: queue.SimpleQueue[bytes | memoryview | None] = queue.SimpleQueue()
        """The running process's frames (`EngineProcess.outbox`)."""
        self._pending: dict[int, asyncio.Future[Accepted]] = {}
        self._listeners: dict[int, Callable[[str], None]] = {}
        """Transcriptions streamed: where each one's text goes as the engine decodes it."""
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

    # -- lifecycle --------------------------------------------------------------------------

    async def ensure_loaded(self) -> None:
        """Load an unloaded engine and wait until it is ready (concurrent callers share one load,
        bounded by `load_timeout_seconds`); at once for an engine already loaded or loading at
        start-up. With a `loader`, the runtime decides when the load starts. Raises ModelNotReady
        (503) if it does not load in time, Overloaded if there is no room."""
        self.last_used = time.monotonic()
        if self.loader is not None:
            await self.loader(self)
            return
        if self.state == "unloaded":
            self.begin_load()
        await self.wait_loaded(self._on_demand, self.graph.load_timeout_seconds)

    def begin_load(self) -> asyncio.Future[None]:
        """Start loading the unloaded engine on demand; the future is done once it is ready, failed
        if it cannot load."""
        self.load_error = ""
        loading = self._on_demand = asyncio.get_running_loop().create_future()
        self._metrics.loaded_on_demand()
        self.start()
        return loading

    async def wait_loaded(self, loading: asyncio.Future[None] | None, seconds: float) -> None:
        """Wait for the load on demand `loading` (None: nothing to wait for), at most `seconds`;
        ModelNotReady (503) when it fails or is not ready by then."""
        if loading is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(loading), max(0.0, seconds))
        except TimeoutError:
            timeout = self.graph.load_timeout_seconds
            raise ModelNotReady(
                f"Model '{self.name}' is loading and was not ready within {timeout:g} s "
                "(load_timeout_seconds); try again shortly.",
                retry_after=5,
            ) from None

    async def unload(self, drain_seconds: float = 0.0) -> bool:
        """Stop the engine once its requests finish (waiting at most `drain_seconds`; requests
        still running then fail); the next request loads it again. False if it was not loaded,
        or if `keep` cancelled the unload while it waited for its requests."""
        if self.state not in ("ready", "loading", "restarting"):
            return False
        drain = self._drain = object() if self.state == "ready" else None
        self.state = "unloading"
        deadline = time.monotonic() + drain_seconds
        while self.in_flight and time.monotonic() < deadline and self._drain is drain:
            await asyncio.sleep(0.05)
        if self._drain is not drain:  # kept (and perhaps being unloaded again by another call)
            return False
        self._drain = None
        self.state = "unloaded"
        self._ever_ready = False
        self._metrics.unloaded()
        log.info("engine %s: unloaded", self.name)
        await self._shut_down(ModelNotReady(f"Model '{self.name}' was unloaded.", retry_after=1))
        return True

    def keep(self) -> bool:
        """Cancel an unload still waiting for this engine's requests to finish: it serves on, the
        same process. False when there is none to cancel (not unloading, or its process is already
        being stopped)."""
        if self._drain is None or self.state != "unloading":
            return False
        self._drain = None
        self.state = "ready"
        log.info("engine %s: unload cancelled; serving on", self.name)
        return True

    def start(self) -> None:
        """Spawn the engine process; returns at once (the model loads in the background)."""
        self._loop = asyncio.get_running_loop()
        self.state = "restarting" if self._ever_ready else "loading"
        self._ready.clear()
        self._process = EngineProcess(self.graph, on_message=self._on_message, on_exit=self._on_engine_died)
        self._outbox = self._process.outbox
        log.info(
            "engine %s: loading %s on %s (pid %d)",
            self.name,
            self.graph.model_dir,
            self.graph.device,
            self._process.pid,
        )

    def kill(self, reason: str) -> None:
        """Kill a hung engine process; its death is handled like a crash (errors, then restart)."""
        if self._process is not None and self._process.is_alive():
            log.error("engine %s: killing pid %s: %s", self.name, self._process.pid, reason)
            self._process.kill()

    async def wait_ready(self) -> None:
        await self._ready.wait()

    async def stop(self, timeout: float = 5.0) -> None:
        """Ask the engine to exit; kill it if it does not within `timeout`."""
        self.state = "stopped"
        await self._shut_down(ModelNotReady(f"Model '{self.name}' is shutting down."), timeout)

    async def _shut_down(self, error: Exception, timeout: float = 5.0) -> None:
        """Fail what is in flight with `error`, ask the process to exit, kill it after `timeout`.
        The client lets go of the process at once: a load on demand may start another meanwhile."""
        if self._restart_task is not None:
            self._restart_task.cancel()
        self._fail_all(error)
        process, self._process = self._process, None
        if process is None:
            return
        self._ready.clear()
        self.stats = Stats(running=0, kv_cache_usage=0.0, steps=0)
        self._update_gauges()
        self.exiting += 1
        try:
            await process.shut_down(timeout)
        finally:
            self.exiting -= 1
            self._released()

    def _released(self) -> None:
        if self.on_released is not None:
            self.on_released(self)

    # -- requests ---------------------------------------------------------------------------

    def reserve(self) -> Reservation:
        """Admit a request now and hold its place in the queue while it is prepared (its images
        fetched and decoded), so a request the server will refuse costs no preparation; pass it to
        `submit`. Raises ModelNotReady or Overloaded like `submit`."""
        self._admit("generate")
        self._reserved += 1
        return Reservation(self._unreserve)

    def _unreserve(self) -> None:
        self._reserved -= 1

    def _check_ready(self, *, reserved: bool = False) -> None:
        status = self.status
        # A request that holds a reserved place is in flight: an unload waits for it to finish.
        if status not in ("ready", "degraded") and not (reserved and self.draining):
            raise ModelNotReady(f"Model '{self.name}' is {status}; try again shortly.", retry_after=5)

    def require(self, task: Task) -> None:
        """Raise 400 (param `model`) unless this model serves `task`."""
        if self.graph.task != task:
            raise InvalidRequest(
                f"Model '{self.name}' is {_describe(self.graph.task)} model: it serves "
                f"{_TASK_ROUTES[self.graph.task]}, not {_TASK_ROUTES[task]}.",
                param="model",
                code="model_not_supported",
            )

    def _admit(self, task: Task) -> None:
        # Every route reaches its engine through here: a model is refused for what it cannot do
        # (an embedding model named in chat, a chat model in /v1/embeddings).
        self.require(task)
        self._check_ready()
        if self.in_flight >= self.graph.limits.max_queued_requests:
            raise Overloaded(
                f"Model '{self.name}' has {self.in_flight} requests in flight, its limit; try again shortly.",
                retry_after=1,
            )

    async def submit(
        self,
        prompt: ChatPrompt | TextPrompt | TokenPrompt,
        params: SamplingParams,
        *,
        reservation: Reservation | None = None,
    ) -> RequestStream:
        """Send a request; returns once the engine accepted it. Raises a 4xx/5xx ApplianceError."""
        request_id = next(_ids)
        frames = _frames(Submit(request_id=request_id, prompt=prompt, params=params))
        self.require("generate")  # before loading a model on demand for a route it does not serve
        reserved = reservation is not None and reservation.held
        if not reserved:  # a reserved place was taken on a loaded engine, which waits for it
            await self.ensure_loaded()
        self.last_used = time.monotonic()
        # Checked and reserved with no await in between: concurrent submits cannot overshoot.
        if reserved:
            self._check_ready(reserved=True)
            reservation.release()  # its place passes to the stream registered below
        else:
            self._admit("generate")
        # Registered before the engine answers: its first deltas may arrive with the accept.
        stream = RequestStream(
            request_id,
            model=self.name,
            timeout=self.graph.limits.request_timeout_seconds,
            cancel=self._cancel,
            sequences=params.n,
        )
        accepted: asyncio.Future[Accepted] = self._loop.create_future()
        self._streams[request_id] = stream
        self._pending[request_id] = accepted
        for frame in frames:
            self._outbox.put(frame)
        timeout = self.graph.limits.request_timeout_seconds
        try:
            # The time limit covers the wait for the engine's accept too (a busy or hung engine).
            answer = await (asyncio.wait_for(accepted, timeout) if timeout else accepted)
            stream.prompt_tokens, stream.prompt_tail = answer.prompt_tokens, answer.prompt_tail
            stream.prompt_text = answer.prompt_text
        except TimeoutError:
            stream.cancel()
            raise stream.timed_out() from None
        except asyncio.CancelledError:
            stream.cancel()  # the client left before the engine answered
            raise
        except Exception:
            self._streams.pop(request_id, None)
            raise
        finally:
            self._pending.pop(request_id, None)
        return stream

    async def tokenize(self, prompt: ChatPrompt | TextPrompt, *, add_special_tokens: bool) -> Tokenized:
        """The prompt's tokens (a chat prompt rendered with the template first)."""
        return await self._ask(lambda request_id: Tokenize(request_id, prompt, add_special_tokens))

    async def detokenize(self, tokens: list[int]) -> str:
        answer = await self._ask(lambda request_id: Detokenize(request_id, tokens))
        return answer.text

    async def embed(self, texts: list[str | list[int]], *, query: bool = False) -> Embedded:
        """The vectors of `texts` (embedding graphs), batched in the engine with other requests'."""
        started = time.monotonic()
        answer = await self._ask(lambda request_id: Embed(request_id, texts, query), task="embed")
        self._metrics.retrieved(time.monotonic() - started, len(texts), answer.prompt_tokens)
        return answer

    async def rerank(self, query: str, documents: list[str]) -> Reranked:
        """Each document's relevance score to `query`, in the documents' order (rerank graphs)."""
        started = time.monotonic()
        answer = await self._ask(lambda request_id: Rerank(request_id, query, documents), task="rerank")
        self._metrics.retrieved(time.monotonic() - started, len(documents), answer.prompt_tokens)
        return answer

    async def transcribe(
        self, samples: bytes | memoryview, options: TranscribeOptions, on_text: Callable[[str], None] | None = None
    ) -> Transcribed:
        """The text of `samples` (16 kHz mono float32, little-endian), transcribed or translated
        (speech-to-text graphs); with `options.stream`, `on_text` gets the text as it is decoded."""
        started = time.monotonic()
        seconds = memoryview(samples).nbytes / 4 / 16_000
        held, limit = self._audio_seconds, self.graph.speech.max_queued_audio_seconds
        if held and held + seconds > limit:
            raise Overloaded(
                f"Model '{self.name}' holds {held:.0f} s of audio to transcribe; with this request's {seconds:.0f} s "
                f"it would pass its limit of {limit:g} s (speech.max_queued_audio_seconds). Try again shortly.",
                retry_after=max(1, int(held // 30)),
            )
        self._audio_seconds += seconds
        try:
            answer = await self._ask(lambda request_id: Transcribe(request_id, options, samples), "transcribe", on_text)
        finally:
            self._audio_seconds -= seconds
        self._metrics.transcribed(time.monotonic() - started, seconds, answer.tokens)
        return answer

    async def synthesize(self, text: str, voice: str) -> Synthesized:
        """`text` spoken in `voice` (text-to-speech graphs): the whole waveform, once generated."""
        started = time.monotonic()
        answer = await self._ask(lambda request_id: Synthesize(request_id, text, voice), "synthesize")
        seconds = len(answer.samples) / 4 / answer.sample_rate if answer.sample_rate else 0.0
        self._metrics.synthesized(time.monotonic() - started, seconds, answer.tokens)
        return answer

    def admit(self, task: Task) -> None:
        """Raise now what a request for `task` would meet on arrival: 400 for a model that does not
        serve it, 503 for one not ready (and not loading on demand) or with its queue full."""
        self.require(task)
        if self.state not in ("unloaded", "unloading") and self._on_demand is None:
            self._admit(task)

    async def _ask(
        self,
        command: Callable[[int], Tokenize | Detokenize | Embed | Rerank | Transcribe | Synthesize],
        task: Task = "generate",
        on_text: Callable[[str], None] | None = None,
    ):
        # Tokenizing runs on the thread that steps the pipeline, as a generation's prompt does:
        # admitted and timed like one, so a burst of them gets 503s rather than stalling the model.
        request_id = next(_ids)
        frames = _frames(command(request_id))
        self.require(task)  # before loading a model on demand for a route it does not serve
        await self.ensure_loaded()
        self.last_used = time.monotonic()
        self._admit(task)
        answer: asyncio.Future = self._loop.create_future()
        self._pending[request_id] = answer
        if on_text is not None:
            self._listeners[request_id] = on_text
        self._asking += 1
        for frame in frames:
            self._outbox.put(frame)
        timeout = self.graph.limits.request_timeout_seconds
        try:
            return await (asyncio.wait_for(answer, timeout) if timeout else answer)
        except TimeoutError:
            self._abandon(request_id)
            raise timed_out(self.name, timeout) from None
        except asyncio.CancelledError:
            self._abandon(request_id)  # the client left: the engine skips it unless already started
            raise
        finally:
            self._pending.pop(request_id, None)
            self._listeners.pop(request_id, None)
            self._asking -= 1

    def _abandon(self, request_id: int) -> None:
        if request_id in self._pending:
            self._outbox.put(encoder.encode(Cancel(request_id=request_id)))

    def _cancel(self, request_id: int) -> None:
        stream = self._streams.pop(request_id, None)
        if stream is not None:
            self._metrics.cancelled(stream)
            self._outbox.put(encoder.encode(Cancel(request_id=request_id)))

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
        if isinstance(event, Delta) and request_id in self._listeners:
            self.last_used = time.monotonic()
            self._listeners[request_id](event.text)
            return
        if isinstance(
            event, Accepted | Rejected | Tokenized | Detokenized | Embedded | Reranked | Transcribed | Synthesized
        ):
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

    # -- failure and restart ----------------------------------------------------------------

    def _fail_all(self, error: Exception) -> None:
        loading, self._on_demand = self._on_demand, None
        if loading is not None and not loading.done():
            loading.set_exception(error)
            loading.exception()  # retrieved here: no waiter may be left to see it
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        for stream in self._streams.values():
            stream.fail(str(error))
        self._streams.clear()

    def _on_engine_died(self) -> None:
        try:
            self._handle_death()
        finally:
            self._released()

    def _handle_death(self) -> None:
        process, self._process = self._process, None
        exit_code = process.exit_code() if process is not None else None
        self._ready.clear()
        self.stats = Stats(running=0, kv_cache_usage=0.0, steps=0)
        self._update_gauges()
        if self.state in ("stopped", "unloaded"):
            return
        if self._on_demand is not None:  # a load on demand failed: the server keeps serving the others
            self.state = "unloaded"
            reason = self.load_error or f"engine exited with code {exit_code}"
            log.error("engine %s: failed to load on demand: %s", self.name, reason)
            self._fail_all(ModelNotReady(f"Model '{self.name}' failed to load: {reason}", retry_after=30))
            return
        if not self._ever_ready:
            self.state = "failed"
            message = (
                f"graph {self.graph.source}: model '{self.name}' failed to load on device "
                f"{self.graph.device}: {self.load_error or f'engine exited with code {exit_code}'}"
            )
            self._fail_all(EngineFailure(message))
            if self._on_fatal is not None:
                self._on_fatal(message)
            return
        log.error("engine %s: process died (exit code %s); restarting", self.name, exit_code)
        self._fail_all(EngineFailure(f"The engine of model '{self.name}' failed; the request was lost."))
        self.state = "restarting"
        self._metrics.restarted()
        delay = self._restart_delay(self._restarts)
        self._restarts += 1
        self._restart_task = self._loop.create_task(self._restart_after(delay))

    async def _restart_after(self, delay: float) -> None:
        await asyncio.sleep(delay)
        if self.state == "restarting":
            self.start()


def _describe(task: Task) -> str:
    return {
        "generate": "a generative",
        "embed": "an embedding",
        "rerank": "a rerank",
        "transcribe": "a speech-to-text",
        "synthesize": "a text-to-speech",
    }[task]
