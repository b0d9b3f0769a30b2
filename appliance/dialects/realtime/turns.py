"""Server VAD turn detection: where a speaker's turn starts and ends, from the voice-activity
model's per-frame speech probabilities (one per 32 ms frame of 16 kHz audio).

The GA API's `server_vad` knobs, with OpenAI's defaults: `threshold` (0.5: a frame at or above it
is speech), `prefix_padding_ms` (300: the committed audio begins this long before the first
speech frame, so a soft onset is not cut), `silence_duration_ms` (500: this long below
`threshold - 0.15`, silero's hysteresis, ends the turn). Speech must last `MIN_SPEECH_MS` to
open a turn (a click or a cough scores one frame).

Times are milliseconds of the session's input audio, as the API's `audio_start_ms` /
`audio_end_ms` count them: from the first sample appended in the session, whatever was cleared.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FRAME_MS", "MIN_SPEECH_MS", "SpeechStarted", "SpeechStopped", "TurnDetector", "VadSettings"]

FRAME_MS = 32
"""One voice-activity frame: 512 samples at 16 kHz."""
MIN_SPEECH_MS = 96
"""Of speech (three frames) before a turn opens."""
_HYSTERESIS = 0.15


@dataclass(frozen=True)
class VadSettings:
    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500


@dataclass(frozen=True)
class SpeechStarted:
    audio_start_ms: int
    """Where the committed audio will begin: the first speech frame less the prefix padding."""


@dataclass(frozen=True)
class SpeechStopped:
    audio_end_ms: int
    """Where the turn's audio ends: the frame that completed the silence."""


class TurnDetector:
    """Frames in, turn boundaries out (`feed`); `reset` after a commit or a clear."""

    def __init__(self, settings: VadSettings, *, start_ms: int = 0) -> None:
        """`start_ms`: where in the session's audio the first frame fed begins."""
        self.settings = settings
        self._start_ms = start_ms
        self._frames = 0
        """Frames fed (the clock)."""
        self._run = 0
        self._quiet = 0
        self.speaking = False

    @property
    def now_ms(self) -> int:
        return self._start_ms + self._frames * FRAME_MS

    def reset(self) -> None:
        """Forget a turn in progress (the buffer was committed or cleared by the client)."""
        self._run = self._quiet = 0
        self.speaking = False

    def feed(self, probabilities: list[float]) -> list[SpeechStarted | SpeechStopped]:
        """The boundaries the next frames' `probabilities` cross, in order."""
        settings = self.settings
        quiet_below = max(settings.threshold - _HYSTERESIS, 0.01)
        silence_frames = max(1, -(-settings.silence_duration_ms // FRAME_MS))
        min_frames = MIN_SPEECH_MS // FRAME_MS
        found: list[SpeechStarted | SpeechStopped] = []
        for probability in probabilities:
            self._frames += 1
            if not self.speaking:
                self._run = self._run + 1 if probability >= settings.threshold else 0
                if self._run >= min_frames:
                    self.speaking, self._quiet = True, 0
                    first = self._start_ms + (self._frames - self._run) * FRAME_MS
                    found.append(SpeechStarted(max(0, first - settings.prefix_padding_ms)))
            elif probability < quiet_below:
                self._quiet += 1
                if self._quiet >= silence_frames:
                    self.speaking, self._run = False, 0
                    found.append(SpeechStopped(self.now_ms))
            else:
                self._quiet = 0
        return found
