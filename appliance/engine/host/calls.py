"""The request side of `EngineClient`: admission, then each call's frames to the engine and its
answer back.

`submit()` sends a request and waits for the engine to accept it (so a bad prompt is a clean 4xx
before any response starts), then returns a `RequestStream` to iterate `Delta`s and the `Finished`
of each returned sequence; closing the stream early cancels the request inside the pipeline.
`tokenize()`, `detokenize()`, `embed()`, `rerank()`, `transcribe()`, `detect_voice()` and `synthesize()` are one
command and one answer; they are admitted like generations (counted in `in_flight`, under
`max_queued_requests`, within `request_timeout_seconds`), and abandoned when their caller is
cancelled (the client left). A model named for a task it does not serve is a 400 before anything
loads (`require`).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from typing import Any

from appliance.engine.host.streams import RequestStream, timed_out
from appliance.engine.messages import (
    TASKS,
    Accepted,
    Cancel,
    ChatPrompt,
    Command,
    DetectVoice,
    Detokenize,
    Embed,
    Embedded,
    Rerank,
    Reranked,
    SamplingParams,
    SpeechAudio,
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
    VoiceDetected,
    encode_to_engine,
    encoder,
)
from appliance.errors import InvalidRequest, ModelNotReady, Overloaded
from appliance.graphfiles import Task

__all__ = ["EngineCalls", "Reservation", "Task"]

_ids = itertools.count(1)


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


def _frames(message: Command) -> list[bytes | memoryview]:
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


class EngineCalls:
    """The calls a route makes on `EngineClient` (which this is a part of: the state it reads, the
    engine's process and its outbox, are the client's)."""

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
            served = TASKS[self.graph.task]
            raise InvalidRequest(
                f"Model '{self.name}' is {served.article} model: it serves {served.routes}, not {TASKS[task].routes}.",
                param="model",
                code="model_not_supported",
            )

    def _admit(self, task: Task) -> None:
        # Every route reaches its engine through here: a model is refused for what it cannot do
        # (an embedding model named in chat, a chat model in /v1/embeddings).
        self.require(task)
        self._check_ready()
        # Batch lines do not count: a batch never turns a person away, and a person's request
        # preempts the batch lines running (`batch_lane`).
        if self.live_in_flight >= self.graph.limits.max_queued_requests:
            raise Overloaded(
                f"Model '{self.name}' has {self.live_in_flight} requests in flight, its limit; try again shortly.",
                retry_after=1,
            )
        self.batch_lane.preempt()

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
        listener = None if on_text is None else lambda event: on_text(event.text)
        try:
            answer = await self._ask(
                lambda request_id: Transcribe(request_id, options, samples), "transcribe", listener
            )
        finally:
            self._audio_seconds -= seconds
        self._metrics.transcribed(time.monotonic() - started, seconds, answer.tokens)
        return answer

    async def detect_voice(self, samples: bytes, state: bytes = b"") -> VoiceDetected:
        """The speech probability of each 32 ms frame of a live stream's next `samples` (16 kHz mono
        float32, whole 512-sample frames), from the stream's `state` (the previous answer's; empty
        at its start). Speech-to-text graphs with a voice-activity model; answered on the engine's
        live-voice thread, not behind transcriptions (`worker/live_voice.py`)."""
        return await self._ask(lambda request_id: DetectVoice(request_id, samples, state), "transcribe")

    async def synthesize(
        self,
        text: str,
        voice: str,
        speed: float = 1.0,
        on_audio: Callable[[SpeechAudio], None] | None = None,
    ) -> Synthesized:
        """`text` spoken in `voice` at `speed` (text-to-speech graphs): the whole waveform once
        spoken, or, given `on_audio`, each piece as it is spoken (the answer then holds none)."""
        started = time.monotonic()
        spoken = 0

        def heard(piece: SpeechAudio) -> None:
            nonlocal spoken
            spoken += len(piece.samples)
            on_audio(piece)

        stream = on_audio is not None
        answer = await self._ask(
            lambda request_id: Synthesize(request_id, text, voice, speed, stream),
            "synthesize",
            heard if stream else None,
        )
        samples = spoken if stream else len(answer.samples)
        seconds = samples / 4 / answer.sample_rate if answer.sample_rate else 0.0
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
        command: Callable[[int], Command],
        task: Task = "generate",
        listener: Callable[[Any], None] | None = None,
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
        if listener is not None:
            self._listeners[request_id] = listener
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
