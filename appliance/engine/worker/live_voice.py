"""Voice activity on live streams (the Realtime API's server VAD), answered on a thread of its own.

A `DetectVoice` brings a stream's next frames (16 kHz, whole 32 ms frames) and the stream's
state from its previous call: the LSTM's `h` and `c` (2 x 128 float32) and the last 64 samples
the next frame reads before its own (`voice_activity.frame_blocks`). The answer is each frame's
speech probability and the new state, so the engine holds nothing per stream: a session that
ends, or disconnects, leaves nothing to clean up here.

The calls run on the `live-voice` thread with a model compiled for it (a separate infer request
from the transcription thread's), so a session's VAD is answered in a few milliseconds even
while Whisper reads a minute of another client's audio: a turn's end is heard when it happens,
not after the queue of transcriptions. A stream's calls come one at a time (the server waits for
each answer before it sends the next, since each needs the last one's state).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

import numpy as np

from appliance.engine.messages import Batch, DetectVoice, EngineEvent, Rejected, VoiceDetected
from appliance.engine.worker.preparer import reason
from appliance.engine.worker.voice_activity import CONTEXT_SAMPLES, FRAME_SAMPLES, SileroSequence, frame_blocks

__all__ = ["LiveVoice", "STATE_BYTES"]

log = logging.getLogger("appliance.engine")

_STATE_SHAPE = (1, 1, 128)
_STATE_VALUES = 2 * 128 + CONTEXT_SAMPLES
STATE_BYTES = _STATE_VALUES * 4
MAX_FRAMES = 512
"""Of one call (16.4 s of audio): more is refused (the server sends 100 ms at a time)."""


class LiveVoice:
    """The live-voice thread: `submit` queues a `DetectVoice`, the thread answers it by `send`."""

    def __init__(self, load: Callable[[], SileroSequence], send: Callable[[object], None]) -> None:
        self._load = load
        self._send = send
        self._queue: queue.SimpleQueue[DetectVoice] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, command: DetectVoice) -> EngineEvent | None:
        """Check `command` at once (a `Rejected` for bad samples or state), else queue it."""
        samples = len(command.samples) // 4
        if len(command.samples) % (4 * FRAME_SAMPLES) or not samples or samples // FRAME_SAMPLES > MAX_FRAMES:
            message = f"DetectVoice takes 1 to {MAX_FRAMES} whole frames of {FRAME_SAMPLES} float32 samples."
            return Rejected(request_id=command.request_id, message=message, code="invalid_value")
        if command.state and len(command.state) != STATE_BYTES:
            message = f"A DetectVoice state is {STATE_BYTES} bytes, as the previous answer gave it."
            return Rejected(request_id=command.request_id, message=message, code="invalid_value")
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="live-voice", daemon=True)
            self._thread.start()
        self._queue.put(command)
        return None

    def _serve(self) -> None:
        model: SileroSequence | None = None
        while True:
            command = self._queue.get()
            try:
                model = model or self._load()
                event: EngineEvent = detect(model, command)
            except Exception as exc:  # one stream's failure must not end the thread
                log.error("live voice activity failed: %s", reason(exc))
                model = None  # built anew for the next call
                event = Rejected(request_id=command.request_id, message=reason(exc), code="engine_error")
            self._send(Batch(events=[event]))


def detect(model: SileroSequence, command: DetectVoice) -> VoiceDetected:
    """The probabilities of `command`'s frames, the model started from the stream's state."""
    samples = np.frombuffer(command.samples, dtype="<f4")
    if not np.isfinite(samples).all():
        samples = np.nan_to_num(samples, nan=0.0, posinf=0.0, neginf=0.0)
    if command.state:
        state = np.frombuffer(command.state, dtype="<f4")
        h, c, context = state[:128], state[128:256], state[256:]
    else:
        h = c = np.zeros(128, dtype=np.float32)
        context = np.zeros(CONTEXT_SAMPLES, dtype=np.float32)
    model.set_state(h.reshape(_STATE_SHAPE), c.reshape(_STATE_SHAPE))
    (block,) = frame_blocks(samples, MAX_FRAMES)
    block[0, :CONTEXT_SAMPLES] = context
    probabilities = model(block).astype("<f4")
    h, c = model.state()
    state = np.concatenate([h.reshape(-1), c.reshape(-1), samples[-CONTEXT_SAMPLES:]]).astype("<f4")
    return VoiceDetected(request_id=command.request_id, probabilities=probabilities.tobytes(), state=state.tobytes())
