"""Speech from text on a text-to-speech graph, in OpenAI's shape (`/v1/audio/speech`).

Everything a request asks is checked before the engine sees it: the model speaks (a chat or
Whisper model named is a 400 at once), the voice is one of the graph's (`tts.voices`; the 400
lists them), the input is not empty and within `tts.max_input_chars`, and what SpeechT5 cannot do
is refused rather than ignored: `instructions` (it takes no voice direction), `speed` other than
1.0 (the pipeline's `speed` is not read for SpeechT5, and stretching the waveform afterwards would
shift its pitch), `stream_format: "sse"` (the pipeline returns the whole waveform at once). The
engine speaks one text at a time (`engine/worker/tts.py`); the waveform is then encoded off the event
loop (`media.audio_encode`).
"""

from __future__ import annotations

import time

import numpy as np

from appliance.engine import EngineClient
from appliance.errors import InvalidRequest, unsupported
from appliance.media.audio_encode import MEDIA_TYPES, encode_speech
from appliance.media.work_pool import WorkPool
from appliance.protocol.speech import SpeechRequest
from appliance.service.retrieval import Answered

__all__ = ["speak"]


def check(engine: EngineClient, request: SpeechRequest) -> str:
    """The voice the request is spoken in, once everything it asks is known to be possible."""
    engine.admit("synthesize")
    graph = engine.graph
    if request.instructions:
        raise unsupported(
            f"Model '{graph.name}' (SpeechT5) takes no instructions: the voice is chosen by `voice` alone.",
            "instructions",
        )
    if request.speed != 1.0:
        raise InvalidRequest(
            f"Model '{graph.name}' speaks at speed 1.0 only: SpeechT5 has no speed control, and stretching "
            "its audio afterwards would change the voice's pitch.",
            param="speed",
            code="unsupported_value",
        )
    if request.stream_format != "audio":
        raise InvalidRequest(
            f"Model '{graph.name}' returns the whole audio at once: stream_format 'sse' is not served "
            "(the default, 'audio', sends the file's bytes).",
            param="stream_format",
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


async def speak(engine: EngineClient, request: SpeechRequest, encoding: WorkPool) -> tuple[bytes, str, Answered]:
    """The request's input spoken by `engine`, encoded on `encoding`'s threads, as (file bytes,
    media type, what the access log reads)."""
    voice = check(engine, request)
    submitted = time.monotonic()
    spoken = await engine.synthesize(request.input, voice)
    samples = np.frombuffer(spoken.samples, dtype="<f4")
    body = await encoding.call(encode_speech, samples, spoken.sample_rate, request.response_format)
    answered = Answered(prompt_tokens=spoken.tokens, submitted_at=submitted)
    return body, MEDIA_TYPES[request.response_format], answered
