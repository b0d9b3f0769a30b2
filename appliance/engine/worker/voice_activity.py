"""Voice activity before Whisper: whether a recording holds any speech at all.

Whisper, given a window of silence or noise, writes text anyway ("you", "Thank you."): a meeting
recorder that uploads its quiet minutes would get invented words. A graph's `speech.vad_model`
names a voice-activity model; the speech engine asks it first, and a recording in which it hears
no speech is answered with empty text and no segments without Whisper reading it.

The model is Silero VAD (MIT) as the silero-vad wheel ships it for whole recordings,
`silero_vad_16k_sequence.onnx`: inputs `input` float32 [frames, 576] (each 32 ms frame of 512
samples at 16 kHz after the previous frame's last 64) and its LSTM's `h`, `c` [1, 1, 128];
outputs `speech_probs` [frames] (each frame's speech probability) and `hn`, `cn`. One call reads a
block of `BLOCK_FRAMES` frames (16.4 s), the state carried to the next block, so the probabilities
are the streaming model's (silero_vad_openvino_16k.onnx, one call per frame) within 0.002 on
clean speech, for a sixth of its time.

Cost, measured on an AMD EPYC (2 cores, AVX-512 VNNI) shared with other work: 0.04 s of CPU per
minute of audio (0.05-0.08 s wall on the busy box; 0.21 s with the streaming model), 0.8 s of CPU
(1.6 s wall) for the default `speech.max_audio_seconds` of 30 min, where Whisper tiny.en takes
3.4 s per minute of speech (about 2 %; larger Whispers make it less). A recording with speech
costs less: the reading stops at the first block holding a run long enough (16 s read, 10 ms).
It runs on the engine's transcription thread and stops between blocks when its request is
cancelled.

What counts as speech follows silero's `get_speech_timestamps`: a run opens at a frame of
probability `threshold` or more and closes after 100 ms below `threshold - 0.15`; a recording
holds speech when a run lasts `min_speech_seconds`. Speech scores about 1.0, digital silence
0.01, white noise at any level under 0.1 (measured on tests/data/capital-of-france.wav).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import numpy as np
import openvino

from appliance.graphfiles import Graph

__all__ = [
    "BLOCK_FRAMES",
    "FRAME_SAMPLES",
    "SileroSequence",
    "SpeechRuns",
    "VoiceActivity",
    "frame_blocks",
    "speech_runs",
    "voice_activity_of",
]

SAMPLE_RATE = 16000
FRAME_SAMPLES = 512
"""One frame, 32 ms at 16 kHz: the model's step."""
CONTEXT_SAMPLES = 64
"""The previous frame's last samples, read before each frame."""
BLOCK_FRAMES = 512
"""Frames per model call (16.4 s of audio, 1.2 MB of input): between blocks a cancelled request stops."""
_STATE_SHAPE = (1, 1, 128)
_HYSTERESIS = 0.15
"""A run of speech goes on while the probability stays above `threshold - 0.15` (silero's rule)."""
_MIN_SILENCE_FRAMES = round(0.1 * SAMPLE_RATE / FRAME_SAMPLES)
"""Quiet that closes a run of speech: silero's `min_silence_duration_ms` default, 100 ms."""
_INPUTS, _OUTPUTS = {"input", "h", "c"}, {"speech_probs", "hn", "cn"}


class FrameModel(Protocol):
    """Speech probabilities of a block of frames, [n, 576] -> [n], carrying the model's state."""

    def __call__(self, frames: np.ndarray) -> np.ndarray: ...

    def reset(self) -> None: ...


class SileroSequence:
    """silero_vad_16k_sequence.onnx compiled for the CPU on one thread (the model is a small LSTM
    run frame after frame: a second thread buys nothing)."""

    def __init__(self, path: Path) -> None:
        core = openvino.Core()
        model = core.read_model(str(path))
        inputs = {port.get_any_name() for port in model.inputs}
        outputs = {port.get_any_name() for port in model.outputs}
        if inputs != _INPUTS or outputs != _OUTPUTS:
            raise ValueError(
                f"{path} is not silero-vad's silero_vad_16k_sequence.onnx: its inputs are {sorted(inputs)} and "
                f"outputs {sorted(outputs)}, not {sorted(_INPUTS)} and {sorted(_OUTPUTS)}"
            )
        self._request = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": 1}).create_infer_request()
        self.reset()

    def reset(self) -> None:
        self._h = np.zeros(_STATE_SHAPE, dtype=np.float32)
        self._c = np.zeros(_STATE_SHAPE, dtype=np.float32)

    def set_state(self, h: np.ndarray, c: np.ndarray) -> None:
        """Go on from a stream's saved LSTM state ([1, 1, 128] each; `live_voice`)."""
        self._h = np.ascontiguousarray(h, dtype=np.float32)
        self._c = np.ascontiguousarray(c, dtype=np.float32)

    def state(self) -> tuple[np.ndarray, np.ndarray]:
        """The LSTM state after the last call."""
        return self._h, self._c

    def __call__(self, frames: np.ndarray) -> np.ndarray:
        result = self._request.infer({"input": frames, "h": self._h, "c": self._c})
        self._h, self._c = result["hn"].copy(), result["cn"].copy()
        return result["speech_probs"].reshape(-1).copy()


class VoiceActivity:
    """Whether a recording holds speech, by `model` (a `SileroSequence`; a fake in tests)."""

    def __init__(self, model: FrameModel, *, threshold: float, min_speech_seconds: float) -> None:
        self._model = model
        self.threshold = threshold
        self._min_speech_frames = max(1, round(min_speech_seconds * SAMPLE_RATE / FRAME_SAMPLES))

    def holds_speech(self, samples: np.ndarray, keep_going: Callable[[], bool]) -> bool | None:
        """Whether the 16 kHz mono float `samples` hold a run of speech of the minimum length;
        None when `keep_going` (asked before each block) says stop. Stops reading at the first
        block where such a run is found: a recording with speech costs a block or two."""
        self._model.reset()
        runs = SpeechRuns(self.threshold, _MIN_SILENCE_FRAMES)
        for block in frame_blocks(samples, BLOCK_FRAMES):
            if not keep_going():
                return None
            runs.feed(self._model(block))
            if runs.longest() >= self._min_speech_frames:
                return True
        return False

    def probabilities(self, samples: np.ndarray, keep_going: Callable[[], bool]) -> np.ndarray | None:
        """Each 32 ms frame's speech probability, [ceil(len(samples) / 512)]; None if stopped."""
        self._model.reset()
        found = []
        for block in frame_blocks(samples, BLOCK_FRAMES):
            if not keep_going():
                return None
            found.append(self._model(block))
        return np.concatenate(found) if found else np.zeros(0, dtype=np.float32)


def voice_activity_of(graph: Graph) -> VoiceActivity | None:
    """The voice-activity check a speech graph names (`speech.vad_model`), loaded; None without one.
    ValueError for a file that is not the model."""
    if graph.vad_model is None:
        return None
    return VoiceActivity(
        SileroSequence(graph.vad_model),
        threshold=graph.speech.vad_threshold,
        min_speech_seconds=graph.speech.vad_min_speech_seconds,
    )


def frame_blocks(samples: np.ndarray, block_frames: int) -> Iterator[np.ndarray]:
    """The model's input for `samples`, in blocks of at most `block_frames` rows: each row a frame's
    previous 64 samples (zeros before the first) then its 512, the last frame padded with zeros."""
    frame_count = -(-len(samples) // FRAME_SAMPLES)
    context = np.zeros(CONTEXT_SAMPLES, dtype=np.float32)
    for first in range(0, frame_count, block_frames):
        count = min(block_frames, frame_count - first)
        piece = samples[first * FRAME_SAMPLES : (first + count) * FRAME_SAMPLES]
        frames = np.zeros((count, FRAME_SAMPLES), dtype=np.float32)
        frames.reshape(-1)[: len(piece)] = piece
        block = np.empty((count, CONTEXT_SAMPLES + FRAME_SAMPLES), dtype=np.float32)
        block[:, CONTEXT_SAMPLES:] = frames
        block[0, :CONTEXT_SAMPLES] = context
        block[1:, :CONTEXT_SAMPLES] = frames[:-1, -CONTEXT_SAMPLES:]
        context = frames[-1, -CONTEXT_SAMPLES:].copy()
        yield block


class SpeechRuns:
    """The runs of speech in frame probabilities fed block by block, as [start, end) frame indices:
    a run opens at a frame of `threshold` or more and closes after `min_silence_frames` frames in a
    row below `threshold - 0.15` (its end the first of them)."""

    def __init__(self, threshold: float, min_silence_frames: int) -> None:
        self._threshold = threshold
        self._quiet_below = max(threshold - _HYSTERESIS, 0.01)
        self._min_silence_frames = min_silence_frames
        self.closed: list[tuple[int, int]] = []
        self._start: int | None = None
        self._quiet = 0
        self._frames = 0

    def feed(self, probabilities: np.ndarray) -> None:
        for probability in probabilities.tolist():
            index, self._frames = self._frames, self._frames + 1
            if self._start is None:
                if probability >= self._threshold:
                    self._start, self._quiet = index, 0
            elif probability < self._quiet_below:
                self._quiet += 1
                if self._quiet >= self._min_silence_frames:
                    self.closed.append((self._start, index + 1 - self._quiet))
                    self._start = None
            else:
                self._quiet = 0

    def runs(self) -> list[tuple[int, int]]:
        """The runs so far, the open one ending where the frames fed end (less its quiet frames)."""
        if self._start is None:
            return list(self.closed)
        return [*self.closed, (self._start, self._frames - self._quiet)]

    def longest(self) -> int:
        """Frames in the longest run so far."""
        return max((end - start for start, end in self.runs()), default=0)


def speech_runs(probabilities: np.ndarray, threshold: float, min_silence_frames: int) -> list[tuple[int, int]]:
    """The runs of speech in per-frame `probabilities` (see `SpeechRuns`)."""
    runs = SpeechRuns(threshold, min_silence_frames)
    runs.feed(probabilities)
    return runs.runs()
