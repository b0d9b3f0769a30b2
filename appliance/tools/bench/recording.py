"""The speech bench's workload: one recording of about `--audio-seconds`, the same bytes for every
request, and how well a system heard the sentence it is made of.

The recording is a clip (`--audio FILE` in any format the server decodes, or the packaged
`data/capital-of-france.wav`: espeak-ng saying "The capital of France is Paris.", 2.1 s) repeated
with `GAP_SECONDS` of silence between the repeats, as many times as brings it nearest the seconds
asked (at least once: a clip longer than that is sent whole). Every system gets the same 16 kHz mono samples: the server
as a 16-bit PCM wav in a multipart form (so its decoding is part of what is measured), the
in-process systems as the float samples the server would have decoded.
"""

from __future__ import annotations

import io
import re
import uuid
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "DEFAULT_CLIP",
    "GAP_SECONDS",
    "Recording",
    "SAID",
    "SAMPLE_RATE",
    "build_recording",
    "load_clip",
    "multipart_form",
    "wav_bytes",
    "word_error_rate",
    "words",
]

SAMPLE_RATE = 16_000
GAP_SECONDS = 0.5
DEFAULT_CLIP = Path(__file__).resolve().parent / "data" / "capital-of-france.wav"
SAID = "The capital of France is Paris."
"""What DEFAULT_CLIP says (espeak-ng -v en-us -s 160; tests/data holds the same file)."""
_MAX_CLIP_SECONDS = 4 * 3600


@dataclass(frozen=True)
class Recording:
    """What each request carries: the samples (16 kHz mono float32), the same as a wav file, and
    how they were made."""

    samples: np.ndarray
    wav: bytes
    clip_seconds: float
    repeats: int

    @property
    def seconds(self) -> float:
        return len(self.samples) / SAMPLE_RATE


def load_clip(path: Path) -> np.ndarray:
    """A file's first audio stream as 16 kHz mono float32 (decoded as the server decodes uploads);
    ValueError naming the file if it is not audio the server would take."""
    from appliance.errors import InvalidRequest
    from appliance.media.audio import AudioLimits, decode_audio

    try:
        return decode_audio(path.read_bytes(), AudioLimits(max_seconds=_MAX_CLIP_SECONDS)).samples
    except OSError as exc:
        raise ValueError(f"--audio {path}: {exc.strerror or exc}") from None
    except InvalidRequest as exc:
        raise ValueError(f"--audio {path}: {exc}") from None


def build_recording(clip: np.ndarray, seconds: float) -> Recording:
    """`clip` repeated with GAP_SECONDS of silence between repeats, the number of repeats that comes
    nearest `seconds` (at least one)."""
    if len(clip) == 0:
        raise ValueError("the clip holds no audio")
    gap = np.zeros(round(GAP_SECONDS * SAMPLE_RATE), dtype=np.float32)
    step = len(clip) + len(gap)
    repeats = max(1, round((seconds * SAMPLE_RATE - len(clip)) / step) + 1)
    parts = [clip.astype(np.float32, copy=False)]
    for _ in range(repeats - 1):
        parts += [gap, parts[0]]
    # Round through 16-bit PCM, so the in-process systems get exactly what the server decodes.
    pcm = _pcm16(np.concatenate(parts))
    samples = pcm.astype(np.float32) / 32768
    return Recording(samples=samples, wav=wav_bytes(pcm), clip_seconds=len(clip) / SAMPLE_RATE, repeats=repeats)


def _pcm16(samples: np.ndarray) -> np.ndarray:
    return np.clip(np.round(samples * 32768), -32768, 32767).astype("<i2")


def wav_bytes(pcm: np.ndarray) -> bytes:
    """16-bit PCM samples at 16 kHz as a mono wav file."""
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(SAMPLE_RATE)
        wav.writeframes(pcm.tobytes())
    return out.getvalue()


def multipart_form(fields: dict[str, str], file: bytes, filename: str = "recording.wav") -> tuple[bytes, str]:
    """(body, content type) of a multipart/form-data request: `fields`, then the wav as `file`."""
    boundary = f"bench-{uuid.uuid4().hex}"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        "Content-Type: audio/wav\r\n\r\n".encode()
        + file
        + b"\r\n"
    )
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9' ]", " ", text.lower()).split()


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Word-level edit distance over the reference's length (case and punctuation ignored)."""
    ref, hyp = words(reference), words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, ref_word in enumerate(ref, 1):
        diagonal, row[0] = row[0], i
        for j, hyp_word in enumerate(hyp, 1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (ref_word != hyp_word))
    return row[-1] / max(1, len(ref))
