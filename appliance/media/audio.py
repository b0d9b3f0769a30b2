"""Audio bytes -> 16 kHz mono float32 samples, within limits (blocking, CPU-bound: call it in a thread).

Decoded with PyAV (`av`), whose wheels carry FFmpeg's demuxers and decoders: no system ffmpeg to
install or keep patched, and one library for every format OpenAI's API takes (wav, mp3, flac,
ogg/vorbis, ogg/opus, m4a/mp4 aac, webm/opus).

- Only the wav, mp3, flac, ogg, mov/mp4 and matroska/webm demuxers are consulted (FFmpeg's own
  `format_whitelist`): an upload that probes as a playlist (hls, dash, concat), an image or a video
  format is refused before its demuxer runs. The bytes are read from memory, never from a path or
  URL, and any file a demuxer asks to open beside them (a playlist entry, an mp4 data reference)
  is refused by our `io_open`, so no upload reaches the file system or the network.
- Only audio decoders from `CODECS` (and PCM's) are opened, while FFmpeg probes the streams too
  (`codec_whitelist`: a video track beside the audio is never decoded); channels and sample rate
  are read from the stream and checked before any sample is decoded.
- Sample rates no recording uses (under 8 kHz: a 164-byte wav at 1 Hz declares a minute) are
  refused before decoding.
- A duration the container declares beyond `max_seconds` is refused before decoding; decoding
  stops as soon as the samples pass `max_seconds` (a file declaring nothing, or lying, costs at
  most that much audio). The result is at most `max_seconds * 16000 * 4` bytes.
- What decoding costs grows with the source's samples times its channels, not with its seconds:
  a 377 KB FLAC at 384 kHz x 8 channels held a decoder for 140 s (issue 49). So an upload may
  decode at most `max_seconds` of 48 kHz stereo's worth (`AudioLimits.max_source_samples`,
  samples x channels): refused before decoding from the declared duration, and stopped while
  decoding when a file declares less than it holds.
- Samples that are not finite (a float wav holding NaN or infinity) are refused: NaN survives a
  clip to [-1, 1], and Whisper decoded such audio window after window without a token until the
  watchdog killed its engine.
- Channels are averaged (FFmpeg's own mono downmix adds them at -3 dB each, which lifts a
  centred voice by 3 dB and can pass 1.0) and the result is clipped to [-1, 1].
- Tags after an mp3's last frame (APEv2, with cover art as taggers write it; ID3v1; Lyrics3v2)
  are cut before FFmpeg reads the file: it counts them in the file's size, finds the size no
  longer matches the Xing/Info frame's, estimates the duration from the bit rate instead, and
  the file looked truncated.
- Truncation: FFmpeg decodes a truncated mp3, wav, ogg or webm without an error, so the decoded
  duration is compared with the one the file declares (a wav's data chunk, an mp3's Xing/Info
  frame count, a webm's Duration). A file that declares nothing (a plain CBR mp3 stream) cannot be
  told from a shorter recording.
- `stop` (a `threading.Event`, set when the client has left) is checked once a second of audio:
  an abandoned upload stops decoding there (`work_pool.Stopped`).
- FFmpeg raises many kinds of errors on damaged input (`av.error.FFmpegError` and its subclasses,
  and Python ones from PyAV): every one becomes a 400 naming the problem.

Cost (measured 2026-11-28 on this box's AMD EPYC, 2 cores shared with other work, one thread):
60 s of 44.1 kHz stereo mp3 (128 kbps, 960 KB) decodes to 16 kHz mono in 0.10-0.11 s while the box
is quiet (about 550x real time; 0.22-0.31 s at a load average of 4.7), of which FFmpeg's mp3
decoder takes 0.05 s and PyAV's resampler most of the rest; 60 s of 44.1 kHz stereo wav takes
0.08 s. `import av` takes about 0.1 s, so `appliance.media` does not import this module: its users
do.
"""

from __future__ import annotations

import io
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import av
import numpy as np

from appliance.errors import InvalidRequest, client_text
from appliance.media.work_pool import Stopped, WorkPool

__all__ = ["CODECS", "FORMATS", "SAMPLE_RATE", "AudioDecoder", "AudioLimits", "DecodedAudio", "decode_audio"]

SAMPLE_RATE = 16_000
"""What Whisper models take."""

FORMATS = ("wav", "mp3", "flac", "ogg", "mov", "matroska")
"""FFmpeg demuxers consulted (`mov` reads mp4 and m4a, `matroska` reads webm)."""

CODECS = frozenset({"mp3", "mp3float", "aac", "vorbis", "opus", "flac", "alac"})
"""Audio decoders allowed besides PCM (`pcm_*`, what a wav holds)."""

MIN_SAMPLES = SAMPLE_RATE // 10
"""0.1 s: WhisperPipeline refuses anything under 201 samples; this is the shortest clip worth a pass."""

LIMIT_SLACK = 0.1
"""Seconds allowed past `max_seconds`: codecs pad (AAC's priming adds 17 ms at 44.1 kHz, Opus's
pre-skip 6.5 ms, a webm's Duration rounds up), so a recording cut at the limit passes."""

ACCEPTED = "wav, mp3, flac, ogg (vorbis or opus), m4a/mp4 (aac) or webm (opus)"
_PCM_DECODERS = sorted(name for name in av.codecs_available if name.startswith("pcm_"))
# format_whitelist: the demuxers probed. codec_whitelist: the decoders FFmpeg may open while it
# probes the streams (it would otherwise decode a few frames of a webm's or mp4's video track).
_CONTAINER_OPTIONS = {
    "format_whitelist": ",".join(FORMATS),
    "codec_whitelist": ",".join(sorted(CODECS) + _PCM_DECODERS),
}
_UNBOUNDED_WAV_SIZES = (0, 0xFFFFFFFF)  # what streaming writers put in a wav header they cannot seek back to
_MP3_LENGTH_TAGS = (b"Xing", b"Info", b"VBRI")


COSTLIEST_USUAL_RATE = 48_000 * 2
"""Source samples x channels per second that a budget of `max_seconds` pays for: 48 kHz stereo."""


@dataclass(frozen=True)
class AudioLimits:
    """What one upload may decode to, and from."""

    max_seconds: float
    max_channels: int = 8
    min_sample_rate: int = 8_000
    max_sample_rate: int = 384_000

    @property
    def max_source_samples(self) -> float:
        """Source samples x channels one upload may decode: `max_seconds` of 48 kHz stereo."""
        return self.max_seconds * COSTLIEST_USUAL_RATE


@dataclass(frozen=True)
class DecodedAudio:
    """Mono float32 samples at `SAMPLE_RATE`, C-contiguous, in [-1, 1], and where they came from."""

    samples: np.ndarray
    seconds: float
    container: str
    codec: str
    source_rate: int
    channels: int


def _refuse(message: str, code: str = "invalid_audio") -> InvalidRequest:
    return InvalidRequest(message, param="file", code=code)


def _refuse_nested_open(url: str, flags: int, options: dict[str, str]) -> io.BytesIO:
    raise PermissionError("an uploaded audio file may not refer to other files")


def decode_audio(data: bytes, limits: AudioLimits, stop: threading.Event | None = None) -> DecodedAudio:
    """Decode the first audio stream of `data` to 16 kHz mono; InvalidRequest (param `file`) if it
    is not supported, intact audio within `limits` (see the module docstring for the codes);
    `Stopped` once `stop` is set."""
    if not data:
        raise _refuse("The audio file is empty.", code="empty_audio")
    try:
        container = _open(data)
        if container.format.name == "mp3" and len(untagged := _without_trailing_tags(data)) < len(data):
            container.close()
            data = untagged
            container = _open(data)
        with container:
            stream = _audio_stream(container)
            declared = _declared_seconds(container, stream, data)
            _check_stream(stream, declared, limits)
            samples = _decode(container, stream, declared, limits, stop or threading.Event())
            context = stream.codec_context
            container_name, codec, source_rate, channels = (
                container.format.name,
                context.name,
                context.sample_rate,
                context.channels,
            )
    except (InvalidRequest, Stopped):
        raise
    except Exception as exc:  # FFmpeg and PyAV raise many types on damaged input (see module doc)
        detail = exc.strerror if isinstance(exc, av.error.FFmpegError) and exc.strerror else str(exc)
        raise _refuse(
            "The file could not be decoded as audio (not audio, or a damaged or truncated file): "
            f"{type(exc).__name__}: {client_text(detail)}. Accepted: {ACCEPTED}."
        ) from None
    if len(samples) < MIN_SAMPLES:
        raise _refuse(
            f"The audio is {len(samples) / SAMPLE_RATE:.3f} s long; at least {MIN_SAMPLES / SAMPLE_RATE:.1f} s "
            "of sound is needed.",
            code="empty_audio",
        )
    return DecodedAudio(
        samples=samples,
        seconds=len(samples) / SAMPLE_RATE,
        container=container_name,
        codec=codec,
        source_rate=source_rate,
        channels=channels,
    )


def _open(data: bytes) -> av.container.InputContainer:
    return av.open(
        io.BytesIO(data),
        mode="r",
        container_options=_CONTAINER_OPTIONS,
        metadata_errors="ignore",
        io_open=_refuse_nested_open,
    )


def _decode(
    container: av.container.InputContainer,
    stream: av.audio.stream.AudioStream,
    declared: float | None,
    limits: AudioLimits,
    stop: threading.Event,
) -> np.ndarray:
    """All of the stream as mono 16 kHz float32 in [-1, 1], stopping past the limits; a file that
    fails or ends clearly before its declared duration is truncated_audio."""
    chunks: list[np.ndarray] = []
    total, most = 0, (limits.max_seconds + LIMIT_SLACK) * SAMPLE_RATE
    source = _SourceCount(limits.max_source_samples)
    try:
        for chunk in _mono_chunks(container, stream, source):
            if stop.is_set():
                raise Stopped
            if not np.isfinite(chunk).all():
                raise _refuse(
                    "The audio holds samples that are not numbers (NaN or infinity); send PCM or a compressed "
                    "recording.",
                    code="invalid_audio",
                )
            chunks.append(chunk)
            total += len(chunk)
            if total > most:
                raise _too_long(limits)
    except (InvalidRequest, Stopped):
        raise
    except Exception:
        if _clearly_short(total / SAMPLE_RATE, declared):  # FLAC, for one, fails on its cut last frame
            raise _truncated(total / SAMPLE_RATE, declared) from None
        raise
    if _clearly_short(total / SAMPLE_RATE, declared):
        raise _truncated(total / SAMPLE_RATE, declared)
    samples = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
    return np.clip(samples, -1.0, 1.0, out=samples)


def _audio_stream(container: av.container.InputContainer) -> av.audio.stream.AudioStream:
    if not container.streams.audio:
        kinds = sorted({stream.type for stream in container.streams}) or ["no streams"]
        raise _refuse(
            f"The file ({container.format.name}) has no audio stream (it holds: {', '.join(kinds)}). Accepted: {ACCEPTED}."
        )
    return container.streams.audio[0]


def _check_stream(stream: av.audio.stream.AudioStream, declared: float | None, limits: AudioLimits) -> None:
    context = stream.codec_context
    if not (context.name in CODECS or context.name.startswith("pcm_")):
        raise _refuse(f"The audio codec '{context.name}' is not supported. Accepted: {ACCEPTED}.")
    if not 0 < context.channels <= limits.max_channels:
        raise _refuse(
            f"The audio has {context.channels} channels; this server accepts 1 to {limits.max_channels}.",
            code="unsupported_audio",
        )
    if not limits.min_sample_rate <= context.sample_rate <= limits.max_sample_rate:
        raise _refuse(
            f"The audio's sample rate is {context.sample_rate} Hz; this server accepts {limits.min_sample_rate} "
            f"to {limits.max_sample_rate} Hz.",
            code="unsupported_audio",
        )
    if declared is not None and declared > limits.max_seconds + LIMIT_SLACK:
        raise _too_long(limits, declared)
    if declared is not None and declared * context.sample_rate * context.channels > limits.max_source_samples:
        raise _too_costly(limits.max_source_samples, context.sample_rate, context.channels)


@dataclass
class _SourceCount:
    """Source samples x channels decoded so far, against the upload's budget."""

    budget: float
    spent: int = 0

    def add(self, frame: av.AudioFrame) -> None:
        self.spent += frame.samples * len(frame.layout.channels)
        if self.spent > self.budget:
            raise _too_costly(self.budget, frame.sample_rate, len(frame.layout.channels))


def _mono_chunks(
    container: av.container.InputContainer, stream: av.audio.stream.AudioStream, source: _SourceCount
) -> Iterator[np.ndarray]:
    """Float32 mono 16 kHz arrays, about a second at a time; `source` counts what was decoded.

    Decoded frames (an mp3 frame is 26 ms) are gathered into a second before resampling: PyAV's
    resampler costs about as much per call as FFmpeg spends decoding the frame, so this halves
    the time. Samples are packed (interleaved): PyAV's planar `to_ndarray` stops at 8 planes.
    """
    resampler = av.AudioResampler(format="flt", rate=SAMPLE_RATE)
    pending = av.AudioFifo()
    for frame in container.decode(stream):
        source.add(frame)
        frame.pts = None  # resample by sample count: a damaged file's timestamps must not insert silence
        pending.write(frame)
        if pending.samples >= frame.sample_rate:
            yield from _resampled(resampler, pending.read())
    if pending.samples:
        yield from _resampled(resampler, pending.read())
    yield from _resampled(resampler, None)


def _resampled(resampler: av.AudioResampler, frame: av.AudioFrame | None) -> Iterator[np.ndarray]:
    for out in resampler.resample(frame):
        yield _mono(out)


def _mono(frame: av.AudioFrame) -> np.ndarray:
    interleaved = frame.to_ndarray().reshape(-1)
    channels = len(frame.layout.channels)
    if channels == 1:
        return interleaved.astype(np.float32, copy=True)
    return interleaved.reshape(-1, channels).mean(axis=1, dtype=np.float32)


def _declared_seconds(
    container: av.container.InputContainer, stream: av.audio.stream.AudioStream, data: bytes
) -> float | None:
    """The duration the file states, or None when it states none (an estimate is not a statement)."""
    name = container.format.name
    if name == "wav":
        return _wav_declared_seconds(data)
    if name == "mp3" and not _has_mp3_length_tag(data):
        return None  # FFmpeg estimates from the first frame's bit rate: a VBR file would look truncated
    if stream.duration is not None and stream.time_base is not None and stream.duration > 0:
        return float(stream.duration * stream.time_base)
    if container.duration is not None and container.duration > 0:
        return container.duration / av.time_base
    return None


def _wav_declared_seconds(data: bytes) -> float | None:
    """From the header's data chunk size and byte rate (FFmpeg clamps the size to what is there).

    A header declaring more data than the file holds is refused here, before decoding: it is
    truncated, and a lying size must not pass for a long recording.
    """
    position, byte_rate = 12, 0
    while position + 8 <= len(data):
        chunk_id, size = data[position : position + 4], struct.unpack_from("<I", data, position + 4)[0]
        if chunk_id == b"fmt " and position + 20 <= len(data):
            byte_rate = struct.unpack_from("<I", data, position + 16)[0]
        elif chunk_id == b"data":
            if size in _UNBOUNDED_WAV_SIZES or byte_rate == 0:
                return None
            declared, present = size / byte_rate, (len(data) - position - 8) / byte_rate
            if _clearly_short(present, declared):
                raise _truncated(present, declared)
            return declared
        position += 8 + size + (size & 1)
    return None


def _has_mp3_length_tag(data: bytes) -> bool:
    start = 0
    if data[:3] == b"ID3" and len(data) >= 10:  # the ID3v2 size: four 7-bit bytes
        size = data[6:10]
        start = 10 + (size[0] << 21 | size[1] << 14 | size[2] << 7 | size[3])
    head = data[start : start + 256]  # the tag sits in the first frame, after its side information
    return any(tag in head for tag in _MP3_LENGTH_TAGS)


def _clearly_short(decoded: float, declared: float | None) -> bool:
    return declared is not None and decoded < declared - (0.25 + 0.01 * declared)


def _truncated(decoded: float, declared: float | None) -> InvalidRequest:
    return _refuse(
        f"The audio file is truncated: it declares {declared:.2f} s but only {decoded:.2f} s could be decoded.",
        code="truncated_audio",
    )


def _too_costly(budget: float, rate: int, channels: int) -> InvalidRequest:
    seconds = budget / (rate * channels)
    return _refuse(
        f"The audio is {rate} Hz x {channels} channels: at that rate this server decodes at most {seconds:.0f} s "
        f"of it ({budget / COSTLIEST_USUAL_RATE:g} s of 48 kHz stereo). Send it at 48 kHz or less, in mono or "
        "stereo.",
        code="audio_too_long",
    )


def _without_trailing_tags(data: bytes) -> bytes:
    """`data` without the tags taggers append after an mp3's last frame: ID3v1 (`TAG`, 128 bytes),
    APEv2 (`APETAGEX` footer, with its header when it has one) and Lyrics3v2, in any order."""
    while True:
        if len(data) >= 128 and data[-128:-125] == b"TAG":
            data = data[:-128]
        elif len(data) >= 32 and data[-32:-24] == b"APETAGEX":
            size, _, flags = struct.unpack_from("<III", data, len(data) - 20)
            size += 32 if flags & 0x80000000 else 0  # the tag has a header too
            if size > len(data):
                return data
            data = data[: len(data) - size]
        elif len(data) >= 15 and data[-9:] == b"LYRICS200" and data[-15:-9].isdigit():
            size = int(data[-15:-9]) + 15
            if size > len(data):
                return data
            data = data[: len(data) - size]
        else:
            return data


def _too_long(limits: AudioLimits, declared: float | None = None) -> InvalidRequest:
    length = f"is {declared:.1f} s long" if declared is not None else "is longer than that"
    return _refuse(
        f"The audio {length}; this server accepts at most {limits.max_seconds:g} s per request.",
        code="audio_too_long",
    )


class AudioDecoder:
    """`decode_audio` for the event loop, on a pool of its own (`WorkPool`): at most `slots`
    (default: one per CPU) files decode at once, and a client that leaves stops its decode at the
    next second of audio (the thread is the pool's until then)."""

    def __init__(self, slots: int | None = None) -> None:
        self.pool = WorkPool("audio", slots)

    async def decode(self, data: bytes, limits: AudioLimits) -> DecodedAudio:
        """The decoded audio; InvalidRequest as `decode_audio`."""
        return await self.pool.run(_decode_stoppable, data, limits)


def _decode_stoppable(stop: threading.Event, data: bytes, limits: AudioLimits) -> DecodedAudio:
    return decode_audio(data, limits, stop)
