"""An answer's text made into the Realtime API's audio as it is written: sentence by sentence.

`Sentences` cuts the model's text, as it streams, at the end of each sentence or line (or, in a
run with no stop, at a word break past `MAX_SENTENCE_CHARS`), so the voice graph can speak the first
sentence while the model writes the next. `pcm16` turns a voice's float samples into what the
Realtime API sends: little-endian 16-bit mono at the session's output rate (24 kHz, the only rate
its `audio/pcm` format names; hibari voices speak at it, other voices are resampled).
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["MAX_SENTENCE_CHARS", "OUTPUT_RATE", "Sentences", "pcm16"]

OUTPUT_RATE = 24_000
MAX_SENTENCE_CHARS = 240
"""A run of text with no sentence end is spoken in pieces of about this many characters."""
_SENTENCE_END = re.compile(r"(?<!\b\d)[.!?;:]+[\"')\]]*\s|\n")
"""A stop and a space (not a list's "1. "), or a line break."""


class Sentences:
    """Text fed as it streams, taken out sentence by sentence."""

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, text: str) -> list[str]:
        """The sentences `text` completes (stripped, empty ones left out)."""
        self._pending += text
        done = []
        while True:
            end = _SENTENCE_END.search(self._pending)
            end_at = end.end() if end is not None else None
            if end_at is None or end_at > MAX_SENTENCE_CHARS:
                if len(self._pending) <= MAX_SENTENCE_CHARS:
                    break
                cut = self._pending.rfind(" ", 0, MAX_SENTENCE_CHARS)
                end_at = cut if cut > 0 else MAX_SENTENCE_CHARS
            sentence, self._pending = self._pending[:end_at].strip(), self._pending[end_at:]
            if _speakable(sentence):
                done.append(sentence)
        return done

    def finish(self) -> list[str]:
        """What is left once the text is complete."""
        rest, self._pending = self._pending.strip(), ""
        return [rest] if _speakable(rest) else []


def _speakable(text: str) -> bool:
    return any(character.isalnum() for character in text)


def pcm16(samples: np.ndarray, rate: int) -> bytes:
    """Float samples (nominally in [-1, 1]) at `rate` as 16-bit little-endian PCM at `OUTPUT_RATE`."""
    if rate != OUTPUT_RATE and len(samples):
        count = max(1, round(len(samples) * OUTPUT_RATE / rate))
        samples = np.interp(np.arange(count) * (rate / OUTPUT_RATE), np.arange(len(samples)), samples)
    clipped = np.clip(np.nan_to_num(samples, nan=0.0), -1.0, 1.0)
    return (clipped * 32767).astype("<i2").tobytes()
