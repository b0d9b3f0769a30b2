"""Speech sent as it is spoken (issue 52): each engine task declared once, the audio file written
piece by piece (`SpeechEncoder`: the pieces joined are one valid file in every format), and a
hibari text cut into pieces its model reads in one call."""

from __future__ import annotations

import io
import typing
import wave

import av
import msgspec
import numpy as np
import pytest

from appliance.engine import messages
from appliance.engine.messages import TASKS, SpeechAudio, Synthesize
from appliance.graphfiles import Task
from appliance.graphfiles.tts import HIBARI_PHONEMES
from appliance.media.audio_encode import SpeechEncoder, encode_speech


def test_every_task_is_declared_once_and_the_pipe_reads_the_declarations() -> None:
    assert set(TASKS) == set(typing.get_args(Task))
    for task in TASKS.values():
        for command in task.commands:
            assert "request_id" in command.__struct_fields__
            assert command in typing.get_args(messages.ToEngine)
        for event in (*task.answers, *task.progress):
            assert event in typing.get_args(messages.EngineEvent)
    # A command of any task crosses the pipe, and a Cancel can overtake it in the inbox.
    command = Synthesize(request_id=7, text="Hi.", voice="heart", speed=1.5, stream=True)
    assert messages.decode_to_engine(messages.encoder.encode(command)) == command
    assert isinstance(command, messages.COMMANDS)
    piece = SpeechAudio(request_id=7, samples=b"\0\0\0\0", sample_rate=24_000, last=False)
    assert messages.decode_from_engine(messages.encoder.encode(messages.Batch(events=[piece]))).events == [piece]


def _tone(seconds: float, rate: int = 24_000) -> np.ndarray:
    return (0.3 * np.sin(np.arange(int(seconds * rate)) * 0.05)).astype(np.float32)


def _decoded_samples(data: bytes) -> tuple[int, int]:
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        return sum(frame.samples for frame in container.decode(stream)), stream.rate


@pytest.mark.parametrize("response_format", ["wav", "mp3", "opus", "aac", "flac"])
def test_pieces_joined_are_one_file(response_format: str) -> None:
    encoder = SpeechEncoder(24_000, response_format)
    pieces = [
        encoder.add(_tone(0.5), last=False),
        encoder.add(_tone(0.7), last=False),
        encoder.add(_tone(0.3), last=True),
    ]
    assert all(pieces[:1])  # the first piece's audio leaves with it, not at the end
    samples, rate = _decoded_samples(b"".join(pieces))
    expected = 1.5 * rate
    # Codecs pad to whole frames (mp3: 1152 samples, aac: 1024, plus their priming).
    assert expected <= samples <= expected + 3 * 2048, (response_format, samples, expected)


def test_a_wav_in_one_piece_has_its_sizes_and_one_in_several_streams() -> None:
    whole = encode_speech(_tone(1.0), 24_000, "wav")
    with wave.open(io.BytesIO(whole)) as reader:
        assert (reader.getnframes(), reader.getframerate(), reader.getsampwidth()) == (24_000, 24_000, 2)
    encoder = SpeechEncoder(24_000, "wav")
    streamed = encoder.add(_tone(1.0), last=False) + encoder.add(_tone(1.0), last=True)
    assert streamed[4:8] == b"\xff\xff\xff\xff" and streamed[40:44] == b"\xff\xff\xff\xff"
    assert streamed[44:] == whole[44:] * 2
    assert _decoded_samples(streamed) == (48_000, 24_000)


def test_pcm_pieces_are_the_samples() -> None:
    encoder = SpeechEncoder(24_000, "pcm")
    assert (
        len(encoder.add(_tone(0.25), last=False) + encoder.add(_tone(0.25), last=True)) == 2 * 6_000 * 2
    )  # 16-bit samples


def test_a_long_run_of_phonemes_is_cut_at_word_breaks() -> None:
    hibari_voice = pytest.importorskip("appliance.engine.worker.hibari_voice")
    words = ["wˈɜɹd"] * 300 + ["x" * (HIBARI_PHONEMES * 2 + 5)] + ["ˈænd"] * 10
    pieces = list(hibari_voice._bounded(" ".join(words)))
    assert all(0 < len(piece) <= HIBARI_PHONEMES for piece in pieces)
    assert "".join(pieces).replace(" ", "") == "".join(words)
    assert list(hibari_voice._bounded("həlˈO.")) == ["həlˈO."]


def test_the_done_event_is_openais_shape() -> None:
    from appliance.protocol.speech import SpeechAudioDeltaEvent, SpeechAudioDoneEvent, SpeechUsage

    done = SpeechAudioDoneEvent(usage=SpeechUsage(input_tokens=14, output_tokens=101, total_tokens=115))
    assert msgspec.json.decode(msgspec.json.encode(done)) == {
        "type": "speech.audio.done",
        "usage": {"input_tokens": 14, "output_tokens": 101, "total_tokens": 115},
    }
    assert msgspec.json.decode(msgspec.json.encode(SpeechAudioDeltaEvent(audio="AAA="))) == {
        "type": "speech.audio.delta",
        "audio": "AAA=",
    }
