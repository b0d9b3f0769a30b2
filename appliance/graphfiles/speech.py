"""Speech-to-text graphs (Whisper): what kind a model folder holds, the `[speech]` settings, and
what the model's own files say about it.

optimum-intel exports a Whisper checkpoint as an encoder IR, a stateful decoder IR and the
tokenizer's IRs, beside Hugging Face's `config.json` (`model_type = "whisper"`,
`max_target_positions`: the tokens one 30 s window's text may take) and `generation_config.json`
(`is_multilingual`, `lang_to_id`: the languages the model knows, `alignment_heads`: needed for word
timestamps). Standard library only (read when a graph is loaded).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import msgspec

from appliance.graphfiles.model_json import json_object

__all__ = ["SPEECH_FILES", "SpeechFacts", "SpeechSettings", "is_whisper", "read_speech_facts"]

SPEECH_FILES = (
    "openvino_encoder_model.xml",
    "openvino_decoder_model.xml",
    "openvino_tokenizer.xml",
    "openvino_detokenizer.xml",
    "generation_config.json",
)
"""What `WhisperPipeline` reads from a model folder (besides config.json and the .bin files)."""
_OPENAI_UPLOAD_BYTES = 25 * 1024 * 1024
"""OpenAI's audio routes take files of at most 25 MB."""
_WHISPER_TEXT_TOKENS = 448
"""Whisper's `max_target_positions`: tokens of text per 30 s window."""


class SpeechSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """`[speech]`: what a speech-to-text graph takes and gives."""

    max_audio_seconds: Annotated[float, msgspec.Meta(gt=0, le=4 * 3600)] = 1800
    """Decoded audio one request may carry (longer files get a 400 before any is transcribed).
    Whisper reads audio in 30 s windows, one after another: a request's time in the engine grows
    with its duration, and other requests for the model wait behind it."""
    max_upload_bytes: Annotated[int, msgspec.Meta(ge=1024, le=4 << 30)] = _OPENAI_UPLOAD_BYTES
    """Bytes of one uploaded file (OpenAI's limit, 25 MB, by default). The server's own
    `max_body_size` bounds the whole request too."""
    max_queued_audio_seconds: Annotated[float, msgspec.Meta(gt=0, le=7 * 86_400)] = 7200
    """Audio the model's requests may hold at once, waiting or being transcribed (beyond it: 503
    with Retry-After). Each second is 64 KB of samples in the engine while it waits: the default
    holds at most about 460 MB, whatever `limits.max_queued_requests` allows."""
    word_timestamps: bool = False
    """Serve `timestamp_granularities[]=word` (verbose_json). The pipeline then computes word
    alignments for every request (it is a constructor flag), which costs time; the model's
    generation_config.json must give `alignment_heads`."""
    vad_model: str | None = None
    """A voice-activity model checked before Whisper (silero-vad's `silero_vad_16k_sequence.onnx`,
    relative to the graph file's directory unless absolute): a recording in which it hears no
    speech is answered with empty text and no segments, and Whisper never reads it. None: no check,
    and Whisper reads silence and noise too, where it may invent words ("you"; docs/speech.md)."""
    vad_threshold: Annotated[float, msgspec.Meta(gt=0, lt=1)] = 0.5
    """The voice-activity model's speech probability from which a 32 ms frame counts as speech
    (silero's default; speech scores about 1.0 there, silence and white noise under 0.1)."""
    vad_min_speech_seconds: Annotated[float, msgspec.Meta(ge=0, le=10)] = 0.25
    """The shortest run of speech that counts (silero's default, 250 ms): a click or a cough
    shorter than this is not speech."""


@dataclass(frozen=True)
class SpeechFacts:
    """What a Whisper model's files say: the languages it knows (ISO codes, in the model's order;
    empty for an English-only model), whether it can translate, its text tokens per window, and
    whether its files give the alignment heads word timestamps need."""

    multilingual: bool
    languages: tuple[str, ...]
    text_tokens: int
    alignment_heads: bool

    def describe(self) -> str:
        languages = f"{len(self.languages)} languages, translation to English" if self.multilingual else "English only"
        words = "word timestamps possible" if self.alignment_heads else "no alignment heads: no word timestamps"
        return f"Whisper: {languages}; {self.text_tokens} text tokens per 30 s window; {words}"


def is_whisper(model_dir: Path) -> bool:
    """Whether the folder holds a Whisper export (`pipeline = "AUTO"` serves it as SPEECH_TO_TEXT)."""
    config = json_object(model_dir / "config.json")
    architectures = config.get("architectures") or []
    return config.get("model_type") == "whisper" or any(str(name).startswith("Whisper") for name in architectures)


def read_speech_facts(model_dir: Path) -> SpeechFacts:
    """The facts of the Whisper model in `model_dir`; defaults where its files say nothing."""
    generation = json_object(model_dir / "generation_config.json")
    tokens = json_object(model_dir / "config.json").get("max_target_positions")
    lang_to_id = generation.get("lang_to_id")
    codes = tuple(name.strip("<|>") for name in lang_to_id) if isinstance(lang_to_id, dict) else ()
    multilingual = bool(generation.get("is_multilingual", bool(codes))) and bool(codes)
    return SpeechFacts(
        multilingual=multilingual,
        languages=codes if multilingual else (),
        text_tokens=tokens if isinstance(tokens, int) and tokens > 0 else _WHISPER_TEXT_TOKENS,
        alignment_heads=bool(generation.get("alignment_heads")),
    )
