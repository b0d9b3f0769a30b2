"""Speech from text on a text-to-speech graph, in OpenAI's shape (`/v1/audio/speech`), streamed.

Everything a request asks is checked before the engine sees it: the model speaks (a chat or
Whisper model named is a 400 at once), the voice is one of the graph's (`tts.voices`; the 400
lists them), the input is not empty and within `tts.max_input_chars`, and what the model cannot do
is refused rather than ignored: `instructions` (neither SpeechT5 nor hibari takes voice direction),
and for SpeechT5 a `speed` other than 1.0 (its pipeline has no speed control, and stretching the
waveform afterwards would shift its pitch; a hibari voice takes the speed as an input).

Every answer is streamed from the engine (`EngineClient.synthesize` with a listener): a hibari
voice speaks a sentence at a time, SpeechT5 the whole text in one piece. `open_speech` waits for
the first piece, so a request the engine refuses is still a clean 4xx, then hands the route a
`SpeechCall` whose pieces are encoded (off the event loop, `media.audio_encode.SpeechEncoder`) as
one file's consecutive bytes: the audio answer sends them as they come (chunked), an SSE answer
(`stream_format: "sse"`) as `speech.audio.delta` events of base64 bytes, then
`speech.audio.done` with the usage. Either way the pieces joined are one valid file. A client
that leaves cancels the synthesis, which the engine stops before its next sentence. An engine
that fails midway (killed, say) cuts the audio answer short (the connection closes without the
chunked body's end, so no client takes the part for the whole file; uvicorn logs the error) and
ends the SSE answer with an error event.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import numpy as np

from appliance.engine import EngineClient
from appliance.engine.messages import SpeechAudio, Synthesized
from appliance.errors import ApplianceError, InvalidRequest, unsupported
from appliance.media.audio_encode import MEDIA_TYPES, SpeechEncoder
from appliance.media.work_pool import WorkPool
from appliance.protocol.speech import SpeechAudioDeltaEvent, SpeechAudioDoneEvent, SpeechRequest, SpeechUsage
from appliance.service.retrieval import Answered

__all__ = ["SpeechCall", "open_speech"]


def check(engine: EngineClient, request: SpeechRequest) -> str:
    """The voice the request is spoken in, once everything it asks is known to be possible."""
    engine.admit("synthesize")
    graph = engine.graph
    facts = graph.tts_facts
    family = "hibari" if facts is not None and facts.family == "hibari" else "SpeechT5"
    if request.instructions:
        raise unsupported(
            f"Model '{graph.name}' ({family}) takes no instructions: the voice is chosen by `voice` alone.",
            "instructions",
        )
    if request.speed != 1.0 and not (facts is not None and facts.streams):
        raise InvalidRequest(
            f"Model '{graph.name}' speaks at speed 1.0 only: SpeechT5 has no speed control, and stretching "
            "its audio afterwards would change the voice's pitch.",
            param="speed",
            code="unsupported_value",
        )
    voice = graph.default_voice if request.voice is None else request.voice
    if not voice:
        # OpenAI's API requires a voice: an empty name is a client's mistake, not a request for the default.
        raise InvalidRequest(
            f"`voice` is empty: name one of model '{graph.name}''s voices ({', '.join(graph.voices)}), or leave "
            f"the field out for its default ({graph.default_voice}).",
            param="voice",
        )
    if voice not in graph.voices:
        raise InvalidRequest(
            f"Voice '{voice}' is not one of model '{graph.name}''s voices: {', '.join(graph.voices)}.",
            param="voice",
        )
    if not request.input.strip():
        raise InvalidRequest("`input` is empty: there is nothing to say.", param="input", code="empty_input")
    if len(request.input) > graph.max_input_chars:
        raise InvalidRequest(
            f"`input` is {len(request.input)} characters; model '{graph.name}' takes at most "
            f"{graph.max_input_chars} (tts.max_input_chars).",
            param="input",
            code="input_too_long",
        )
    return voice


@dataclass
class SpeechCall:
    """A request being spoken: its file's bytes as the engine speaks (`chunks`) or as SSE events
    (`events`). Read one of them once; leaving it early cancels the synthesis."""

    request: SpeechRequest
    encoding: WorkPool
    work: asyncio.Future[Synthesized]
    pieces: asyncio.Queue[SpeechAudio]
    first: SpeechAudio | None
    """The first piece (None: the engine answered with no audio)."""
    answered: Answered
    media_type: str = field(init=False)

    def __post_init__(self) -> None:
        self.media_type = MEDIA_TYPES[self.request.response_format]

    async def chunks(self) -> AsyncIterator[bytes]:
        """The audio file's bytes, a piece of speech at a time (empty pieces skipped)."""
        encoder: SpeechEncoder | None = None
        try:
            async for samples, rate, last in self.samples():
                if encoder is None:
                    encoder = SpeechEncoder(rate, self.request.response_format)
                chunk = await self.encoding.call(encoder.add, samples, last=last)
                if self.answered.first_token_at is None:
                    self.answered.first_token_at = time.monotonic()
                if chunk:
                    yield chunk
        except ApplianceError:  # the engine failed midway: logged as such, not as a whole answer
            self.answered.finish_reason = "error"
            raise
        finally:
            self.work.cancel()  # a no-op once spoken; else the engine stops before its next sentence
            if encoder is not None:
                encoder.close()

    async def events(self) -> AsyncIterator[SpeechAudioDeltaEvent | SpeechAudioDoneEvent | dict]:
        """`speech.audio.delta` per chunk of the file, then `speech.audio.done` with the usage:
        the text's tokens (hibari: phonemes) in, the acoustic frames made (hibari: one per 12.5 ms)
        out. An engine that fails midway ends the stream with an error event (no `done`)."""
        try:
            async for chunk in self.chunks():
                yield SpeechAudioDeltaEvent(audio=base64.b64encode(chunk).decode("ascii"))
            answer = await self.work
        except ApplianceError as exc:
            yield exc.to_dict()
            return
        yield SpeechAudioDoneEvent(
            usage=SpeechUsage(
                input_tokens=answer.tokens, output_tokens=answer.frames, total_tokens=answer.tokens + answer.frames
            )
        )

    async def samples(self) -> AsyncIterator[tuple[np.ndarray, int, bool]]:
        """Each piece's samples, its rate and whether it is the last (the engine says), the first
        already in hand; then the engine's answer is awaited (it follows the last piece)."""
        piece = self.first
        while piece is not None:
            yield np.frombuffer(piece.samples, dtype="<f4"), piece.sample_rate, piece.last
            piece = None if piece.last else await self._next()
        answer = await self.work
        if self.first is None:  # nothing was said (a text of punctuation only): an empty file
            yield np.zeros(0, np.float32), answer.sample_rate, True

    async def _next(self) -> SpeechAudio | None:
        """The next piece, or None once the engine has answered with no piece left (raising what
        the engine raised)."""
        if self.pieces.empty() and not self.work.done():
            waiting = asyncio.ensure_future(self.pieces.get())
            try:
                await asyncio.wait({waiting, self.work}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiting.cancel()
            if waiting.done() and not waiting.cancelled():
                return waiting.result()
        if not self.pieces.empty():  # the engine's last pieces arrive before its answer
            return self.pieces.get_nowait()
        self.work.result()
        return None


async def open_speech(engine: EngineClient, request: SpeechRequest, encoding: WorkPool) -> SpeechCall:
    """Start speaking the request's input on `engine`; returns once the first piece of audio is in
    (or the engine answered), so a refusal is raised here, before any response starts."""
    voice = check(engine, request)
    submitted = time.monotonic()
    pieces: asyncio.Queue[SpeechAudio] = asyncio.Queue()
    work = asyncio.ensure_future(engine.synthesize(request.input, voice, request.speed, pieces.put_nowait))
    call = SpeechCall(request, encoding, work, pieces, None, Answered(prompt_tokens=0, submitted_at=submitted))
    try:
        call.first = await call._next()
    except BaseException:
        work.cancel()
        raise
    work.add_done_callback(lambda done: _count_tokens(done, call.answered))
    return call


def _count_tokens(work: asyncio.Future[Synthesized], answered: Answered) -> None:
    if not work.cancelled() and work.exception() is None:
        answered.prompt_tokens = work.result().tokens
