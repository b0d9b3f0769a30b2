"""OpenAI audio transcriptions and translations: response and stream-event structs.

Wire names are openai-python's (`openai.types.audio`): `Transcription`, `TranscriptionVerbose`,
`TranscriptionSegment`, `TranscriptionWord`, `TranscriptionTextDeltaEvent`,
`TranscriptionTextDoneEvent`, `Translation`, `TranslationVerbose`; fields in the order OpenAI's
whisper-1 sends them (verbose_json: task, language, duration, text, words, segments, usage).

Left out, because WhisperPipeline cannot give them:
- a segment's `avg_logprob`, `compression_ratio` and `no_speech_prob` (the pipeline returns text
  and timestamps, no token scores). The SDK constructs its models without validation, so a
  segment without them still parses and reads them as None (tests/unit/test_speech_formats.py
  checks it); a client thresholding on them as openai/whisper does sees "no information".
- `logprobs` (no token scores), `languages` (gpt-transcribe's list) and the token `usage` of the
  stream events (whisper-1 bills by duration, and OpenAI's `transcript.text.done` has no duration
  variant).

Usage is OpenAI's duration variant, `{"type": "duration", "seconds": N}`: whole seconds, rounded
up, as OpenAI's whisper-1 examples show (8.47 s of audio -> 9); the SDK types it as a float, which
an integer satisfies. Rendering a transcript into these lives in `service/speech_formats.py`.
"""

from __future__ import annotations

from typing import Literal

from msgspec import UNSET, Struct, UnsetType

__all__ = [
    "Transcription",
    "TranscriptionSegment",
    "TranscriptionTextDeltaEvent",
    "TranscriptionTextDoneEvent",
    "TranscriptionVerbose",
    "TranscriptionWord",
    "Translation",
    "TranslationVerbose",
    "UsageDuration",
]


class UsageDuration(Struct, kw_only=True, tag_field="type", tag="duration"):
    """Audio seconds billed: `{"type": "duration", "seconds": N}`."""

    seconds: int


class TranscriptionWord(Struct, kw_only=True):
    word: str
    start: float
    end: float


class TranscriptionSegment(Struct, kw_only=True):
    """A stretch of text with its times (see the module docstring for the fields left out)."""

    id: int
    seek: int
    """Where the window this segment was decoded in starts, in 10 ms frames (as openai/whisper)."""
    start: float
    end: float
    text: str
    tokens: list[int]
    temperature: float


class Transcription(Struct, kw_only=True):
    """`response_format: "json"`."""

    text: str
    usage: UsageDuration | UnsetType = UNSET


class TranscriptionVerbose(Struct, kw_only=True):
    """`response_format: "verbose_json"` for a transcription; `words` and `segments` as
    `timestamp_granularities[]` asks (segments by default)."""

    task: Literal["transcribe"] = "transcribe"
    language: str
    duration: float
    text: str
    words: list[TranscriptionWord] | UnsetType = UNSET
    segments: list[TranscriptionSegment] | UnsetType = UNSET
    usage: UsageDuration | UnsetType = UNSET


class Translation(Struct, kw_only=True):
    """`response_format: "json"` for a translation (OpenAI sends no usage here)."""

    text: str


class TranslationVerbose(Struct, kw_only=True):
    """`response_format: "verbose_json"` for a translation; `language` is the output's: english."""

    task: Literal["translate"] = "translate"
    language: str
    duration: float
    text: str
    segments: list[TranscriptionSegment] | UnsetType = UNSET


class TranscriptionTextDeltaEvent(Struct, kw_only=True, tag_field="type", tag="transcript.text.delta"):
    """`stream=true`: text as it is transcribed (the first event, then one per piece)."""

    delta: str


class TranscriptionTextDoneEvent(Struct, kw_only=True, tag_field="type", tag="transcript.text.done"):
    """`stream=true`: the last event, with the whole text."""

    text: str
