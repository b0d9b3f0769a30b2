"""The voice-activity check before Whisper (issue 49, silence): frames cut as Silero VAD reads
them, runs of speech by its hysteresis, the decision on a fake model, stopping when cancelled; and
the real silero_vad_16k_sequence.onnx from the installed wheel on speech, silence and noise."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
import pytest

from appliance.engine.worker.voice_activity import (
    BLOCK_FRAMES,
    FRAME_SAMPLES,
    SileroSequence,
    SpeechRuns,
    VoiceActivity,
    frame_blocks,
    speech_runs,
)

SPEECH = Path(__file__).resolve().parents[1] / "data" / "capital-of-france.wav"


class LoudFrames:
    """A fake model: a frame's probability is 1 where its samples are loud (above 0.5), else 0;
    counts its calls and the frames it read."""

    def __init__(self) -> None:
        self.calls = self.frames = self.resets = 0

    def reset(self) -> None:
        self.resets += 1

    def __call__(self, frames: np.ndarray) -> np.ndarray:
        self.calls += 1
        self.frames += len(frames)
        return (np.abs(frames[:, 64:]).max(axis=1) > 0.5).astype(np.float32)


def _always() -> bool:
    return True


def test_frames_carry_the_previous_frames_last_64_samples() -> None:
    samples = np.arange(3 * FRAME_SAMPLES + 100, dtype=np.float32)
    blocks = list(frame_blocks(samples, block_frames=2))
    assert [block.shape for block in blocks] == [(2, 576), (2, 576)]
    frames = np.concatenate(blocks)
    assert not frames[0, :64].any()  # nothing before the first frame
    for index in range(1, 4):
        assert np.array_equal(frames[index, :64], frames[index - 1, -64:])  # across blocks too
    assert np.array_equal(frames[:, 64:].reshape(-1)[: len(samples)], samples)
    assert not frames[3, 64 + 100 :].any()  # the last frame padded with zeros
    assert list(frame_blocks(np.zeros(0, dtype=np.float32), 2)) == []


def test_runs_of_speech_follow_silero_hysteresis() -> None:
    p = np.array([0.1, 0.6, 0.9, 0.4, 0.4, 0.9, 0.2, 0.2, 0.2, 0.1, 0.7, 0.7], dtype=np.float32)
    # 0.4 is above 0.5 - 0.15: the run goes on; three frames under 0.35 close it at the first.
    assert speech_runs(p, 0.5, min_silence_frames=3) == [(1, 6), (10, 12)]
    assert speech_runs(p, 0.5, min_silence_frames=5) == [(1, 12)]
    assert speech_runs(p, 0.95, min_silence_frames=3) == []
    assert speech_runs(np.array([0.9, 0.9, 0.1], dtype=np.float32), 0.5, 3) == [(0, 2)]
    fed = SpeechRuns(0.5, min_silence_frames=3)
    for block in np.split(p, [2, 3, 7]):  # the same, block by block
        fed.feed(block)
    assert fed.runs() == [(1, 6), (10, 12)] and fed.longest() == 5


def test_speech_must_last_the_minimum() -> None:
    model = LoudFrames()
    check = VoiceActivity(model, threshold=0.5, min_speech_seconds=0.25)  # 8 frames
    quiet = np.zeros(16000 * 3, dtype=np.float32)
    assert check.holds_speech(quiet, _always) is False
    click = quiet.copy()
    click[16000 : 16000 + 4 * FRAME_SAMPLES] = 0.9  # 128 ms
    assert check.holds_speech(click, _always) is False
    word = quiet.copy()
    word[16000 : 16000 + 10 * FRAME_SAMPLES] = 0.9  # 320 ms
    assert check.holds_speech(word, _always) is True
    assert VoiceActivity(model, threshold=0.5, min_speech_seconds=0.1).holds_speech(click, _always) is True
    assert model.resets == 4  # each recording read from a fresh state


def test_reads_in_blocks_and_stops_when_told() -> None:
    model = LoudFrames()
    check = VoiceActivity(model, threshold=0.5, min_speech_seconds=0.25)
    long = np.zeros(FRAME_SAMPLES * (BLOCK_FRAMES * 3 + 1), dtype=np.float32)
    probabilities = check.probabilities(long, _always)
    assert probabilities is not None and len(probabilities) == BLOCK_FRAMES * 3 + 1
    assert model.calls == 4
    asked = []

    def twice() -> bool:
        asked.append(1)
        return len(asked) <= 2

    model.calls = 0
    assert check.holds_speech(long, twice) is None
    assert model.calls == 2 and len(asked) == 3
    model.calls = 0
    spoken = long.copy()
    spoken[FRAME_SAMPLES * (BLOCK_FRAMES - 4) : FRAME_SAMPLES * (BLOCK_FRAMES + 6)] = 0.9  # across two blocks
    assert check.holds_speech(spoken, _always) is True
    assert model.calls == 2  # no further block read once speech is found


@pytest.fixture(scope="module")
def silero() -> SileroSequence:
    from appliance.tools.demo import packaged
    from appliance.tools.demo.speech_recipes import SILERO_VAD

    return SileroSequence(packaged.locate("test", SILERO_VAD))


def _speech() -> np.ndarray:
    with wave.open(str(SPEECH)) as wav:
        return np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2").astype(np.float32) / 32768


def test_silero_hears_speech_not_silence_or_noise(silero: SileroSequence) -> None:
    check = VoiceActivity(silero, threshold=0.5, min_speech_seconds=0.25)
    second = np.zeros(16000, dtype=np.float32)
    padded = np.concatenate([second, _speech(), second])
    probabilities = check.probabilities(padded, _always)
    assert probabilities is not None
    spoken = np.flatnonzero(probabilities >= 0.5) * FRAME_SAMPLES / 16000
    assert 0.9 < spoken[0] < 1.3 and 2.5 < spoken[-1] < 3.2, spoken  # the clip is 1.0-2.9 s here
    assert check.holds_speech(padded, _always) is True
    noise = np.random.default_rng(0)
    for quiet in (
        np.zeros(16000 * 3, dtype=np.float32),
        noise.uniform(-0.5, 0.5, 16000 * 3).astype(np.float32),
        noise.normal(0, 0.05, 16000 * 3).astype(np.float32),
    ):
        assert check.holds_speech(quiet, _always) is False
        probabilities = check.probabilities(quiet, _always)
        assert probabilities is not None and probabilities.max() < 0.2


def test_another_onnx_file_is_refused(tmp_path: Path) -> None:
    from appliance.tools.demo import packaged
    from appliance.tools.demo.speech_recipes import SILERO_VAD

    streaming = packaged.locate("test", SILERO_VAD).with_name("silero_vad_openvino_16k.onnx")
    with pytest.raises(ValueError, match="not silero-vad's silero_vad_16k_sequence.onnx"):
        SileroSequence(streaming)


def test_a_live_stream_in_100_ms_calls_hears_what_one_call_hears(silero: SileroSequence) -> None:
    """The Realtime API's server VAD (`worker/live_voice.py`): the stream's state travels in each
    answer, so 3-frame calls give the probabilities of one call over the whole (within float noise)."""
    from appliance.engine.messages import DetectVoice
    from appliance.engine.worker.live_voice import STATE_BYTES, detect

    samples = np.concatenate([np.zeros(8000, dtype=np.float32), _speech()])
    samples = samples[: len(samples) // FRAME_SAMPLES * FRAME_SAMPLES]
    whole = VoiceActivity(silero, threshold=0.5, min_speech_seconds=0.25).probabilities(samples, _always)
    state, streamed = b"", []
    for start in range(0, len(samples), 3 * FRAME_SAMPLES):
        chunk = samples[start : start + 3 * FRAME_SAMPLES].astype("<f4").tobytes()
        answer = detect(silero, DetectVoice(request_id=1, samples=chunk, state=state))
        state = answer.state
        assert len(state) == STATE_BYTES
        streamed.append(np.frombuffer(answer.probabilities, dtype="<f4"))
    assert np.abs(np.concatenate(streamed) - whole).max() < 1e-3
    assert whole.max() > 0.9
