"""Text-to-speech demos: demo-tts (a tiny random SpeechT5 with its voices) and demo-voice (hibari's
"heart" voice, a real one).
"""

from __future__ import annotations

from .packaged_specs import PackagedFileSpec, PackagedVoiceSpec
from .random_specs import SpeechT5Spec
from .recipe_types import UNSCHEDULED, DemoRecipe, GraphSpec, ModelRef

# No packaged SpeechT5 was found on the package registry: the text-to-speech demo is random.
TINY_SPEECHT5 = SpeechT5Spec()
# hibari's American English voice "heart" (Apache-2.0, distilled from Kokoro-82M's af_heart) as the
# hibari-tts wheel ships it: int8 ONNX, 7.9 MB.
HIBARI_HEART = PackagedVoiceSpec(
    voice=PackagedFileSpec(
        distribution="hibari-tts",
        version="0.2.1",
        package="hibari",
        file="assets/hibari.onnx",
        sha256="5f70741d4e900f4e85d0037498736cc1b3e1b9a63a13546a5da1e63abf4fccd8",
    )
)


DEMO_TTS = DemoRecipe(
    name="demo-tts",
    model=TINY_SPEECHT5,
    graph=GraphSpec(
        description=(
            "a tiny random-weight SpeechT5 with a random HiFi-GAN vocoder, for text to speech; "
            "built offline by `appliance demo` (it says noise, not words)."
        ),
        pipeline="TEXT_TO_SPEECH",
        **UNSCHEDULED,
        tts={"default_voice": TINY_SPEECHT5.voices[0]},
        voices={voice: ModelRef("demo-tts", f"voices/{voice}.bin") for voice in TINY_SPEECHT5.voices},
    ),
)


DEMO_VOICE = DemoRecipe(
    name="demo-voice",
    model=HIBARI_HEART,
    graph=GraphSpec(
        description=(
            "hibari's American English voice (Apache-2.0, distilled from Kokoro-82M's af_heart; the "
            f"{HIBARI_HEART.voice.distribution} wheel's ONNX model read by OpenVINO, the package's "
            "text front end and vocoder), for text to speech: a real voice."
        ),
        pipeline="TEXT_TO_SPEECH",
        **UNSCHEDULED,
        tts={"default_voice": "heart"},
        voices={"heart": ModelRef("demo-voice", HIBARI_HEART.file)},
    ),
)


__all__ = ["DEMO_TTS", "DEMO_VOICE", "HIBARI_HEART", "TINY_SPEECHT5"]
