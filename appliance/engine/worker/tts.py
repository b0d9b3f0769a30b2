"""The engine of text-to-speech graphs: OpenVINO GenAI's Text2SpeechPipeline, one request at a time.

`Text2SpeechPipeline.generate(text, speaker_embedding)` runs SpeechT5's encoder, its decoder step
by step until the stop head fires (or `maxlenratio` steps per token), the postnet and the vocoder,
and returns the whole waveform: no streamer, no add_request/step interface, and one pipeline runs
one `generate` at a time. So requests wait in a FIFO queue (`fifo.FifoEngine`: the pipeline is
built anew after any call that failed):

- a `Synthesize` is checked at once (`Rejected` for a voice the graph does not have, or a text
  beyond the encoder's positions) and queued; a running request that is cancelled finishes (the
  pipeline cannot be stopped, and a request's text is bounded by the server), its answer dropped;
- the synthesis thread calls `generate()`, which releases the GIL; `stalled_seconds` in the stats
  is how long the running request has run (generate gives no progress to measure), which the
  server's hang watchdog judges.

The voices (speaker embeddings, `tts.voices`) are read once, when the engine loads. A streamed
request gets its whole waveform in one `SpeechAudio`, then `Synthesized` with no samples: the
pipeline has no pieces to send earlier. Graphs of hibari voices run `hibari_voice.py` instead
(`open_engine`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import openvino
import openvino_genai

from appliance.engine.messages import Batch, EngineEvent, Rejected, SpeechAudio, Synthesize, Synthesized
from appliance.engine.worker.fifo import FifoEngine
from appliance.engine.worker.preparer import reason
from appliance.graphfiles import Graph

__all__ = ["TtsEngine", "open_engine"]

log = logging.getLogger("appliance.engine")


@dataclass
class _Job:
    request_id: int
    command: Synthesize
    tokens: int
    cancelled: bool = False


class TtsEngine(FifoEngine[_Job]):
    """A Text2SpeechPipeline serving its FIFO queue of texts, one at a time."""

    thread_name = "synthesize"

    def __init__(self, graph: Graph) -> None:
        facts = graph.tts_facts
        assert facts is not None, "not a text-to-speech graph"
        super().__init__(
            graph,
            lambda: openvino_genai.Text2SpeechPipeline(str(graph.model_dir), graph.device, **graph.plugin_config),
        )
        self.tokenizer = openvino_genai.Tokenizer(str(graph.model_dir))
        self.max_context = facts.text_positions
        self.voices = {
            name: None if path is None else openvino.Tensor(np.fromfile(path, dtype="<f4")[None])
            for name, path in graph.voices.items()
        }

    # -- main thread: commands --------------------------------------------------------------

    def handle(self, command: object) -> EngineEvent | None:
        if not isinstance(command, Synthesize):
            return None  # other commands never come: the server refuses them for this graph
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
        self.enqueue(_Job(request_id=command.request_id, command=command, tokens=tokens))
        return None

    # -- synthesis thread -------------------------------------------------------------------

    def serve(self, job: _Job) -> list[EngineEvent]:
        event = self._synthesize(job)
        self.progressed()
        return [] if job.cancelled else [event]

    def _synthesize(self, job: _Job) -> EngineEvent:
        command = job.command
        voice = self.voices[command.voice]
        try:
            result = self.pipe.generate(command.text, voice) if voice is not None else self.pipe.generate(command.text)
        except Exception as exc:
            log.error("engine %s: generate() failed: %s", self.graph.name, reason(exc))
            self.pipeline_failed()
            message = f"The model could not speak the input: {reason(exc)}"
            return Rejected(request_id=command.request_id, message=message, code="engine_error")
        samples = np.ascontiguousarray(result.speeches[0].data, dtype="<f4").reshape(-1).tobytes()
        rate = int(result.output_sample_rate)
        if command.stream:
            self.send(Batch(events=[SpeechAudio(command.request_id, samples, rate)]))
            samples = b""
        return Synthesized(request_id=command.request_id, samples=samples, sample_rate=rate, tokens=job.tokens)


def open_engine(graph: Graph) -> FifoEngine:
    """The engine of a text-to-speech graph (`messages.TASKS`): SpeechT5's pipeline, or hibari voices."""
    if graph.tts_facts is not None and graph.tts_facts.family == "hibari":
        from appliance.engine.worker.hibari_voice import HibariEngine  # imports the hibari package

        return HibariEngine(graph)
    return TtsEngine(graph)
