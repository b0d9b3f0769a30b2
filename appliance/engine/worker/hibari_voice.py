"""The engine of hibari voices: the `hibari-tts` package's acoustic model read by OpenVINO, its
text front end and vocoder used from the package, one text at a time, a sentence at a time.

A hibari voice is an ONNX model (int8, 7.9 MB) that reads phoneme ids and a `speed` and predicts a
vocoder's parameters every 12.5 ms; the package's numpy DSP (`hibari.dsp`) turns them into 24 kHz
samples, and its grapheme-to-phoneme front end (`hibari.g2p`: lexicons, a tagger and a small ONNX
net for unknown words) turns text into phonemes. None of it is copied here: `_OpenVinoVoice` is
the package's `Hibari` with its onnxruntime session swapped for an OpenVINO compiled model (the
package reads its session through `run(None, feeds)` only), and the unknown-word net gets an
OpenVINO session the same way (`OOV(session=...)`). So onnxruntime, which the package declares, is
never imported: setup.sh installs the wheel with `--no-deps`.

Requests wait in a FIFO queue (`fifo.FifoEngine`; the voices are compiled anew after any call that
failed). A text is spoken sentence by sentence (the package's `split_sentences`; a sentence over
`HIBARI_PHONEMES` phonemes split at clauses by the package, then at word breaks here), so:

- a streamed request (`Synthesize.stream`) gets each sentence's audio in a `SpeechAudio` as soon
  as it is made, then `Synthesized` with no samples; the first audio leaves after the first
  sentence, not after the whole text;
- a cancelled request stops before its next sentence (a sentence takes tens of milliseconds);
- each sentence is progress for the server's hang watchdog (`stalled_seconds`).

The vocoder's noise is drawn from a generator seeded per request, so a text spoken twice is the
same audio.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import openvino
from hibari import dsp
from hibari.g2p import G2P
from hibari.g2p.oov import OOV
from hibari.tts import ASSETS, Hibari

from appliance.engine.messages import Batch, EngineEvent, Rejected, SpeechAudio, Synthesize, Synthesized
from appliance.engine.worker.fifo import FifoEngine
from appliance.engine.worker.preparer import reason
from appliance.graphfiles import Graph
from appliance.graphfiles.tts import HIBARI_PHONEMES

__all__ = ["HibariEngine", "front_end", "open_voice", "spoken_pieces"]

log = logging.getLogger("appliance.engine")

_SEED = 0
"""The vocoder noise's seed: the same text in the same voice is the same audio."""


class _OpenVinoSession:
    """An OpenVINO compiled model behind the one call the package makes of an onnxruntime
    session: `run(None, feeds)`, the outputs in the model's order."""

    def __init__(self, compiled: openvino.CompiledModel) -> None:
        self._request = compiled.create_infer_request()
        self._outputs = compiled.outputs

    def run(self, _names: object, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        results = self._request.infer(feeds)
        return [results[output] for output in self._outputs]


class _OpenVinoVoice(Hibari):
    """The package's `Hibari` (its sentence splitting, phonemes, ids and `from_ids`, which calls
    the DSP) on an OpenVINO session; its `__init__`, which opens onnxruntime, is not called."""

    def __init__(self, session: _OpenVinoSession, g2p: G2P, vocab: dict[str, int]) -> None:
        self.voice = "openvino"
        self.model_path = None
        self.sess = session
        self.vocab = vocab
        self._g2p = g2p


@dataclass
class _Job:
    request_id: int
    command: Synthesize
    cancelled: bool = False


class HibariEngine(FifoEngine[_Job]):
    """hibari voices on OpenVINO serving their FIFO queue of texts, one at a time."""

    thread_name = "synthesize"

    def __init__(self, graph: Graph) -> None:
        facts = graph.tts_facts
        assert facts is not None and facts.family == "hibari", "not a hibari graph"
        self._core = openvino.Core()
        self._g2p = front_end(self._core, british=facts.british)
        self.max_context = facts.text_positions
        super().__init__(graph, self._compile_voices)
        self._warm_up()

    def _compile_voices(self) -> dict[str, Hibari]:
        graph = self.graph
        return {
            name: open_voice(self._core, path, self._g2p, graph.device, graph.plugin_config)
            for name, path in graph.voices.items()
        }

    def _warm_up(self) -> None:
        # The first call of a compiled model and of the front end's lexicons costs about a second:
        # paid while loading, not by the first request.
        started = time.monotonic()
        for voice in self.pipe.values():
            voice.from_phonemes(voice.phonemize("Ready.")[0], seed=_SEED)
        log.info("engine %s: voices warmed up in %.2f s", self.graph.name, time.monotonic() - started)

    # -- main thread: commands --------------------------------------------------------------

    def handle(self, command: object) -> EngineEvent | None:
        if not isinstance(command, Synthesize):
            return None  # other commands never come: the server refuses them for this graph
        if command.voice not in self.pipe:
            message = f"Voice '{command.voice}' is not one of this model's: {', '.join(self.pipe)}."
            return Rejected(request_id=command.request_id, message=message, code="invalid_value", param="voice")
        self.enqueue(_Job(request_id=command.request_id, command=command))
        return None

    # -- synthesis thread -------------------------------------------------------------------

    def serve(self, job: _Job) -> list[EngineEvent]:
        command = job.command
        voice = self.pipe[command.voice]
        rng = np.random.default_rng(_SEED)
        pieces: list[np.ndarray] = []
        tokens = samples = 0
        try:
            texts = spoken_pieces(voice, command.text)
            phonemes = next(texts, None)
            while phonemes is not None:
                if job.cancelled:
                    return []  # the client left: the rest of the text is not spoken
                ids = voice.ids(phonemes)
                audio = voice.from_ids(ids, command.speed, rng)
                self.progressed()
                tokens, samples = tokens + len(ids), samples + len(audio)
                # The next sentence's phonemes (a few ms), so this piece can say whether it is the last.
                phonemes = next(texts, None)
                if command.stream:
                    chunk = SpeechAudio(command.request_id, audio.astype("<f4").tobytes(), dsp.SR, phonemes is None)
                    self.send(Batch(events=[chunk]))
                else:
                    pieces.append(audio)
        except Exception as exc:
            log.error("engine %s: synthesis failed: %s", self.graph.name, reason(exc))
            self.pipeline_failed()
            message = f"The model could not speak the input: {reason(exc)}"
            return [Rejected(request_id=command.request_id, message=message, code="engine_error")]
        if job.cancelled:
            return []
        whole = np.concatenate(pieces).astype("<f4").tobytes() if pieces else b""
        return [
            Synthesized(
                request_id=command.request_id,
                samples=whole,
                sample_rate=dsp.SR,
                tokens=tokens,
                frames=samples // dsp.HOP,
            )
        ]


def front_end(core: openvino.Core, *, british: bool = False) -> G2P:
    """The package's grapheme-to-phoneme front end, its unknown-word net on OpenVINO (tiny, 3 MB:
    on the CPU whatever device the voices run on)."""
    oov_file = Path(ASSETS) / ("oov_gb.onnx" if british else "oov.onnx")
    oov = OOV(str(oov_file), session=_OpenVinoSession(core.compile_model(str(oov_file), "CPU")))
    return G2P(oov=oov, british=british)


def open_voice(
    core: openvino.Core, path: Path, g2p: G2P, device: str = "CPU", config: Mapping[str, object] | None = None
) -> Hibari:
    """The voice whose ONNX model is `path`, compiled for `device`: the package's `Hibari` on OpenVINO."""
    with open(Path(ASSETS) / "vocab.json", encoding="utf-8") as handle:
        vocab = json.load(handle)
    session = _OpenVinoSession(core.compile_model(str(path), device, dict(config or {})))
    return _OpenVinoVoice(session, g2p, vocab)


def spoken_pieces(voice: Hibari, text: str) -> Iterator[str]:
    """The text's phonemes in pieces the model reads in one call: sentence by sentence (phonemized
    as they are reached, so the first sentence is spoken before the rest is read), each at most
    `HIBARI_PHONEMES` long. The package splits a long sentence at clause punctuation only; a piece
    still over the bound (a run of words with no comma) is split here at word breaks, and a
    "word" longer than the bound (no spaces at all) is cut."""
    for sentence in voice.split_sentences(text):
        for phonemes in voice.phonemize(sentence):
            yield from _bounded(phonemes)


def _bounded(phonemes: str) -> Iterator[str]:
    if len(phonemes) <= HIBARI_PHONEMES:
        yield phonemes
        return
    piece = ""
    for word in phonemes.split(" "):
        while len(word) > HIBARI_PHONEMES:
            if piece:
                yield piece
                piece = ""
            yield word[:HIBARI_PHONEMES]
            word = word[HIBARI_PHONEMES:]
        if piece and len(piece) + 1 + len(word) > HIBARI_PHONEMES:
            yield piece
            piece = word
        else:
            piece = f"{piece} {word}" if piece else word
    if piece:
        yield piece
