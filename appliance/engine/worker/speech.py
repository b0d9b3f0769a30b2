"""The engine of speech-to-text graphs: OpenVINO GenAI's WhisperPipeline, one request at a time.

`WhisperPipeline.generate` takes a whole recording (16 kHz mono float samples) and reads it in
Whisper's 30 s windows itself, each window's text decoded from where the last one ended (so a word
is not cut at a window's edge), but then it hears from its streamer only once a window, so a
cancelled request would run to the window's end: a recording over one window asked for no times is
read here in pieces of at most 15 s cut at its quiet moments (`speech_pieces`), each streaming
every token. It has no add_request/step interface and no batching, and one pipeline runs one `generate`
at a time ("Infer Request is busy" otherwise), so requests wait in a FIFO queue
(`fifo.FifoEngine`: the pipeline is built anew after any call that failed):

- a `Transcribe` is checked at once (`Rejected` while another request runs: what the pipeline
  would refuse or misread, a prompt over half the text window counted in the model's tokens,
  samples that are not finite) and queued; `Cancel` stops the running one at its next token (the
  streamer answers CANCEL), or, when it asked for segments or words (the pipeline's long form,
  timestamps on), at the end of the window being read;
- a `DetectVoice` (a live stream's frames, the Realtime API's server VAD) goes to the
  `live-voice` thread (`live_voice`), never behind the transcriptions;
- the transcription thread first asks the graph's voice-activity model, if it names one, whether
  the recording holds speech (`voice_activity`: none gives empty text without calling Whisper),
  then calls `generate()`, which releases the GIL; with `stream`, its streamer sends the text as it
  is decoded in `Delta`s.

Fairness is first come, first served: a request's time in the engine grows with its audio's
duration, which the server bounds (`speech.max_audio_seconds`) before anything is sent here.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import openvino_genai

from appliance.engine.messages import Batch, Delta, DetectVoice, EngineEvent, Rejected, Transcribe, Transcribed
from appliance.engine.worker.fifo import FifoEngine
from appliance.engine.worker.live_voice import LiveVoice
from appliance.engine.worker.preparer import reason
from appliance.engine.worker.speech_pieces import cut_points, joined
from appliance.engine.worker.voice_activity import SileroSequence, voice_activity_of
from appliance.graphfiles import Graph

__all__ = ["MIN_SAMPLES", "SpeechEngine", "open_engine"]

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


class SpeechEngine(FifoEngine[_Job]):
    """A WhisperPipeline serving its FIFO queue of transcriptions, one at a time."""

    thread_name = "transcribe"

    def __init__(self, graph: Graph) -> None:
        facts = graph.speech_facts
        assert facts is not None, "not a speech-to-text graph"
        self.facts = facts
        super().__init__(
            graph,
            lambda: openvino_genai.WhisperPipeline(
                str(graph.model_dir), graph.device, word_timestamps=graph.speech.word_timestamps, **graph.plugin_config
            ),
        )
        self.tokenizer = self.pipe.get_tokenizer()
        self.voice_activity = voice_activity_of(graph)
        vad_model = graph.vad_model
        self.live_voice = None if vad_model is None else LiveVoice(lambda: SileroSequence(vad_model), self.send)
        self.max_context = facts.text_tokens
        self.max_prompt_tokens = facts.text_tokens // 2 - 1
        """Whisper reads at most this much prompt (OpenAI's whisper keeps the last 223 of 448);
        generate() raised past about 446 tokens, and the next call then read the failed prompt."""

    # -- main thread: commands --------------------------------------------------------------

    def handle(self, command: object) -> EngineEvent | None:
        if isinstance(command, DetectVoice):
            if self.live_voice is None:
                message = f"Model '{self.graph.name}' has no voice-activity model (speech.vad_model)."
                return Rejected(request_id=command.request_id, message=message, code="no_vad_model")
            return self.live_voice.submit(command)
        if not isinstance(command, Transcribe):
            return None  # Submit, Tokenize, Embed... never come: the server refuses them for this graph.
        samples = np.frombuffer(command.samples, dtype="<f4")
        problem = self._problem(command, samples)
        if problem is not None:
            message, param = problem
            return Rejected(request_id=command.request_id, message=message, code="invalid_value", param=param)
        self.enqueue(_Job(request_id=command.request_id, command=command, samples=samples))
        return None

    def _problem(self, command: Transcribe, samples: np.ndarray) -> tuple[str, str] | None:
        """What the pipeline would refuse or misread (the server checks the same first, but for the
        prompt's tokens, which only the model's tokenizer counts)."""
        facts, options = self.facts, command.options
        if len(samples) < MIN_SAMPLES:
            return (
                f"The audio is too short: {len(samples)} samples at 16 kHz, at least {MIN_SAMPLES} are needed.",
                "file",
            )
        if not np.isfinite(samples).all():
            return "The audio holds samples that are not numbers (NaN or infinity).", "file"
        if options.language is not None and options.language not in facts.languages:
            return f"Language '{options.language}' is not one this model knows.", "language"
        if options.task == "translate" and not facts.multilingual:
            return "This model is English-only: it cannot translate.", "model"
        if options.words and not self.graph.speech.word_timestamps:
            return "Word timestamps are not enabled for this model (speech.word_timestamps).", "timestamp_granularities"
        if options.prompt:
            tokens = int(self.tokenizer.encode(options.prompt, add_special_tokens=False).input_ids.get_shape()[1])
            if tokens > self.max_prompt_tokens:
                return (
                    f"The prompt is {tokens} tokens; this model reads at most {self.max_prompt_tokens} tokens of "
                    "prompt (half its text window). Send a shorter prompt.",
                    "prompt",
                )
        return None

    # -- transcription thread ---------------------------------------------------------------

    def serve(self, job: _Job) -> list[EngineEvent]:
        event = self._transcribe(job)
        return [] if job.cancelled or event is None else [event]

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
            text, detected, segments, words = self._read(job, config, streamer)
        except Exception as exc:
            log.error("engine %s: generate() failed: %s", self.graph.name, reason(exc))
            self.pipeline_failed()
            message = f"The model could not transcribe the audio: {reason(exc)}"
            return Rejected(request_id=job.request_id, message=message, code="engine_error")
        if streamer.error is not None:
            self.pipeline_failed()  # generate() was cut short by the streamer's CANCEL
            message = f"The model could not transcribe the audio: {streamer.error}"
            return Rejected(request_id=job.request_id, message=message, code="engine_error")
        return Transcribed(
            request_id=job.request_id,
            text=text,
            segments=segments,
            words=words,
            language=options.language or detected,
            tokens=job.tokens,
        )

    def _read(self, job: _Job, config: Any, streamer: _Streamer) -> tuple[str, str, list, list]:
        """The job's text, the language detected, its segments and words (when asked for).

        Asked for no times, a recording longer than a window is read in pieces of at most 15 s
        (`speech_pieces`), so a cancelled job stops at its next token rather than at the end of
        the window being read; the first piece's language is kept for the rest, and the prompt
        is read before the first only, as the pipeline's own long form does."""
        options = job.command.options
        if options.segments or options.words:  # the times come from the pipeline's long form
            result = self.pipe.generate(job.samples, config, streamer)
            segments = [(float(c.start_ts), float(c.end_ts), c.text) for c in (result.chunks or [])]
            words = [(float(w.start_ts), float(w.end_ts), w.word) for w in (result.words or [])]
            return _text(result), _language(result), segments if options.segments else [], words
        texts, detected = [], ""
        for start, end in cut_points(job.samples):
            if job.cancelled or streamer.error is not None:
                break
            result = self.pipe.generate(job.samples[start:end], config, streamer)
            texts.append(_text(result))
            if not detected:
                detected = _language(result)
                if self.facts.multilingual and config.language is None and detected:
                    config.language = f"<|{detected}|>"
            config.initial_prompt = None
        return joined(texts), detected, [], []

    def _holds_speech(self, job: _Job) -> bool:
        """Whether the graph's voice-activity model hears speech in the job's audio (True without
        one, False once the job is cancelled); each block it reads counts as progress."""
        if self.voice_activity is None:
            return True

        def keep_going() -> bool:
            self.progressed(0)
            return not job.cancelled

        try:
            return bool(self.voice_activity.holds_speech(job.samples, keep_going))
        except Exception as exc:  # the check is a filter: without it Whisper reads the audio, as without a model
            log.error("engine %s: the voice-activity model failed: %s", self.graph.name, reason(exc))
            return not job.cancelled

    def on_text(self, job: _Job, text: str) -> openvino_genai.StreamingStatus:
        """The streamer's new text; whether decoding goes on (not once cancelled)."""
        self.progressed()
        job.tokens += 1
        if job.cancelled:
            return _STATUS.CANCEL
        if job.command.options.stream and text:
            self.send(Batch(events=[Delta(request_id=job.request_id, text=text, tokens=job.tokens)]))
        return _STATUS.RUNNING


def _text(result: Any) -> str:
    return result.texts[0] if result.texts else ""


def _language(result: Any) -> str:
    """The language a result says it heard, as an ISO code ("" when it says none)."""
    return str(getattr(result, "language", "") or "").strip("<|>")


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


def open_engine(graph: Graph) -> SpeechEngine:
    """The engine of a speech-to-text graph (`messages.TASKS`)."""
    return SpeechEngine(graph)
