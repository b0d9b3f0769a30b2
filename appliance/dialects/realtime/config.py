"""A Realtime session's configuration: what `session.update` may change, checked, and the whole
effective configuration the `session.created` / `session.updated` events show.

An update is merged field by field into the configuration it changes (a field left out keeps its
value, an explicit `null` clears it: `turn_detection: null` is manual commits). What the appliance
cannot honour is refused naming its field (the session keeps its configuration): noise
reduction, logprobs, VAD on a Whisper graph without a voice-activity model, another session type
than the one the session began as.

`semantic_vad` (the openai Agents SDK's default) is served by the same voice-activity model as
`server_vad`: there is no model here that judges whether a sentence is finished, so its
`eagerness` picks the silence that ends a turn (`SEMANTIC_SILENCE_MS`: high 300 ms, medium and
auto 500 ms as server VAD's default, low 1000 ms), and the session shows it as asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from appliance.dialects.realtime.turns import VadSettings
from appliance.errors import InvalidRequest, unsupported
from appliance.protocol.realtime import (
    UNSET,
    AudioInput,
    AudioTranscription,
    RealtimeSession,
    SemanticVad,
    ServerVad,
    SessionConfig,
    TranscriptionSession,
)

__all__ = ["SEMANTIC_SILENCE_MS", "SessionSettings", "Turns", "initial_settings", "updated_settings"]

SEMANTIC_SILENCE_MS = {"high": 300, "medium": 500, "auto": 500, "low": 1000}
"""`semantic_vad`'s eagerness as server VAD's `silence_duration_ms` (see the module's docstring)."""

SessionKind = Literal["transcription", "realtime"]


@dataclass(frozen=True)
class Turns:
    """Server VAD, effective: the detector's settings and what a turn's end does."""

    vad: VadSettings
    create_response: bool = True
    interrupt_response: bool = True
    idle_timeout_ms: int | None = None
    eagerness: str | None = None
    """Set when the client asked for `semantic_vad` (its eagerness, `vad` derived from it)."""


@dataclass(frozen=True)
class SessionSettings:
    """The effective configuration. `config`: every field the client set, merged (the conversation
    side reads `instructions`, `tools`, `audio.output`... from it); the others are read from it
    with the appliance's defaults."""

    kind: SessionKind
    config: SessionConfig
    input_format: str = "audio/pcm"
    transcription: AudioTranscription | None = None
    turns: Turns | None = None

    def describe(self, session_id: str, model: str) -> dict[str, Any]:
        """The configuration as `session.created` / `session.updated` carry it."""
        shown: dict[str, Any] = msgspec.to_builtins(self.config)
        shown.update(
            id=session_id, object="realtime.session" if self.kind == "realtime" else "realtime.transcription_session"
        )
        if self.kind == "realtime":
            shown.setdefault("model", model)
        audio = shown.setdefault("audio", {})
        entry = audio.setdefault("input", {})
        entry["format"] = {"type": self.input_format, **({"rate": 24000} if self.input_format == "audio/pcm" else {})}
        entry["transcription"] = None if self.transcription is None else msgspec.to_builtins(self.transcription)
        entry["turn_detection"] = _described_turns(self.turns)
        entry.setdefault("noise_reduction", None)
        return shown


def _described_turns(turns: Turns | None) -> dict[str, Any] | None:
    if turns is None:
        return None
    if turns.eagerness is not None:
        return {
            "type": "semantic_vad",
            "eagerness": turns.eagerness,
            "create_response": turns.create_response,
            "interrupt_response": turns.interrupt_response,
        }
    return {
        "type": "server_vad",
        "threshold": turns.vad.threshold,
        "prefix_padding_ms": turns.vad.prefix_padding_ms,
        "silence_duration_ms": turns.vad.silence_duration_ms,
        "create_response": turns.create_response,
        "interrupt_response": turns.interrupt_response,
        "idle_timeout_ms": turns.idle_timeout_ms,
    }


def initial_settings(kind: SessionKind, *, has_vad: bool, transcriber: str | None) -> SessionSettings:
    """A new session's configuration: pcm16 at 24 kHz, transcribed by `transcriber` (the graph
    that hears it; None: not transcribed), server VAD on when the graph has a voice-activity
    model (else manual commits)."""
    config: SessionConfig = TranscriptionSession() if kind == "transcription" else RealtimeSession()
    return SessionSettings(
        kind=kind,
        config=config,
        transcription=AudioTranscription(model=transcriber) if transcriber else None,
        turns=Turns(VadSettings()) if has_vad else None,
    )


def updated_settings(current: SessionSettings, update: SessionConfig, *, has_vad: bool) -> SessionSettings:
    """`current` with `update` merged in; InvalidRequest naming the field it cannot honour."""
    kind = "transcription" if isinstance(update, TranscriptionSession) else "realtime"
    if kind != current.kind:
        raise InvalidRequest(
            f"This is a {current.kind} session: session.type cannot change to '{kind}' (open another session).",
            param="session.type",
            code="invalid_value",
        )
    if update.include:
        raise unsupported("Logprobs of the input transcription are not available here.", "session.include")
    entry = _audio_input(update)
    input_format, transcription, turns = current.input_format, current.transcription, current.turns
    if entry is not UNSET:
        if entry.noise_reduction not in (UNSET, None):
            raise unsupported("Input noise reduction is not available here.", "session.audio.input.noise_reduction")
        if entry.format is not UNSET:
            input_format = type(entry.format).__struct_config__.tag
        if entry.transcription is not UNSET:
            transcription = _transcription(transcription, entry.transcription)
        if entry.turn_detection is not UNSET:
            turns = _turns(current.turns, entry.turn_detection, has_vad=has_vad)
    return SessionSettings(
        kind=current.kind,
        config=_merged(current.config, update),
        input_format=input_format,
        transcription=transcription,
        turns=turns,
    )


def _audio_input(update: SessionConfig) -> AudioInput | type(UNSET):
    audio = update.audio
    return UNSET if audio is UNSET else audio.input


def _turns(current: Turns | None, asked: ServerVad | SemanticVad | None, *, has_vad: bool) -> Turns | None:
    param = "session.audio.input.turn_detection"
    if asked is None:
        return None
    if not has_vad:
        raise unsupported(
            "Turn detection needs a voice-activity model, and this session's speech model names none "
            "(its graph's speech.vad_model): send turn_detection null and commit the audio yourself.",
            f"{param}.type",
        )
    vad = current.vad if current is not None else VadSettings()
    base = current or Turns(vad)

    def pick(value: Any, default: Any) -> Any:
        return default if value is None else value

    if isinstance(asked, SemanticVad):
        eagerness = asked.eagerness or "auto"
        return Turns(
            VadSettings(silence_duration_ms=SEMANTIC_SILENCE_MS[eagerness]),
            create_response=pick(asked.create_response, base.create_response),
            interrupt_response=pick(asked.interrupt_response, base.interrupt_response),
            eagerness=eagerness,
        )
    return Turns(
        VadSettings(
            threshold=pick(asked.threshold, vad.threshold),
            prefix_padding_ms=pick(asked.prefix_padding_ms, vad.prefix_padding_ms),
            silence_duration_ms=pick(asked.silence_duration_ms, vad.silence_duration_ms),
        ),
        create_response=pick(asked.create_response, base.create_response),
        interrupt_response=pick(asked.interrupt_response, base.interrupt_response),
        idle_timeout_ms=pick(asked.idle_timeout_ms, base.idle_timeout_ms),
    )


def _transcription(old: AudioTranscription | None, new: AudioTranscription | None) -> AudioTranscription | None:
    """The fields `new` gives over `old`'s (its fields default to None: None keeps the old value)."""
    if old is None or new is None:
        return new
    given = {name: getattr(new, name) for name in new.__struct_fields__ if getattr(new, name) is not None}
    return msgspec.structs.replace(old, **given)


def _merged(old: Any, new: Any) -> Any:
    """`new` over `old`, struct fields merged one by one (UNSET keeps the old value)."""
    if old is None or new is None or type(old) is not type(new) or not isinstance(new, msgspec.Struct):
        return new
    changes = {}
    for name in new.__struct_fields__:
        value = getattr(new, name)
        if value is not UNSET:
            changes[name] = _merged(getattr(old, name), value)
    return msgspec.structs.replace(old, **changes)
