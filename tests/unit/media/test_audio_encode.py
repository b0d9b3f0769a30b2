"""Speech encoded in each of OpenAI's formats (`media.audio_encode`): wav and pcm exact, the
FFmpeg-encoded ones decoding back (by PyAV, as a client's player would) to the same duration."""

from __future__ import annotations

import io
import wave

import av
import numpy as np
import pytest

from appliance.media.audio_encode import MEDIA_TYPES, encode_speech

RATE = 16_000
TONE = (0.5 * np.sin(2 * np.pi * 440 * np.arange(2 * RATE) / RATE)).astype(np.float32)


def test_wav_is_16_bit_mono_at_the_models_rate() -> None:
    with wave.open(io.BytesIO(encode_speech(TONE, RATE, "wav"))) as reader:
        assert (reader.getnchannels(), reader.getsampwidth(), reader.getframerate()) == (1, 2, RATE)
        frames = np.frombuffer(reader.readframes(reader.getnframes()), dtype="<i2")
    assert np.array_equal(frames, (TONE * 32767).round().astype("<i2"))


def test_pcm_is_raw_little_endian_clipped() -> None:
    loud = np.array([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0], dtype=np.float32)
    pcm = np.frombuffer(encode_speech(loud, RATE, "pcm"), dtype="<i2")
    assert pcm.tolist() == [-32767, -32767, 0, 16384, 32767, 32767]


@pytest.mark.parametrize(
    ("response_format", "codec"), [("mp3", "mp3"), ("opus", "opus"), ("aac", "aac"), ("flac", "flac")]
)
def test_encoded_formats_decode_to_the_same_duration(response_format: str, codec: str) -> None:
    data = encode_speech(TONE, RATE, response_format)
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        assert stream.codec_context.name.startswith(codec) and stream.channels == 1
        decoded = np.concatenate([frame.to_ndarray().reshape(-1) for frame in container.decode(stream)])
        rate = stream.rate
    assert len(decoded) / rate == pytest.approx(2.0, abs=0.15)
    if decoded.dtype.kind == "i":  # flac decodes to 16-bit integers
        decoded = decoded / 32768.0
    assert 0.2 < float(np.abs(decoded).max()) < 0.8  # the tone, not silence or noise at full scale


def test_every_format_has_a_media_type() -> None:
    assert set(MEDIA_TYPES) == {"mp3", "opus", "aac", "flac", "wav", "pcm"}
