"""The session's configuration, as `session.update` sends it and `session.created` shows it:
input and output audio formats, transcription, turn detection (server VAD), tools, and the two
session kinds (`RealtimeSession`, `TranscriptionSession`). SDK: `realtime_session_create_request.py`,
`realtime_transcription_session_create_request.py`, `realtime_audio_formats.py`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

__all__ = [
    "AudioFormat",
    "AudioInput",
    "AudioOutput",
    "AudioPCM",
    "AudioPCMA",
    "AudioPCMU",
    "AudioTranscription",
    "FunctionTool",
    "FunctionToolChoice",
    "MaxOutputTokens",
    "Milliseconds",
    "NoiseReduction",
    "Probability",
    "RealtimeAudio",
    "RealtimeSession",
    "SemanticVad",
    "ServerVad",
    "SessionConfig",
    "ToolChoice",
    "TranscriptionAudio",
    "TranscriptionSession",
    "TurnDetection",
]

Milliseconds = Annotated[int, Meta(ge=0, le=3_600_000)]
Probability = Annotated[float, Meta(ge=0.0, le=1.0)]


class AudioPCM(Struct, tag_field="type", tag="audio/pcm", kw_only=True):
    """16-bit little-endian mono PCM; OpenAI names 24 kHz only."""

    rate: Literal[24000] = 24000


class AudioPCMU(Struct, tag_field="type", tag="audio/pcmu", kw_only=True):
    """G.711 mu-law, 8 kHz."""


class AudioPCMA(Struct, tag_field="type", tag="audio/pcma", kw_only=True):
    """G.711 A-law, 8 kHz."""


AudioFormat = AudioPCM | AudioPCMU | AudioPCMA


class NoiseReduction(Struct, kw_only=True):
    type: Literal["near_field", "far_field"] | None = None
    strength: float | None = None


class AudioTranscription(Struct, kw_only=True, omit_defaults=True):
    """Which model transcribes the input audio, in which language, with which prompt."""

    model: str | None = None
    language: str | None = None
    prompt: str | None = None
    delay: str | None = None
    keywords: list[str] | None = None
    languages: list[str] | None = None


class ServerVad(Struct, tag_field="type", tag="server_vad", kw_only=True):
    """Turn detection on a voice-activity model: speech opens at `threshold`, the turn ends after
    `silence_duration_ms` of quiet, the committed audio begins `prefix_padding_ms` before speech."""

    threshold: Probability | None = None
    prefix_padding_ms: Milliseconds | None = None
    silence_duration_ms: Milliseconds | None = None
    create_response: bool | None = None
    interrupt_response: bool | None = None
    idle_timeout_ms: Milliseconds | None = None


class SemanticVad(Struct, tag_field="type", tag="semantic_vad", kw_only=True):
    eagerness: Literal["low", "medium", "high", "auto"] | None = None
    create_response: bool | None = None
    interrupt_response: bool | None = None


TurnDetection = ServerVad | SemanticVad


class AudioInput(Struct, kw_only=True, omit_defaults=True):
    """`session.audio.input`: each field left out keeps its value; `turn_detection: null` turns
    turn detection off (manual commits), `transcription: null` transcription."""

    format: AudioFormat | UnsetType = UNSET
    noise_reduction: NoiseReduction | None | UnsetType = UNSET
    transcription: AudioTranscription | None | UnsetType = UNSET
    turn_detection: TurnDetection | None | UnsetType = UNSET


class AudioOutput(Struct, kw_only=True, omit_defaults=True):
    format: AudioFormat | UnsetType = UNSET
    speed: Annotated[float, Meta(ge=0.25, le=1.5)] | UnsetType = UNSET
    voice: str | UnsetType = UNSET


class TranscriptionAudio(Struct, kw_only=True, omit_defaults=True):
    input: AudioInput | UnsetType = UNSET


class RealtimeAudio(Struct, kw_only=True, omit_defaults=True):
    input: AudioInput | UnsetType = UNSET
    output: AudioOutput | UnsetType = UNSET


class FunctionTool(Struct, kw_only=True, omit_defaults=True):
    type: Literal["function"] = "function"
    name: str | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None


class FunctionToolChoice(Struct, kw_only=True):
    type: Literal["function"]
    name: str


ToolChoice = Literal["none", "auto", "required"] | FunctionToolChoice
MaxOutputTokens = Annotated[int, Meta(ge=1)] | Literal["inf"]


class TranscriptionSession(Struct, tag_field="type", tag="transcription", kw_only=True, omit_defaults=True):
    """A session that transcribes its input audio and answers nothing."""

    audio: TranscriptionAudio | UnsetType = UNSET
    include: list[Literal["item.input_audio_transcription.logprobs"]] | UnsetType = UNSET


class RealtimeSession(Struct, tag_field="type", tag="realtime", kw_only=True, omit_defaults=True):
    """A conversation session (speech or text in, text and/or audio out)."""

    audio: RealtimeAudio | UnsetType = UNSET
    include: list[Literal["item.input_audio_transcription.logprobs"]] | UnsetType = UNSET
    instructions: str | UnsetType = UNSET
    max_output_tokens: MaxOutputTokens | UnsetType = UNSET
    model: str | UnsetType = UNSET
    output_modalities: list[Literal["text", "audio"]] | UnsetType = UNSET
    parallel_tool_calls: bool | UnsetType = UNSET
    prompt: Any | UnsetType = UNSET
    reasoning: Any | UnsetType = UNSET
    tool_choice: ToolChoice | UnsetType = UNSET
    tools: list[FunctionTool] | UnsetType = UNSET
    tracing: Any | UnsetType = UNSET
    truncation: Any | UnsetType = UNSET


SessionConfig = RealtimeSession | TranscriptionSession
