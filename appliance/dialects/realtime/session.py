"""One Realtime session, free of the websocket: client events in (`handle`), server events out (the
`events` queue, which the route writes to the socket in order).

What it serves itself is the input side, for both session types:

- `input_audio_buffer.append`: base64 audio in the session's format (`media.live_audio`: pcm16
  at 24 kHz, G.711 mu-law or A-law at 8 kHz), kept at 16 kHz, bounded in seconds
  (`RealtimeLimits.max_buffer_seconds`);
- server VAD (`turn_detection.type: server_vad`, the default when the speech graph names a
  voice-activity model): the audio streams to the speech engine's live-voice thread as it comes
  (`EngineClient.detect_voice`, 32 ms frames, the model's state carried here), `turns` finds
  where speech starts and stops, and a stop commits the turn: `speech_started`,
  `speech_stopped`, `committed`, `conversation.item.added` / `.done`;
- manual turns (`turn_detection: null`): `input_audio_buffer.commit` and `.clear`;
- every committed turn is transcribed by the session's Whisper graph, in order:
  `conversation.item.input_audio_transcription.delta` as Whisper decodes, then `.completed`
  (or `.failed`, the session kept);
- `session.update` (`config`); every bad event answered with an `error` event naming its type,
  its `event_id` and the field (`refuse`), the session kept.

**The seam for the conversation side** (`realtime` sessions: the model's answer). A
`Conversation` made by the factory given to the session gets:

- `on_event(event)`: every client event the input side does not serve (`response.create`,
  `response.cancel`, `conversation.item.create` / `delete` / `retrieve` / `truncate`,
  `output_audio_buffer.clear`); without a conversation they are answered with an `error`;
- `on_speech_started(item_id, audio_start_ms)`: server VAD heard speech begin (barge-in: cancel
  the answer in flight, truncate what was played);
- `on_turn(turn)`: a user turn was committed and transcribed: its `Turn` (item id, previous item
  id, 16 kHz float32 samples, transcript, times), after `.completed` was sent;
- `on_update(config)`: `session.update` would make `config` (`rt.SessionConfig`, every field
  set) the session's: raise ApplianceError naming the field it cannot answer with (a voice the
  voice graph lacks), and the update is refused as a whole, the session keeping its configuration;
- `close()`: the session ends (the client left, idle, refused): cancel its engine work.

The first three are awaited in order on the session's own tasks (the socket's reader, VAD,
transcription): return quickly, and run long work (an answer) on a task of the conversation's.

It sends with `session.send(event)` (any `protocol.realtime` server event, queued in order with
the input side's), reads the effective configuration from `session.settings` (`instructions`,
`tools`, `audio.output` in `settings.config`), makes ids with `new_item_id()` and keeps
`session.last_item_id` (the `previous_item_id` of the next item) current when it adds items.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from appliance.dialects.realtime.config import SessionKind, SessionSettings, initial_settings, updated_settings
from appliance.dialects.realtime.turns import FRAME_MS, SpeechStarted, SpeechStopped, TurnDetector
from appliance.engine.messages import TranscribeOptions
from appliance.errors import ApplianceError, InvalidRequest
from appliance.media.live_audio import TARGET_RATE, LiveAudio, decode_base64
from appliance.protocol import realtime as rt

__all__ = ["Conversation", "RealtimeLimits", "RealtimeSession", "Turn", "new_item_id"]

log = logging.getLogger("appliance.realtime")

FRAME_SAMPLES = 512
_MS = TARGET_RATE // 1000
MIN_COMMIT_MS = 100
"""OpenAI refuses a commit of less audio ("buffer too small")."""
_VAD_FRAMES_PER_CALL = 256


def new_item_id() -> str:
    return "item_" + uuid.uuid4().hex[:20]


@dataclass(frozen=True)
class RealtimeLimits:
    """A session's bounds: audio held uncommitted (seconds), quiet before the server closes it
    (seconds), turns waiting for their transcription, server events waiting for a slow client."""

    max_buffer_seconds: float = 120.0
    idle_seconds: float = 300.0
    max_turns_waiting: int = 4
    max_events_queued: int = 4096


@dataclass(frozen=True)
class Turn:
    """A committed user turn, transcribed (see the module's docstring)."""

    item_id: str
    previous_item_id: str | None
    samples: np.ndarray
    """16 kHz mono float32."""
    transcript: str
    audio_start_ms: int
    audio_end_ms: int


class Conversation(Protocol):
    """The conversation side of a session (see the module's docstring)."""

    async def on_event(self, event: rt.ClientEvent) -> None: ...

    async def on_speech_started(self, item_id: str, audio_start_ms: int) -> None: ...

    async def on_turn(self, turn: Turn) -> None: ...

    def on_update(self, config: rt.SessionConfig) -> None: ...

    async def close(self) -> None: ...


class Hearing(Protocol):
    """What the session asks of its speech-to-text engine (`EngineClient` is one)."""

    graph: Any

    async def detect_voice(self, samples: bytes, state: bytes = b"") -> Any: ...

    async def transcribe(self, samples: bytes, options: TranscribeOptions, on_text: Any = None) -> Any: ...


class RealtimeSession:
    """See the module's docstring. `hearing`: the Whisper engine that hears the session (None:
    audio is refused); `model`: the model the client connected with."""

    def __init__(
        self,
        *,
        kind: SessionKind,
        model: str,
        hearing: Hearing | None,
        limits: RealtimeLimits | None = None,
        conversation: Callable[[RealtimeSession], Conversation] | None = None,
    ) -> None:
        self.id = "sess_" + uuid.uuid4().hex[:20]
        self.model = model
        self.hearing = hearing
        self.limits = limits or RealtimeLimits()
        self.has_vad = hearing is not None and hearing.graph.vad_model is not None
        self.settings = initial_settings(
            kind, has_vad=self.has_vad, transcriber=hearing.graph.name if hearing else None
        )
        self.events: asyncio.Queue[rt.ServerEvent | None] = asyncio.Queue()
        """What to send, in order; None: close the socket (`closing` says why)."""
        self.closing: str | None = None
        self.last_item_id: str | None = None
        self._audio = LiveAudio(self.settings.input_format)
        self._chunks: list[np.ndarray] = []
        self._buffer_start = 0
        """Session sample index of the buffer's first sample."""
        self._total = 0
        """Samples appended in the session (its clock, 16 kHz)."""
        self._detector: TurnDetector | None = None
        self._speech: tuple[str, int] | None = None
        """The turn VAD opened: its item id and start (session ms)."""
        self._vad_input: asyncio.Queue[tuple[int, np.ndarray]] = asyncio.Queue()
        self._vad_stream = 0
        """The VAD stream's generation: audio queued for an older one is dropped."""
        self._vad_backlog = 0
        """Samples appended and not yet heard by VAD (bounded like the buffer)."""
        self._turns: asyncio.Queue[tuple[str, str | None, np.ndarray, int, int]] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self.conversation = conversation(self) if conversation is not None else None

    # -- life ------------------------------------------------------------------------------

    def start(self) -> None:
        """Send `session.created` and start hearing."""
        self.send(rt.SessionCreated(session=self.settings.describe(self.id, self.model)))
        if self.settings.kind == "realtime":
            self.send(rt.ConversationCreated(conversation=rt.Conversation(id="conv_" + self.id[5:])))
        self._restart_vad()
        self._tasks = [
            asyncio.create_task(self._hear_voice(), name=f"{self.id} vad"),
            asyncio.create_task(self._transcribe_turns(), name=f"{self.id} transcribe"),
        ]

    async def close(self) -> None:
        """End the session: its engine work is cancelled (a transcription or VAD call in flight is
        abandoned, and the engine told), the conversation closed."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.conversation is not None:
            await self.conversation.close()

    def send(self, event: rt.ServerEvent) -> None:
        """Queue `event` for the client; a client that does not read closes the session."""
        if self.closing:
            return
        if self.events.qsize() >= self.limits.max_events_queued:
            self.closing = f"the client did not read its events ({self.limits.max_events_queued} waiting)"
            self.events.put_nowait(None)
            return
        self.events.put_nowait(event)

    def refuse(self, error: ApplianceError, event_type: str | None, event_id: str | None) -> None:
        """An `error` event for a client event that could not be served; the session goes on."""
        message = error.message if event_type is None else f"{event_type}: {error.message}"
        self.send(
            rt.ErrorEvent(
                error=rt.RealtimeError(
                    message=message, type=error.type, code=error.code, param=error.param, event_id=event_id
                )
            )
        )

    # -- client events ---------------------------------------------------------------------

    async def handle(self, event: rt.ClientEvent) -> None:
        """Serve one client event; InvalidRequest for a bad one (the caller `refuse`s it)."""
        if isinstance(event, rt.InputAudioBufferAppend):
            self._append(event)
        elif isinstance(event, rt.InputAudioBufferCommit):
            self._commit_manually()
        elif isinstance(event, rt.InputAudioBufferClear):
            self._clear()
            self.send(rt.InputAudioBufferCleared())
        elif isinstance(event, rt.SessionUpdate):
            self._update(event)
        elif self.conversation is not None:
            await self.conversation.on_event(event)
        else:
            raise InvalidRequest(
                f"A {self.settings.kind} session here transcribes its input audio only; it does not serve "
                f"'{type(event).__struct_config__.tag}'.",
                param="type",
                code="unsupported_event",
            )

    def _update(self, event: rt.SessionUpdate) -> None:
        settings = updated_settings(self.settings, event.session, has_vad=self.has_vad)
        self._check_transcription(settings)
        if self.conversation is not None:
            self.conversation.on_update(settings.config)
        format_changed = settings.input_format != self.settings.input_format
        vad_changed = settings.turns != self.settings.turns
        self.settings = settings
        if format_changed:
            self._audio = LiveAudio(settings.input_format)
        if vad_changed:
            self._restart_vad()
        self.send(rt.SessionUpdated(session=settings.describe(self.id, self.model)))

    def _check_transcription(self, settings: SessionSettings) -> None:
        asked = settings.transcription
        if asked is None or self.hearing is None:
            return
        param = "session.audio.input.transcription"
        if asked.model is not None and asked.model not in (self.hearing.graph.name, *self.hearing.graph.aliases):
            raise InvalidRequest(
                f"This session is heard by '{self.hearing.graph.name}'; transcription.model cannot name another "
                "model (connect with the model you want).",
                param=f"{param}.model",
                code="invalid_value",
            )
        facts = self.hearing.graph.speech_facts
        if asked.language is not None and facts is not None and asked.language not in facts.languages:
            raise InvalidRequest(
                f"Language '{asked.language}' is not one this model knows.",
                param=f"{param}.language",
                code="invalid_value",
            )

    def _append(self, event: rt.InputAudioBufferAppend) -> None:
        if self.hearing is None:
            raise InvalidRequest("This session has no speech model to hear audio with.", param="audio")
        try:
            data = decode_base64(event.audio)
        except ValueError:
            raise InvalidRequest("`audio` is not valid base64.", param="audio", code="invalid_value") from None
        samples = self._audio.decode(data)
        limit = int(self.limits.max_buffer_seconds * TARGET_RATE)
        if self._buffered() + len(samples) > limit:
            if self._detector is None:
                raise InvalidRequest(
                    f"The input audio buffer holds {self._buffered() / TARGET_RATE:.1f} s, its limit is "
                    f"{self.limits.max_buffer_seconds:g} s: commit or clear it.",
                    param="audio",
                    code="input_audio_buffer_full",
                )
            if self._speech is not None:  # a turn longer than the buffer: it ends here
                self._end_turn(self._total * 1000 // TARGET_RATE)
            self._drop_before(self._total + len(samples) - limit)
        if self._detector is not None and self._vad_backlog + len(samples) > limit:
            raise InvalidRequest(
                f"The server's voice-activity detection is {self._vad_backlog / TARGET_RATE:.1f} s behind this "
                "session's audio: send it no faster than it is heard.",
                param="audio",
                code="input_audio_too_fast",
            )
        self._chunks.append(samples)
        self._total += len(samples)
        if self._detector is not None:
            self._vad_backlog += len(samples)
            self._vad_input.put_nowait((self._vad_stream, samples))

    def _commit_manually(self) -> None:
        buffered = self._buffered()
        if buffered < MIN_COMMIT_MS * _MS:
            raise InvalidRequest(
                f"Error committing input audio buffer: buffer too small. Expected at least {MIN_COMMIT_MS}ms of "
                f"audio, but buffer only has {buffered / _MS:.2f}ms of audio.",
                code="input_audio_buffer_commit_empty",
            )
        item_id = self._speech[0] if self._speech else new_item_id()
        start_ms = self._buffer_start // _MS
        self._commit(item_id, start_ms, self._total // _MS)
        if self._detector is not None:
            self._detector.reset()
        self._speech = None

    def _clear(self) -> None:
        self._drop_before(self._total)
        if self._detector is not None:
            self._detector.reset()
        self._speech = None

    # -- the buffer ------------------------------------------------------------------------

    def _buffered(self) -> int:
        return self._total - self._buffer_start

    def _drop_before(self, sample: int) -> None:
        """Forget the buffered audio before session sample `sample`."""
        sample = min(max(sample, self._buffer_start), self._total)
        if sample == self._buffer_start:
            return
        whole = np.concatenate(self._chunks) if self._chunks else np.zeros(0, dtype=np.float32)
        rest = whole[sample - self._buffer_start :]
        self._chunks = [rest] if len(rest) else []
        self._buffer_start = sample

    def _take(self, start_ms: int, end_ms: int) -> np.ndarray:
        """The buffered samples from `start_ms` to `end_ms` (session time); what came before goes."""
        start = max(start_ms * _MS, self._buffer_start)
        end = min(max(end_ms * _MS, start), self._total)
        whole = np.concatenate(self._chunks) if self._chunks else np.zeros(0, dtype=np.float32)
        taken = whole[start - self._buffer_start : end - self._buffer_start].copy()
        self._drop_before(end)
        return taken

    def _commit(self, item_id: str, start_ms: int, end_ms: int) -> None:
        samples = self._take(start_ms, end_ms)
        previous, self.last_item_id = self.last_item_id, item_id
        self.send(rt.InputAudioBufferCommitted(item_id=item_id, previous_item_id=previous))
        item = rt.MessageItem(
            id=item_id, role="user", status="completed", content=[rt.ContentPart(type="input_audio", transcript=None)]
        )
        self.send(rt.ConversationItemAdded(item=item, previous_item_id=previous))
        self.send(rt.ConversationItemDone(item=item, previous_item_id=previous))
        if self.settings.transcription is None:
            return
        if self._turns.qsize() >= self.limits.max_turns_waiting:
            self._failed(item_id, f"{self._turns.qsize()} turns are waiting for their transcription, the limit.")
            return
        self._turns.put_nowait((item_id, previous, samples, start_ms, end_ms))

    # -- server VAD ------------------------------------------------------------------------

    def _restart_vad(self) -> None:
        turns = self.settings.turns
        self._detector = None if turns is None else TurnDetector(turns.vad, start_ms=self._total // _MS)
        self._speech = None
        self._vad_stream += 1

    async def _hear_voice(self) -> None:
        """The VAD loop: the stream's frames to the engine, 256 at most a call, in order. A
        restart (`_restart_vad`: turn detection or the format changed) begins a new stream."""
        pending = np.zeros(0, dtype=np.float32)
        state, stream = b"", self._vad_stream
        while True:
            generation, chunk = await self._vad_input.get()
            self._vad_backlog -= len(chunk)
            if generation != self._vad_stream:
                continue  # audio of a stream that has ended
            if generation != stream:
                pending, state, stream = np.zeros(0, dtype=np.float32), b"", generation
            pending = np.concatenate([pending, chunk])
            while len(pending) >= FRAME_SAMPLES and stream == self._vad_stream:
                count = min(len(pending) // FRAME_SAMPLES, _VAD_FRAMES_PER_CALL) * FRAME_SAMPLES
                frames, pending = pending[:count], pending[count:]
                try:
                    answer = await self.hearing.detect_voice(frames.astype("<f4").tobytes(), state)
                except ApplianceError as exc:
                    self.refuse(exc, "input_audio_buffer.append", None)
                    continue
                state = answer.state
                if stream == self._vad_stream and self._detector is not None:
                    probabilities = np.frombuffer(answer.probabilities, dtype="<f4").tolist()
                    for boundary in self._detector.feed(probabilities):
                        await self._on_boundary(boundary)
                    self._forget_quiet()

    async def _on_boundary(self, boundary: SpeechStarted | SpeechStopped) -> None:
        if isinstance(boundary, SpeechStarted):
            item_id = new_item_id()
            self._speech = (item_id, boundary.audio_start_ms)
            self.send(rt.InputAudioBufferSpeechStarted(audio_start_ms=boundary.audio_start_ms, item_id=item_id))
            if self.conversation is not None:
                await self.conversation.on_speech_started(item_id, boundary.audio_start_ms)
        elif self._speech is not None:
            self._end_turn(boundary.audio_end_ms)

    def _forget_quiet(self) -> None:
        """Between turns, only the prefix padding (and a margin) before what VAD has heard can
        still be committed: the rest goes."""
        if self._speech is None and self._detector is not None:
            keep_ms = self._detector.settings.prefix_padding_ms + 2 * FRAME_MS
            self._drop_before((self._detector.now_ms - keep_ms) * _MS)

    def _end_turn(self, end_ms: int) -> None:
        item_id, start_ms = self._speech
        self._speech = None
        if self._detector is not None:
            self._detector.reset()
        self.send(rt.InputAudioBufferSpeechStopped(audio_end_ms=end_ms, item_id=item_id))
        self._commit(item_id, start_ms, end_ms)

    # -- transcription ---------------------------------------------------------------------

    async def _transcribe_turns(self) -> None:
        while True:
            item_id, previous, samples, start_ms, end_ms = await self._turns.get()
            transcript = await self._transcribe(item_id, samples)
            if transcript is not None and self.conversation is not None:
                await self.conversation.on_turn(Turn(item_id, previous, samples, transcript, start_ms, end_ms))

    async def _transcribe(self, item_id: str, samples: np.ndarray) -> str | None:
        asked = self.settings.transcription
        options = TranscribeOptions(language=asked.language, prompt=asked.prompt or "", stream=True)

        def on_text(text: str) -> None:
            self.send(rt.TranscriptionDelta(item_id=item_id, delta=text))

        try:
            answer = await self.hearing.transcribe(samples.astype("<f4").tobytes(), options, on_text)
        except ApplianceError as exc:
            self._failed(item_id, exc.message, exc.code)
            return None
        transcript = answer.text.strip()
        seconds = round(len(samples) / TARGET_RATE, 3)
        self.send(
            rt.TranscriptionCompleted(
                item_id=item_id, content_index=0, transcript=transcript, usage=rt.DurationUsage(seconds=seconds)
            )
        )
        return transcript

    def _failed(self, item_id: str, message: str, code: str | None = None) -> None:
        error = rt.TranscriptionError(message=message, code=code)
        self.send(rt.TranscriptionFailed(item_id=item_id, content_index=0, error=error))
