"""OpenAI's `POST /v1/audio/speech` request (`openai.types.audio.SpeechCreateParams`), fields in
the reference's order. The answer is the audio file's bytes, not JSON."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, Struct

__all__ = ["SpeechRequest"]


class SpeechRequest(Struct, kw_only=True, forbid_unknown_fields=True):
    """Text to speak. `voice` is required by OpenAI; here a request without one gets the graph's
    default voice (an empty `voice` names none: a 400). `instructions` (gpt-4o-mini-tts's voice
    direction) and `stream_format: "sse"` are refused by the service, not ignored."""

    input: str
    model: str
    voice: str | None = None
    instructions: str | None = None
    response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm"] = "mp3"
    speed: Annotated[float, Meta(ge=0.25, le=4.0)] = 1.0
    stream_format: Literal["sse", "audio"] = "audio"
