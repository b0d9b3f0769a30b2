"""Hostile and unusual audio files made in the tests (no files shipped): a float wav holding any
samples (NaN included), a FLAC that declares no length, an APEv2 tag as taggers append it."""

from __future__ import annotations

import io
import struct

import av
import numpy as np

__all__ = ["ape_tag", "float_wav", "undeclared_flac"]

_LAYOUTS = {1: "mono", 2: "stereo", 8: "7.1"}


def float_wav(samples: np.ndarray, rate: int) -> bytes:
    """A mono 32-bit float wav (format 3) holding `samples` as they are, NaN and infinity included."""
    data = samples.astype("<f4").tobytes()
    fmt = struct.pack("<HHIIHH", 3, 1, rate, rate * 4, 4, 32)
    header = b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " + struct.pack("<I", 16) + fmt
    return header + b"data" + struct.pack("<I", len(data)) + data


def undeclared_flac(rate: int, channels: int, seconds: int) -> bytes:
    """Silence as FLAC at `rate` x `channels`, its STREAMINFO's total sample count zeroed (unknown):
    a few hundred bytes a second of audio, rate x channels samples a second to decode."""
    layout = _LAYOUTS[channels]
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="flac") as out:
        stream = out.add_stream("flac", rate=rate, layout=layout)
        for second in range(seconds):
            frame = av.AudioFrame.from_ndarray(np.zeros((1, rate * channels), np.float32), format="flt", layout=layout)
            frame.sample_rate, frame.pts = rate, second * rate
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    data = bytearray(buffer.getvalue())
    assert data[:4] == b"fLaC"
    data[8 + 13] &= 0xF0  # STREAMINFO: the top 4 of the 36 bits of total samples...
    data[8 + 14 : 8 + 18] = bytes(4)  # ...and the other 32
    return bytes(data)


def ape_tag(items: list[tuple[bytes, bytes, int]]) -> bytes:
    """An APEv2 tag (key, value, flags per item) with a header and a footer, as taggers append it
    to an mp3 (cover art as a binary item, flags 2)."""
    body = b"".join(struct.pack("<II", len(value), flags) + key + b"\0" + value for key, value, flags in items)

    def frame(is_header: bool) -> bytes:
        flags = 0x80000000 | (0x20000000 if is_header else 0)
        return b"APETAGEX" + struct.pack("<IIII", 2000, len(body) + 32, len(items), flags) + bytes(8)

    return frame(True) + body + frame(False)
