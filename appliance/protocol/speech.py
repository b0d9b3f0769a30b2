"""OpenAI's `POST /v1/audio/speech` request (`openai.types.audio.SpeechCreateParams`), fields in
the reference's order, and its stream events. The answer is the audio file's bytes, not JSON, or
with `stream_format: "sse"` OpenAI's events: `speech.audio.delta` (`audio`: base64 of the file's
next bytes) and `speech.audio.done` (`usage`). openai-python 3.57 has no types for the events;
their shape is the API reference's (`SpeechAudioDeltaEvent`, `SpeechAudioDoneEvent`)."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, Struct

__all__ = ["SpeechAudioDeltaEvent", "SpeechAudioDoneEvent", "SpeechRequest", "SpeechUsage"]


class SpeechRequest(Struct, kw_only=True, forbid_unknown_fields=True):
    """Text to speak. `voice` is required by OpenAI; here a request without one gets the graph's
    default voice (an empty `voice` names none: a 400). `instructions` (gpt-4o-mini-tts's voice
    direction) is refused by the service, not ignored, and so is a `speed` a model cannot honour."""

    input: str
    model: str
    voice: str | None = None
    instructions: str | None = None
    response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm"] = "mp3"
    speed: Annotated[float, Meta(ge=0.25, le=4.0)] = 1.0
    stream_format: Literal["sse", "audio"] = "audio"


class SpeechAudioDeltaEvent(Struct, kw_only=True, tag_field="type", tag="speech.audio.delta"):
    """The next bytes of the audio file, base64: the deltas' bytes joined are the file."""

    audio: str


class SpeechUsage(Struct, kw_only=True):
    input_tokens: int
    output_tokens: int
    total_tokens: int


class SpeechAudioDoneEvent(Struct, kw_only=True, tag_field="type", tag="speech.audio.done"):
    """The last event of a streamed speech answer."""

    usage: SpeechUsage
