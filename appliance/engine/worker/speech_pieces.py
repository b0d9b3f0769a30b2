"""Where a recording longer than Whisper's window is cut, so each piece is read in one window and
its reading can be stopped at any token.

Why the engine cuts it itself: `WhisperPipeline.generate` reads a recording over 30 s ("long
form") window by window with timestamps on, and with timestamps on it calls its streamer once per
window, after decoding it (openvino.genai `src/cpp/src/whisper/whisper.cpp`: `decode()` streams
tokens only `if (!return_timestamps)`; the long-form loop writes each window's text after the
window). A CANCEL can only be answered there: a client that left (an HTTP upload, a Realtime
session closed mid-turn) kept the engine reading to the end of the window, 1.2 to 1.7 s of tiny.en
per window on this 2-core box and far more on a larger Whisper, while the next request waited. A
piece read without timestamps ("short form") streams every token, so a CANCEL stops it within a
token.

A recording that fits one window (`WHOLE_SAMPLES`) is read whole, as before. A longer one is cut
into pieces of at most `PIECE_SAMPLES`, each at the quietest moment (lowest energy over
`QUIET_MS`) in the last `SEARCH_SECONDS` before that length: between sentences or words, rarely
inside one. Why 15 s and not a whole window: tiny.en, read without timestamps, drops and repeats
words more in longer pieces. Word error rates measured (tests/data's espeak-ng sentence, hibari's
voice reading 12 sentences):

| pieces of at most | hibari, 53 s | espeak, 2 min with pauses | espeak, 75 s without |
|---|---|---|---|
| 29 s (last 8 s searched) | 0.217 | 0.278 | 0.395 |
| 20 s (6 s) | 0.272 | 0.167 | 0.190 |
| 15 s (5 s) | 0.067 | 0.167 | 0.167 |
| the pipeline's long form | 0.067 | 2.57 | 2.99 |

(0.167 is tiny.en's own: it hears "capital and France" in every saying.) Each piece costs an
encoder pass over a padded 30 s window: 15 s pieces took 2.4 s for the 53 s against 1.6 s in 29 s
pieces; the long form, repeating itself, took 7-10 s for the 2 minutes against 5.2 s.

The pipeline's own long form also starts each window anew (it passes the previous window's text to
none; the initial prompt only to the first), so the pieces lose no context it would have kept.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PIECE_SAMPLES", "WHOLE_SAMPLES", "cut_points", "joined"]

SAMPLE_RATE = 16_000
WHOLE_SAMPLES = 29 * SAMPLE_RATE
"""The longest recording read whole: inside Whisper's 30 s window (3000 feature frames), with a
margin for the feature extractor's framing."""
PIECE_SAMPLES = 15 * SAMPLE_RATE
"""The longest piece of a longer recording."""
SEARCH_SECONDS = 5.0
"""How far back from a piece's longest end a cut is looked for."""
QUIET_MS = 160
"""The span whose energy is compared (five 32 ms frames): a pause, not a stop consonant."""
_STEP = SAMPLE_RATE // 100
"""Energy is measured every 10 ms."""


def cut_points(samples: np.ndarray, longest: int = PIECE_SAMPLES, whole: int = WHOLE_SAMPLES) -> list[tuple[int, int]]:
    """The pieces of `samples` (16 kHz mono float32) as (start, end) sample indices, in order,
    covering them all: one piece when they fit in `whole`, else pieces of at most `longest`."""
    start, total = 0, len(samples)
    if total <= whole:
        return [(0, total)]
    pieces: list[tuple[int, int]] = []
    while total - start > longest:
        end = _quietest(samples, start + longest - int(SEARCH_SECONDS * SAMPLE_RATE), start + longest)
        pieces.append((start, end))
        start = end
    pieces.append((start, total))
    return pieces


def _quietest(samples: np.ndarray, first: int, last: int) -> int:
    """The sample in [first, last] at the middle of the quietest `QUIET_MS` span."""
    first = max(first, 1)
    span = QUIET_MS * SAMPLE_RATE // 1000
    region = samples[first:last].astype(np.float64)
    steps = (len(region) - span) // _STEP + 1
    if steps <= 1:
        return last
    energy = np.cumsum(np.concatenate([[0.0], region * region]))
    starts = np.arange(steps) * _STEP
    window_energy = energy[starts + span] - energy[starts]
    # Of equal quiet (digital silence), the earliest: the shorter piece (see the table above).
    return first + int(starts[int(np.argmin(window_energy))]) + span // 2


def joined(texts: list[str]) -> str:
    """The pieces' texts as one, a space between pieces (each usually begins with its own)."""
    whole = ""
    for text in texts:
        whole += text if not whole or not text or text[0].isspace() else " " + text
    return whole
