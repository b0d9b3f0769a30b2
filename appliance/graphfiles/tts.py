"""Text-to-speech graphs (SpeechT5, hibari): what kind a model folder holds, the `[tts]` settings,
and what the model's own files say about it.

optimum-intel exports SpeechT5 (`--task text-to-audio` with a HiFi-GAN vocoder) as an encoder, a
stateful decoder, a postnet and a vocoder IR beside Hugging Face's `config.json`
(`model_type = "speecht5"`, `speaker_embedding_dim`: the length of a voice's x-vector,
`max_text_positions`: the tokens the encoder reads). `Text2SpeechPipeline` serves the folder.
A voice is a speaker embedding: a file of `speaker_embedding_dim` little-endian float32 values
(512 for Microsoft's SpeechT5: the CMU ARCTIC x-vectors its model card uses, saved with
`numpy.ndarray.tofile`).

A hibari voice folder (`config.json` with `model_type = "hibari"`, as `appliance demo` writes for
demo-voice) holds one ONNX acoustic model per voice: the `hibari-tts` package's (Apache-2.0,
distilled from Kokoro's voices). Its text front end (grapheme to phoneme) and its vocoder's DSP
are the installed package's, used as a dependency; OpenVINO reads the ONNX files directly. A voice
is then the ONNX file a `[tts.voices]` key names. config.json's `accent` ("en-US" or "en-GB")
picks the package's American or British pronunciations for every voice of the folder. Standard
library only (read when a graph is loaded).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import msgspec

from appliance.graphfiles.model_json import json_object

__all__ = [
    "HIBARI_PHONEMES",
    "OPENAI_INPUT_CHARS",
    "TTS_FILES",
    "TtsFacts",
    "TtsSettings",
    "is_hibari",
    "is_speecht5",
    "read_tts_facts",
]

TTS_FILES = (
    "openvino_encoder_model.xml",
    "openvino_decoder_model.xml",
    "openvino_postnet.xml",
    "openvino_vocoder.xml",
    "openvino_tokenizer.xml",
)
"""What `Text2SpeechPipeline` reads from a model folder (besides config.json and the .bin files)."""

OPENAI_INPUT_CHARS = 4096
"""OpenAI's /v1/audio/speech takes at most 4096 characters of input."""
HIBARI_PHONEMES = 400
"""Phonemes one call of a hibari model reads: the package's MAX_PHONEMES (its front end splits a
longer sentence at clause punctuation, the engine any piece still longer at word breaks)."""
_SPEECHT5_TEXT_POSITIONS = 450
"""SpeechT5Config's default `max_text_positions`."""
_SPEECHT5_SPEAKER_DIM = 512

VoiceName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]


class TtsSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """`[tts]`: the voices a text-to-speech graph speaks with, and its input bound."""

    voices: dict[VoiceName, str] = {}
    """Voice name -> its file, relative to the graph file's directory unless absolute. SpeechT5: a
    speaker embedding (`speaker_embedding_dim` little-endian float32 values); empty: one voice,
    `default`, spoken with no speaker embedding (the pipeline's own zeros). hibari: the voice's ONNX
    model (at least one). Requests name a voice by its key."""
    default_voice: VoiceName | None = None
    """The voice of a request that names none (default: the first of `voices`)."""
    max_input_chars: Annotated[int, msgspec.Meta(ge=1, le=100_000)] | None = None
    """Characters of input one request may carry (a 400 beyond it, before the engine). None:
    SpeechT5, the smaller of OpenAI's 4096 and what the encoder reads (its `max_text_positions`
    less the end token: SpeechT5's tokenizer gives about one token per character); hibari, OpenAI's
    4096 (spoken sentence by sentence: about 5 minutes of audio)."""


@dataclass(frozen=True)
class TtsFacts:
    """What a text-to-speech model's files say: its family; SpeechT5's speaker-embedding length and
    the tokens its encoder reads, hibari's phonemes per call and accent."""

    speaker_embedding_dim: int
    text_positions: int
    """SpeechT5: text tokens per request. hibari: phonemes per model call (a sentence or less)."""
    family: Literal["speecht5", "hibari"] = "speecht5"
    british: bool = False
    """hibari: British pronunciations (config.json `accent` "en-GB")."""

    @property
    def streams(self) -> bool:
        """Whether the model speaks a text piece by piece (hibari: a sentence at a time), so its
        first audio can leave before the whole text is spoken, and its `speed` is honoured."""
        return self.family == "hibari"

    def describe(self) -> str:
        if self.family == "hibari":
            accent = "British" if self.british else "American"
            return f"hibari (ONNX on OpenVINO): {accent} English, {self.text_positions} phonemes per call, spoken sentence by sentence"
        return (
            f"SpeechT5: speaker embeddings of {self.speaker_embedding_dim} floats; "
            f"{self.text_positions} text tokens per request"
        )


def is_speecht5(model_dir: Path) -> bool:
    """Whether the folder holds a SpeechT5 export (`pipeline = "AUTO"` serves it as TEXT_TO_SPEECH)."""
    config = json_object(model_dir / "config.json")
    architectures = config.get("architectures") or []
    return config.get("model_type") == "speecht5" and (
        not architectures or any(str(name) == "SpeechT5ForTextToSpeech" for name in architectures)
    )


def is_hibari(model_dir: Path) -> bool:
    """Whether the folder holds hibari voices (`pipeline = "AUTO"` serves it as TEXT_TO_SPEECH)."""
    return json_object(model_dir / "config.json").get("model_type") == "hibari"


def read_tts_facts(model_dir: Path) -> TtsFacts:
    """The facts of the text-to-speech model in `model_dir`; SpeechT5's defaults where its files say nothing."""
    config = json_object(model_dir / "config.json")
    if config.get("model_type") == "hibari":
        return TtsFacts(0, HIBARI_PHONEMES, family="hibari", british=config.get("accent") == "en-GB")
    dim, positions = config.get("speaker_embedding_dim"), config.get("max_text_positions")
    return TtsFacts(
        speaker_embedding_dim=dim if isinstance(dim, int) and dim > 0 else _SPEECHT5_SPEAKER_DIM,
        text_positions=positions if isinstance(positions, int) and positions > 1 else _SPEECHT5_TEXT_POSITIONS,
    )
