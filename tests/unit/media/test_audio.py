"""appliance.media.audio: every accepted format, the limits and each refusal's code.

Fixtures are tones synthesised with numpy and encoded with PyAV itself (no system tools).
"""

from __future__ import annotations

import asyncio
import io
import struct
import threading
import time

import av
import numpy as np
import pytest
from PIL import Image

from appliance.errors import InvalidRequest
from appliance.media import audio
from appliance.media.audio import SAMPLE_RATE, AudioDecoder, AudioLimits, decode_audio
from tests.audio_files import ape_tag, float_wav, undeclared_flac

LIMITS = AudioLimits(max_seconds=60)
_LAYOUTS = {1: "mono", 2: "stereo", 3: "2.1", 8: "7.1", 10: "5.1.4"}


def tone(seconds: float, rate: int, channels: int = 1, amplitudes: tuple[float, ...] | None = None) -> np.ndarray:
    """(channels, samples) float32: a 440 Hz sine per channel."""
    t = np.arange(int(round(seconds * rate))) / rate
    sine = np.sin(2 * np.pi * 440 * t).astype(np.float32)
    amplitudes = amplitudes or (0.3,) * channels
    return np.stack([amplitude * sine for amplitude in amplitudes])


def encode(
    container_format: str,
    codec: str,
    seconds: float,
    rate: int = 44_100,
    channels: int = 1,
    *,
    amplitudes: tuple[float, ...] | None = None,
    container_options: dict[str, str] | None = None,
) -> bytes:
    """`seconds` of tone encoded with PyAV."""
    samples = tone(seconds, rate, channels, amplitudes)
    layout = _LAYOUTS[channels]
    buffer = io.BytesIO()
    with av.open(buffer, "w", format=container_format, container_options=container_options or {}) as out:
        stream = out.add_stream(codec, rate=rate, layout=layout)
        if codec == "vorbis":
            stream.codec_context.options = {"strict": "experimental"}  # FFmpeg's own vorbis encoder
        step, pts = 1024, 0
        for start in range(0, samples.shape[1], step):
            chunk = samples[:, start : start + step]
            # Packed (interleaved) samples: PyAV's planar from_ndarray stops at 8 planes.
            frame = av.AudioFrame.from_ndarray(
                np.ascontiguousarray(chunk.T).reshape(1, -1), format="flt", layout=layout
            )
            frame.sample_rate, frame.pts = rate, pts
            pts += chunk.shape[1]
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buffer.getvalue()


def refusal(data: bytes, limits: AudioLimits = LIMITS) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        decode_audio(data, limits)
    assert caught.value.param == "file"
    assert caught.value.status == 400
    return caught.value


FORMATS = [
    # (container, codec, rate, channels, name FFmpeg gives the container, decoder)
    ("wav", "pcm_s16le", 44_100, 1, "wav", "pcm_s16le"),
    ("wav", "pcm_f32le", 8_000, 1, "wav", "pcm_f32le"),
    ("mp3", "libmp3lame", 44_100, 1, "mp3", "mp3float"),
    ("flac", "flac", 48_000, 1, "flac", "flac"),
    ("ogg", "vorbis", 44_100, 2, "ogg", "vorbis"),  # FFmpeg's vorbis encoder writes stereo only
    ("ogg", "libopus", 48_000, 1, "ogg", "opus"),
    ("ipod", "aac", 44_100, 1, "mov,mp4,m4a,3gp,3g2,mj2", "aac"),
    ("mp4", "aac", 22_050, 2, "mov,mp4,m4a,3gp,3g2,mj2", "aac"),
    ("webm", "libopus", 48_000, 2, "matroska,webm", "opus"),
]


@pytest.mark.parametrize(("container_format", "codec", "rate", "channels", "container", "decoder"), FORMATS)
def test_each_format_decodes_to_its_duration_at_16_khz(container_format, codec, rate, channels, container, decoder):
    data = encode(container_format, codec, 2.5, rate, channels)
    decoded = decode_audio(data, LIMITS)
    assert (decoded.container, decoded.codec, decoded.source_rate, decoded.channels) == (
        container,
        decoder,
        rate,
        channels,
    )
    assert decoded.seconds == pytest.approx(2.5, abs=0.05)
    assert decoded.seconds == len(decoded.samples) / SAMPLE_RATE
    samples = decoded.samples
    assert samples.dtype == np.float32 and samples.ndim == 1 and samples.flags.c_contiguous
    assert np.abs(samples).max() <= 1.0
    # The tone survives: its loudness (0.3 peak -> 0.21 RMS) and its pitch.
    middle = samples[SAMPLE_RATE // 2 : 2 * SAMPLE_RATE]
    assert np.sqrt(np.mean(middle**2)) == pytest.approx(0.3 / np.sqrt(2), rel=0.1)
    spectrum = np.abs(np.fft.rfft(middle))
    assert np.argmax(spectrum) * SAMPLE_RATE / len(middle) == pytest.approx(440, abs=2)


def test_stereo_44k_becomes_the_average_of_its_channels_at_16k():
    data = encode("wav", "pcm_s16le", 1.0, 44_100, 2, amplitudes=(0.8, 0.0))
    decoded = decode_audio(data, LIMITS)
    assert (decoded.channels, decoded.source_rate) == (2, 44_100)
    assert len(decoded.samples) == SAMPLE_RATE
    # Averaged: 0.4 peak (FFmpeg's own downmix would give 0.8 * 0.707 = 0.57).
    assert np.abs(decoded.samples[1000:-1000]).max() == pytest.approx(0.4, abs=0.01)


def test_loud_channels_in_phase_stay_within_one():
    data = encode("wav", "pcm_f32le", 1.0, 16_000, 2, amplitudes=(1.0, 1.0))
    samples = decode_audio(data, LIMITS).samples
    assert np.abs(samples).max() <= 1.0
    assert np.abs(samples).max() == pytest.approx(1.0, abs=0.01)


def test_eight_channels_are_accepted_and_averaged():
    decoded = decode_audio(encode("wav", "pcm_s16le", 0.5, 22_050, 8), LIMITS)
    assert decoded.channels == 8
    assert np.abs(decoded.samples[500:-500]).max() == pytest.approx(0.3, abs=0.01)


def _png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buffer, format="PNG")
    return buffer.getvalue()


def _video_only_mp4() -> bytes:
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as out:
        stream = out.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = 32, 32, "yuv420p"
        for index in range(5):
            frame = av.VideoFrame.from_ndarray(np.full((32, 32, 3), index * 40, np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(np.random.default_rng(1).bytes(20_000), id="garbage"),
        pytest.param(_png(), id="png"),
        pytest.param(b"hello, this is a text file\n" * 100, id="text"),
        pytest.param(b"#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nfile:///etc/passwd\n#EXT-X-ENDLIST\n", id="hls"),
        pytest.param(b"ffconcat version 1.0\nfile /etc/passwd\n", id="concat"),
        pytest.param(_video_only_mp4(), id="video-only"),
    ],
)
def test_what_is_not_audio_is_invalid_audio(data):
    error = refusal(data)
    assert error.code == "invalid_audio"
    assert "wav, mp3" in error.message  # says what is accepted


def _video_and_audio_mp4() -> bytes:
    buffer = io.BytesIO()
    samples = tone(1.0, 44_100)
    with av.open(buffer, "w", format="mp4") as out:
        video = out.add_stream("mpeg4", rate=10)
        video.width, video.height, video.pix_fmt = 32, 32, "yuv420p"
        sound = out.add_stream("aac", rate=44_100, layout="mono")
        for _ in range(10):
            for packet in video.encode(av.VideoFrame.from_ndarray(np.zeros((32, 32, 3), np.uint8), format="rgb24")):
                out.mux(packet)
        for start in range(0, samples.shape[1], 1024):
            frame = av.AudioFrame.from_ndarray(samples[:, start : start + 1024], format="fltp", layout="mono")
            frame.sample_rate, frame.pts = 44_100, start
            for packet in sound.encode(frame):
                out.mux(packet)
        for stream in (video, sound):
            for packet in stream.encode(None):
                out.mux(packet)
    return buffer.getvalue()


def test_the_audio_of_a_video_is_decoded_without_its_video():
    av.logging.set_level(av.logging.ERROR)  # FFmpeg's refusal is an error in its log, else unseen
    try:
        with av.logging.Capture() as logs:
            decoded = decode_audio(_video_and_audio_mp4(), LIMITS)
    finally:
        av.logging.set_level(None)
    assert (decoded.codec, decoded.seconds) == ("aac", pytest.approx(1.0, abs=0.05))
    assert any(message.startswith("Codec (mpeg4) not on whitelist") for _, _, message in logs)


def test_a_video_only_file_is_named_as_such():
    assert "no audio stream" in refusal(_video_only_mp4()).message


def test_empty_body_and_tiny_clip_are_empty_audio():
    assert refusal(b"").code == "empty_audio"
    assert refusal(encode("wav", "pcm_s16le", 0.05, 16_000)).code == "empty_audio"
    assert decode_audio(encode("wav", "pcm_s16le", 0.12, 16_000), LIMITS).seconds == pytest.approx(0.12)


@pytest.mark.parametrize(
    ("container_format", "codec"), [("wav", "pcm_s16le"), ("mp3", "libmp3lame"), ("webm", "libopus")]
)
def test_a_truncated_file_is_truncated_audio(container_format, codec):
    whole = encode(container_format, codec, 4.0, 48_000)
    assert decode_audio(whole, LIMITS).seconds == pytest.approx(4.0, abs=0.05)
    error = refusal(whole[: len(whole) // 2])
    assert error.code == "truncated_audio"
    assert "declares 4.0" in error.message


def test_a_truncated_flac_or_m4a_is_refused():
    flac = encode("flac", "flac", 4.0, 44_100)
    assert refusal(flac[: len(flac) // 2]).code == "truncated_audio"
    m4a = encode("ipod", "aac", 4.0, 44_100)  # its index is at the end: nothing to decode
    assert refusal(m4a[: len(m4a) // 2]).code == "invalid_audio"


def test_a_declared_duration_over_the_limit_is_refused_before_decoding(monkeypatch):
    data = encode("wav", "pcm_s16le", 5.0, 16_000)
    monkeypatch.setattr(audio, "_mono_chunks", lambda *args: pytest.fail("decoded a file declared too long"))
    error = refusal(data, AudioLimits(max_seconds=3))
    assert error.code == "audio_too_long"
    assert "5.0 s" in error.message and "3 s" in error.message


def _streamed_wav(data: bytes) -> bytes:
    """The sizes a writer that cannot seek leaves in the header: 'as long as it goes'."""
    patched = bytearray(data)
    struct.pack_into("<I", patched, 4, 0xFFFFFFFF)
    position = patched.index(b"data")
    struct.pack_into("<I", patched, position + 4, 0xFFFFFFFF)
    return bytes(patched)


def test_undeclared_audio_over_the_limit_stops_decoding_at_the_limit(monkeypatch):
    data = _streamed_wav(encode("wav", "pcm_s16le", 8.0, 16_000))
    assert decode_audio(data, LIMITS).seconds == pytest.approx(8.0)
    decoded_seconds: list[float] = []
    chunks = audio._mono_chunks

    def counted(*args):
        for chunk in chunks(*args):
            decoded_seconds.append(len(chunk) / SAMPLE_RATE)
            yield chunk

    monkeypatch.setattr(audio, "_mono_chunks", counted)
    assert refusal(data, AudioLimits(max_seconds=3)).code == "audio_too_long"
    assert 3 < sum(decoded_seconds) <= 4.5


def test_an_mp3_without_a_length_tag_over_the_limit_is_too_long():
    data = encode("mp3", "libmp3lame", 6.0, 44_100, container_options={"write_xing": "0"})
    assert not audio._has_mp3_length_tag(data)
    assert decode_audio(data, LIMITS).seconds == pytest.approx(6.0, abs=0.05)
    assert refusal(data, AudioLimits(max_seconds=3)).code == "audio_too_long"


@pytest.mark.parametrize(
    ("container_format", "codec", "rate"),
    [("flac", "flac", 16_000), ("ipod", "aac", 44_100), ("ogg", "libopus", 48_000), ("webm", "libopus", 48_000)],
)
def test_a_file_at_the_limit_is_accepted(container_format, codec, rate):
    data = encode(container_format, codec, 3.0, rate)
    assert decode_audio(data, AudioLimits(max_seconds=3)).seconds == pytest.approx(3.0, abs=0.05)


def test_a_wav_declaring_more_than_it_holds_is_truncated_before_decoding(monkeypatch):
    whole = encode("wav", "pcm_s16le", 4.0, 16_000)
    monkeypatch.setattr(audio, "_mono_chunks", lambda *args: pytest.fail("decoded a truncated wav"))
    error = refusal(whole[:20_000], AudioLimits(max_seconds=1))  # declares 4 s: truncation, not length
    assert error.code == "truncated_audio"
    assert "declares 4.00 s but only 0.62 s" in error.message


def test_too_many_channels_or_too_high_a_rate_is_unsupported_audio(monkeypatch):
    monkeypatch.setattr(audio, "_mono_chunks", lambda *args: pytest.fail("decoded an unsupported stream"))
    error = refusal(encode("wav", "pcm_s16le", 0.5, 16_000, 10))
    assert error.code == "unsupported_audio" and "10 channels" in error.message
    error = refusal(encode("wav", "pcm_s16le", 0.5, 96_000), AudioLimits(max_seconds=60, max_sample_rate=48_000))
    assert error.code == "unsupported_audio" and "96000 Hz" in error.message


def test_the_decoder_runs_at_most_its_slots_at_once(monkeypatch):
    running, most = 0, 0
    lock = threading.Lock()

    def slow_decode(data, limits, stop=None):
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return data

    monkeypatch.setattr(audio, "decode_audio", slow_decode)

    async def main():
        decoder = AudioDecoder(slots=2)
        return await asyncio.gather(*(decoder.decode(bytes([index]), LIMITS) for index in range(6)))

    assert asyncio.run(main()) == [bytes([index]) for index in range(6)]
    assert most == 2


def test_the_decoder_decodes_real_audio():
    data = encode("mp3", "libmp3lame", 1.0, 44_100)
    decoded = asyncio.run(AudioDecoder().decode(data, LIMITS))
    assert decoded.seconds == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize(("container_format", "codec", "rate", "channels"), [row[:4] for row in FORMATS])
def test_damaged_files_are_refused_or_decoded_never_an_error(container_format, codec, rate, channels):
    """Flipped bytes, cut files and overwritten stretches: a 400 with an audio code, or audio."""
    whole = encode(container_format, codec, 1.0, rate, channels)
    rng = np.random.default_rng(len(whole))
    for attempt in range(12):
        damaged = bytearray(whole)
        if attempt % 3 == 0:
            for position in rng.integers(0, len(damaged), 10):
                damaged[position] = int(rng.integers(0, 256))
        elif attempt % 3 == 1:
            damaged = damaged[: int(rng.integers(0, len(damaged)))]
        else:
            start = int(rng.integers(0, len(damaged)))
            damaged[start : start + 300] = rng.bytes(int(rng.integers(0, 300)))
        try:
            decoded = decode_audio(bytes(damaged), LIMITS)
        except InvalidRequest as error:
            assert error.code in {"invalid_audio", "truncated_audio", "empty_audio"}, error.message
        else:
            assert decoded.samples.dtype == np.float32 and np.abs(decoded.samples).max() <= 1.0


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_samples_that_are_not_numbers_are_refused(bad):
    samples = np.zeros(32_000, np.float32)
    samples[20_000] = bad  # one sample past the first second's chunk
    assert "not numbers" in refusal(float_wav(samples, 16_000)).message


@pytest.mark.parametrize("rate", [1, 10, 100, 4_000, 7_999])
def test_rates_no_recording_uses_are_refused_before_decoding(rate):
    # 60 declared seconds at 1 Hz is a 164-byte file.
    caught = refusal(float_wav(np.full(60 * rate, np.nan), rate))
    assert caught.code == "unsupported_audio" and f"{rate} Hz" in caught.message


def test_eight_kilohertz_is_accepted():
    assert decode_audio(float_wav(np.zeros(16_000), 8_000), LIMITS).seconds == pytest.approx(2.0)


def test_decoding_is_bounded_by_samples_times_channels_not_by_seconds():
    limits = AudioLimits(max_seconds=60)  # 60 s of 48 kHz stereo: 5.76 M samples x channels
    data = undeclared_flac(384_000, 8, 20)  # 20 s declared as unknown: 61 M samples x channels
    assert len(data) < 200_000
    started = time.monotonic()
    caught = refusal(data, limits)
    took = time.monotonic() - started
    assert caught.code == "audio_too_long" and "384000 Hz x 8 channels" in caught.message
    # Stopped after its budget (1.9 s of this file), not after all 20 s of it.
    control = decode_audio(encode("flac", "flac", 60, 48_000, 2), limits)
    assert control.seconds == pytest.approx(60, abs=0.1)
    print(f"384 kHz x 8 refused after {took:.2f} s")


def test_a_declared_costly_file_is_refused_before_decoding():
    data = encode("flac", "flac", 3, 384_000, 8)  # declares 3 s: 9.2 M samples x channels
    caught = refusal(data, AudioLimits(max_seconds=60))
    assert caught.code == "audio_too_long" and "at most 2 s" in caught.message


@pytest.mark.parametrize("tail", ["ape", "ape+id3v1", "id3v1+ape", "lyrics3+id3v1"])
def test_tags_after_the_last_mp3_frame_are_not_audio(tail):
    mp3 = encode("mp3", "libmp3lame", 10.0, 44_100, 2)
    assert b"Info" in mp3[:400] or b"Xing" in mp3[:400]  # FFmpeg's muxer writes the length tag
    cover = b"cover.jpg\0" + np.random.default_rng(0).bytes(300_000)
    ape = ape_tag([(b"Title", b"Song", 0), (b"Cover Art (Front)", cover, 2)])
    id3v1 = b"TAG" + bytes(125)
    lyrics = b"LYRICSBEGIN" + b"IND00003110" + b"000022LYRICS200"
    tails = {"ape": ape, "ape+id3v1": ape + id3v1, "id3v1+ape": id3v1 + ape, "lyrics3+id3v1": lyrics + id3v1}
    decoded = decode_audio(mp3 + tails[tail], LIMITS)
    assert decoded.seconds == pytest.approx(10.0, abs=0.05)


def test_an_abandoned_decode_stops_and_holds_its_slot_until_then():
    data = encode("flac", "flac", 60, 48_000, 2)
    started = time.monotonic()
    decode_audio(data, LIMITS)
    control = time.monotonic() - started  # the whole file, decoded

    async def main():
        decoder = AudioDecoder(slots=1)
        first = asyncio.ensure_future(decoder.decode(data, LIMITS))
        await asyncio.sleep(0.02)
        assert decoder.pool.running == 1
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert decoder.pool.running == 1  # the thread is still the pool's: the slot is held
        started = time.monotonic()
        second = await decoder.decode(encode("wav", "pcm_s16le", 1.0, 16_000), LIMITS)
        return time.monotonic() - started, second, decoder.pool.running

    waited, second, running = asyncio.run(main())
    assert second.seconds == pytest.approx(1.0) and running == 0
    # The abandoned decode stopped at its next second of audio, not after all 60.
    print(f"waited {waited:.3f} s behind an abandoned decode; the whole decode takes {control:.3f} s")
    assert waited < control / 2, (waited, control)


def test_stop_set_before_decoding_stops_it():
    stop = threading.Event()
    stop.set()
    with pytest.raises(audio.Stopped):
        decode_audio(encode("wav", "pcm_s16le", 2.0, 16_000), LIMITS, stop)
