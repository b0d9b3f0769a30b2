"""The engine of text-to-speech graphs: OpenVINO GenAI's Text2SpeechPipeline, one request at a time.

`Text2SpeechPipeline.generate(text, speaker_embedding)` runs SpeechT5's encoder, its decoder step
by step until the stop head fires (or `maxlenratio` steps per token), the postnet and the vocoder,
and returns the whole waveform: no streamer, no add_request/step interface, and one pipeline runs
one `generate` at a time. So requests wait in a FIFO queue, as on the speech-to-text engine:

- the main thread takes commands: a `Synthesize` is checked at once (`Rejected` for a voice the
  graph does not have, or a text beyond the encoder's positions) and queued; `Cancel` drops a
  queued request (a running one finishes: the pipeline cannot be stopped, and a request's text is
  bounded by the server);
- the synthesis thread calls `generate()`, which releases the GIL;
- the main thread sends `Stats` every 0.5 s; `stalled_seconds` is how long the running request
  has run (generate gives no progress to measure), which the server's hang watchdog judges.

The voices (speaker embeddings, `tts.voices`) are read once, when the engine loads.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection

import numpy as np
import openvino
import openvino_genai

from appliance.engine.messages import Batch, Cancel, EngineEvent, Rejected, Shutdown, Stats, Synthesize, Synthesized
from appliance.engine.messages import encoder as message_encoder
from appliance.engine.worker.base import STATS_INTERVAL_S
from appliance.engine.worker.inbox import Inbox
from appliance.engine.worker.preparer import reason
from appliance.graphfiles import Graph

__all__ = ["TtsEngine"]

log = logging.getLogger("appliance.engine")


@dataclass
class _Job:
    command: Synthesize
    tokens: int
    cancelled: bool = False


class TtsEngine:
    """A Text2SpeechPipeline serving its FIFO queue of texts, one at a time."""

    def __init__(self, graph: Graph) -> None:
        facts = graph.tts_facts
        assert facts is not None, "not a text-to-speech graph"
        self.graph = graph
        self.pipe = openvino_genai.Text2SpeechPipeline(str(graph.model_dir), graph.device, **graph.plugin_config)
        self.tokenizer = openvino_genai.Tokenizer(str(graph.model_dir))
        self.max_context = facts.text_positions
        self.voices = {
            name: None if path is None else openvino.Tensor(np.fromfile(path, dtype="<f4")[None])
            for name, path in graph.voices.items()
        }
        self._jobs: dict[int, _Job] = {}
        self._queue: deque[_Job] = deque()
        self._wake = threading.Condition()
        self._running: _Job | None = None
        self._started = time.monotonic()
        self._done = 0
        self._send_lock = threading.Lock()
        self._conn: Connection | None = None

    # -- main thread: commands --------------------------------------------------------------

    def run(self, conn: Connection, inbox: Inbox) -> None:
        self._conn = conn
        threading.Thread(target=self._synthesize_forever, name="synthesize", daemon=True).start()
        last_stats = 0.0
        while True:
            try:
                command = inbox.get(timeout=STATS_INTERVAL_S)
            except queue.Empty:
                command = None
            if isinstance(command, Shutdown):
                return
            if isinstance(command, Synthesize):
                rejected = self._queued(command)
                if rejected is not None:
                    self._send(Batch(events=[rejected]))
            elif isinstance(command, Cancel):
                self._cancel(command.request_id)
            # Other commands never reach here: the server refuses them for this graph.
            now = time.monotonic()
            if now - last_stats >= STATS_INTERVAL_S:
                last_stats = now
                self._send(self._stats())

    def _queued(self, command: Synthesize) -> Rejected | None:
        if command.voice not in self.voices:
            message = f"Voice '{command.voice}' is not one of this model's: {', '.join(self.voices)}."
            return Rejected(request_id=command.request_id, message=message, code="invalid_value", param="voice")
        # SpeechT5's tokenizer gives about a token per character, but not exactly: the encoder's
        # positions are the bound the pipeline fails on, so they are counted here.
        tokens = int(self.tokenizer.encode(command.text).input_ids.get_shape()[1])
        if tokens > self.max_context:
            message = (
                f"The input is {tokens} tokens; this model reads at most {self.max_context} "
                "(config.json max_text_positions). Send shorter input."
            )
            return Rejected(request_id=command.request_id, message=message, code="input_too_long", param="input")
        job = _Job(command=command, tokens=tokens)
        with self._wake:
            self._jobs[command.request_id] = job
            self._queue.append(job)
            self._wake.notify()
        return None

    def _cancel(self, request_id: int) -> None:
        with self._wake:
            job = self._jobs.get(request_id)
            if job is None:
                return
            job.cancelled = True  # a running job's answer is dropped when it ends
            if job is not self._running:
                self._queue.remove(job)
                del self._jobs[request_id]

    def _stats(self) -> Stats:
        job = self._running
        return Stats(
            running=len(self._jobs),
            waiting=len(self._jobs) - (1 if job is not None else 0),
            kv_cache_usage=0.0,
            steps=self._done,
            stalled_seconds=time.monotonic() - self._started if job is not None else 0.0,
        )

    def _send(self, message: object) -> None:
        frame = message_encoder.encode(message)
        with self._send_lock:
            self._conn.send_bytes(frame)

    # -- synthesis thread -------------------------------------------------------------------

    def _synthesize_forever(self) -> None:
        try:
            while True:
                with self._wake:
                    while not self._queue:
                        self._wake.wait()
                    job = self._queue.popleft()
                    self._running = job
                    self._started = time.monotonic()
                event = self._synthesize(job)
                with self._wake:
                    self._running = None
                    self._jobs.pop(job.command.request_id, None)
                    self._done += 1
                if event is not None and not job.cancelled:
                    self._send(Batch(events=[event]))
        except BaseException:
            # Without this thread nothing would be spoken again: let the server restart the engine.
            log.exception("engine %s: the synthesis thread failed; exiting", self.graph.name)
            os._exit(3)

    def _synthesize(self, job: _Job) -> EngineEvent:
        command = job.command
        voice = self.voices[command.voice]
        try:
            result = self.pipe.generate(command.text, voice) if voice is not None else self.pipe.generate(command.text)
        except Exception as exc:
            log.error("engine %s: generate() failed: %s", self.graph.name, reason(exc))
            message = f"The model could not speak the input: {reason(exc)}"
            return Rejected(request_id=command.request_id, message=message, code="engine_error")
        samples = np.ascontiguousarray(result.speeches[0].data, dtype="<f4").reshape(-1)
        return Synthesized(
            request_id=command.request_id,
            samples=samples.tobytes(),
            sample_rate=int(result.output_sample_rate),
            tokens=job.tokens,
        )
