"""The form of `POST /v1/audio/transcriptions` and `/v1/audio/translations` (multipart/form-data),
with OpenAI's field names; the answers are in `protocol.audio`.

A form's values arrive as strings (`stream=true`, `temperature=0.2`) and are converted to these
types; a list field arrives as repeated parts named with brackets (`timestamp_granularities[]`,
as the openai SDK sends them), or without them.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

__all__ = ["ResponseFormat", "TranscriptionForm", "TranslationForm"]

ResponseFormat = Literal["json", "text", "srt", "verbose_json", "vtt"]


class TranslationForm(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """`/v1/audio/translations`: speech in any language the model knows, as English text. A field
    not listed here is refused (400 `unknown_parameter`), as on the JSON routes: a parameter the
    appliance does not honour must not be ignored."""

    file: bytes
    """The audio file: flac, mp3, mp4, mpeg, mpga, m4a, ogg, wav or webm."""
    model: str
    prompt: str | None = None
    """Text in English the model reads as what came before the audio (spellings, style)."""
    response_format: ResponseFormat = "json"
    temperature: Annotated[float, msgspec.Meta(ge=0, le=1)] = 0.0
    """0: greedy decoding; above: sampling at this temperature."""


class TranscriptionForm(TranslationForm, kw_only=True):
    """`/v1/audio/transcriptions`: speech as text in its own language."""

    language: str | None = None
    """The audio's language, ISO 639-1 (`en`) or its English name; None: the model detects it."""
    timestamp_granularities: list[Literal["word", "segment"]] = msgspec.field(
        default_factory=list, name="timestamp_granularities[]"
    )
    """With `verbose_json`: the segments' times, the words' times, or both (default: segments)."""
    stream: bool = False
    """Send the text as it is decoded, as server-sent `transcript.text.delta` events, then one
    `transcript.text.done` (json and text formats)."""
    include: list[str] = msgspec.field(default_factory=list, name="include[]")
    """OpenAI's `logprobs` (gpt-4o-transcribe): not available from Whisper here; refused."""
    chunking_strategy: str | None = None
    """OpenAI's server-side voice-activity chunking: not available here; refused. Audio longer
    than Whisper's 30 s window is read in windows by the engine."""
