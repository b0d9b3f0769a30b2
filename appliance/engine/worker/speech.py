"""The engine of speech-to-text graphs: OpenVINO GenAI's WhisperPipeline, one request at a time.

`WhisperPipeline.generate` takes a whole recording (16 kHz mono float samples) and reads it in
Whisper's 30 s windows itself, each window's text decoded from where the last one ended (so a word
is not cut at a window's edge). It has no add_request/step interface and no batching, and one
pipeline runs one `generate` at a time ("Infer Request is busy" otherwise), so requests wait in a
FIFO queue, as on the stateful engine:

- the main thread takes commands: a `Transcribe` is checked at once (`Rejected` while another
  request runs) and queued; `Cancel` drops a queued request or stops the running one at its next
  token (the streamer answers CANCEL);
- the transcription thread first asks the graph's voice-activity model, if it names one, whether
  the recording holds speech (`voice_activity`: none gives empty text without calling Whisper),
  then calls `generate()`, which releases the GIL; with `stream`, its streamer sends the text as it
  is decoded in `Delta`s;
- the main thread sends `Stats` every 0.5 s, carrying how long the running request has waited for
  a token (`stalled_seconds`): the server's hang watchdog judges from that, not from silence.

Fairness is first come, first served: a request's time in the engine grows with its audio's
duration, which the server bounds (`speech.max_audio_seconds`) before anything is sent here.
"""

from __future__ import annotations

import logging
import os
import queue
import random
import threading
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection

import numpy as np
import openvino_genai

from appliance.engine.messages import (
    Batch,
    Cancel,
    Delta,
    EngineEvent,
    Rejected,
    Shutdown,
    Stats,
    Transcribe,
    Transcribed,
    encoder,
)
from appliance.engine.worker.base import STATS_INTERVAL_S
from appliance.engine.worker.inbox import Inbox
from appliance.engine.worker.preparer import reason
from appliance.engine.worker.voice_activity import voice_activity_of
from appliance.graphfiles import Graph

__all__ = ["MIN_SAMPLES", "SpeechEngine"]

log = logging.getLogger("appliance.engine")

_STATUS = openvino_genai.StreamingStatus
MIN_SAMPLES = 201
"""WhisperPipeline raises on fewer samples (its feature extractor's window)."""


@dataclass
class _Job:
    request_id: int
    command: Transcribe
    samples: np.ndarray
    cancelled: bool = False
    tokens: int = 0


class SpeechEngine:
    """A WhisperPipeline serving its FIFO queue of transcriptions, one at a time."""

    def __init__(self, graph: Graph) -> None:
        facts = graph.speech_facts
        assert facts is not None, "not a speech-to-text graph"
        self.graph, self.facts = graph, facts
        self.pipe = openvino_genai.WhisperPipeline(
            str(graph.model_dir), graph.device, word_timestamps=graph.speech.word_timestamps, **graph.plugin_config
        )
        self.voice_activity = voice_activity_of(graph)
        self.max_context = facts.text_tokens
        self._jobs: dict[int, _Job] = {}
        self._queue: deque[_Job] = deque()
        self._wake = threading.Condition()
        self._running: _Job | None = None
        self._last_progress = time.monotonic()
        self._tokens = 0
        self._send_lock = threading.Lock()
        self._conn: Connection | None = None

    # -- main thread: commands --------------------------------------------------------------

    def run(self, conn: Connection, inbox: Inbox) -> None:
        self._conn = conn
        threading.Thread(target=self._transcribe_forever, name="transcribe", daemon=True).start()
        last_stats = 0.0
        while True:
            try:
                command = inbox.get(timeout=STATS_INTERVAL_S)
            except queue.Empty:
                command = None
            if isinstance(command, Shutdown):
                return
            if isinstance(command, Transcribe):
                rejected = self._queued(command)
                if rejected is not None:
                    self._send(Batch(events=[rejected]))
            elif isinstance(command, Cancel):
                self._cancel(command.request_id)
            # Submit, Tokenize, Embed... never reach here: the server refuses them for this graph.
            now = time.monotonic()
            if now - last_stats >= STATS_INTERVAL_S:
                last_stats = now
                self._send(self._stats())

    def _queued(self, command: Transcribe) -> Rejected | None:
        samples = np.frombuffer(command.samples, dtype="<f4")
        problem = self._problem(command, len(samples))
        if problem is not None:
            message, param = problem
            return Rejected(request_id=command.request_id, message=message, code="invalid_value", param=param)
        job = _Job(request_id=command.request_id, command=command, samples=samples)
        with self._wake:
            self._jobs[job.request_id] = job
            self._queue.append(job)
            self._wake.notify()
        return None

    def _problem(self, command: Transcribe, samples: int) -> tuple[str, str] | None:
        """What the pipeline would refuse or misread (the server checks the same first)."""
        facts, options = self.facts, command.options
        if samples < MIN_SAMPLES:
            return f"The audio is too short: {samples} samples at 16 kHz, at least {MIN_SAMPLES} are needed.", "file"
        if options.language is not None and options.language not in facts.languages:
            return f"Language '{options.language}' is not one this model knows.", "language"
        if options.task == "translate" and not facts.multilingual:
            return "This model is English-only: it cannot translate.", "model"
        if options.words and not self.graph.speech.word_timestamps:
            return "Word timestamps are not enabled for this model (speech.word_timestamps).", "timestamp_granularities"
        return None

    def _cancel(self, request_id: int) -> None:
        with self._wake:
            job = self._jobs.get(request_id)
            if job is None:
                return
            job.cancelled = True  # the running job stops at its next token
            if job is not self._running:
                self._queue.remove(job)
                del self._jobs[request_id]

    def _stats(self) -> Stats:
        job = self._running
        return Stats(
            running=len(self._jobs),
            waiting=len(self._jobs) - (1 if job is not None else 0),
            kv_cache_usage=0.0,
            steps=self._tokens,
            stalled_seconds=time.monotonic() - self._last_progress if job is not None else 0.0,
        )

    def _send(self, message: object) -> None:
        frame = encoder.encode(message)
        with self._send_lock:
            self._conn.send_bytes(frame)

    # -- transcription thread ---------------------------------------------------------------

    def _transcribe_forever(self) -> None:
        try:
            while True:
                with self._wake:
                    while not self._queue:
                        self._wake.wait()
                    job = self._queue.popleft()
                    self._running = job
                    self._last_progress = time.monotonic()
                event = self._transcribe(job)
                with self._wake:
                    self._running = None
                    self._jobs.pop(job.request_id, None)
                if event is not None:
                    self._send(Batch(events=[event]))
        except BaseException:
            # Without this thread nothing would be transcribed again: let the server restart the
            # engine (it ends the requests in flight with an error).
            log.exception("engine %s: the transcription thread failed; exiting", self.graph.name)
            os._exit(3)

    def _transcribe(self, job: _Job) -> EngineEvent | None:
        if not self._holds_speech(job):
            return None if job.cancelled else _heard_nothing(job)
        options = job.command.options
        config = self.pipe.get_generation_config()
        if self.facts.multilingual:  # an English-only model refuses a task or language token
            config.task = options.task
            config.language = f"<|{options.language}|>" if options.language else None
        if options.prompt:
            config.initial_prompt = options.prompt
        config.return_timestamps = options.segments
        if options.temperature > 0:  # else greedy, as OpenAI's default of 0 asks
            config.do_sample = True
            config.temperature = options.temperature
            config.rng_seed = random.getrandbits(31)  # the pipeline's own seed is fixed
        config.word_timestamps = options.words
        streamer = _Streamer(self, job)
        try:
            result = self.pipe.generate(job.samples, config, streamer)
        except Exception as exc:
            log.error("engine %s: generate() failed: %s", self.graph.name, reason(exc))
            message = f"The model could not transcribe the audio: {reason(exc)}"
            return Rejected(request_id=job.request_id, message=message, code="engine_error")
        if job.cancelled:
            return None  # the server has forgotten it
        if streamer.error is not None:
            message = f"The model could not transcribe the audio: {streamer.error}"
            return Rejected(request_id=job.request_id, message=message, code="engine_error")
        segments = (
            [(float(c.start_ts), float(c.end_ts), c.text) for c in (result.chunks or [])] if options.segments else []
        )
        words = [(float(w.start_ts), float(w.end_ts), w.word) for w in (result.words or [])] if options.words else []
        detected = str(getattr(result, "language", "") or "").strip("<|>")
        return Transcribed(
            request_id=job.request_id,
            text=result.texts[0] if result.texts else "",
            segments=segments,
            words=words,
            language=options.language or detected,
            tokens=job.tokens,
        )

    def _holds_speech(self, job: _Job) -> bool:
        """Whether the graph's voice-activity model hears speech in the job's audio (True without
        one, False once the job is cancelled); each block it reads counts as progress."""
        if self.voice_activity is None:
            return True

        def keep_going() -> bool:
            self._last_progress = time.monotonic()
            return not job.cancelled

        try:
            return bool(self.voice_activity.holds_speech(job.samples, keep_going))
        except Exception as exc:  # the check is a filter: without it Whisper reads the audio, as without a model
            log.error("engine %s: the voice-activity model failed: %s", self.graph.name, reason(exc))
            return not job.cancelled

    def on_text(self, job: _Job, text: str) -> openvino_genai.StreamingStatus:
        """The streamer's new text; whether decoding goes on (not once cancelled)."""
        self._last_progress = time.monotonic()
        self._tokens += 1
        job.tokens += 1
        if job.cancelled:
            return _STATUS.CANCEL
        if job.command.options.stream and text:
            self._send(Batch(events=[Delta(request_id=job.request_id, text=text, tokens=job.tokens)]))
        return _STATUS.RUNNING


def _heard_nothing(job: _Job) -> Transcribed:
    """The answer for a recording with no speech: no text, no segments, no words."""
    return Transcribed(request_id=job.request_id, text="", language=job.command.options.language or "")


class _Streamer:
    """The callable WhisperPipeline calls with each piece of decoded text."""

    def __init__(self, engine: SpeechEngine, job: _Job) -> None:
        self._engine = engine
        self._job = job
        self.error: str | None = None

    def __call__(self, text: str) -> openvino_genai.StreamingStatus:
        try:
            return self._engine.on_text(self._job, text)
        except Exception as exc:  # an exception must not unwind through the C++ pipeline
            self.error = reason(exc)
            return _STATUS.CANCEL
