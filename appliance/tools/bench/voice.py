"""`appliance bench --graph <text-to-speech graph>`: audio seconds spoken per second, served against
the raw pipeline, and the time to first audio.

Each level runs `concurrency` clients in a closed loop, each request the same text (a paragraph
of `--text-sentences` sentences, default 8: about 30 s of speech), on two systems:

- `served`: the appliance over HTTP, `POST /v1/audio/speech` with `response_format=pcm` (no
  encoding cost), one keep-alive connection per client; time to first audio is the first body
  chunk's arrival;
- `raw`: the graph's first voice in this process, as the engine builds it (a hibari voice: the
  package's front end and DSP, its ONNX model compiled by OpenVINO), the level's requests back to
  back, a sentence at a time. The engine speaks one text at a time, so that is the best a server
  can give N clients; each request's latency and time to first audio are what a client of N
  queued first come, first served would see (from the end of its previous request).

Each system's first request is a warm-up, not measured. `served / raw` is the ratio of audio
seconds per second (1.0: the server costs nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from appliance.graphfiles import Graph
from appliance.tools.bench.http import HTTPConnection, HTTPError
from appliance.tools.bench.speech_figures import percentile

__all__ = ["VoiceRun", "run_voice", "text_of"]

_PATH = "/v1/audio/speech"
_SENTENCES = (
    "The quarterly report is due on Friday before lunch.",
    "Please check the numbers for the northern region twice.",
    "Our team will meet in the small room on the second floor.",
    "Bring the printed slides and a copy of last year's plan.",
    "If the train is late, call the office and we will wait.",
    "The new printer takes a minute to warm up in the morning.",
    "Lunch is on the company, so order whatever you like.",
    "Thank you all for the hard work over the last few months.",
)


def text_of(sentences: int) -> str:
    """A paragraph of `sentences` plain sentences (the workload's text)."""
    return " ".join(_SENTENCES[index % len(_SENTENCES)] for index in range(sentences))


@dataclass
class VoiceRun:
    """One system at one concurrency level."""

    system: str
    concurrency: int
    requests: int
    audio_seconds: float
    """Spoken, all requests together."""
    wall_seconds: float
    latencies: list[float]
    first_audio: list[float]

    @property
    def audio_per_second(self) -> float:
        return self.audio_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def as_dict(self) -> dict[str, float | int]:
        return {
            "requests": self.requests,
            "audio_seconds": round(self.audio_seconds, 3),
            "wall_seconds": round(self.wall_seconds, 4),
            "audio_seconds_per_second": round(self.audio_per_second, 3),
            "latency_p50_s": round(percentile(self.latencies, 50), 4),
            "first_audio_p50_s": round(percentile(self.first_audio, 50), 4),
            "first_audio_p95_s": round(percentile(self.first_audio, 95), 4),
        }


class ServedVoice:
    name = "served"

    def __init__(self, url: str, model: str, api_key: str | None = None) -> None:
        self.url, self.model = url, model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def measure(self, concurrency: int, requests: int, text: str) -> VoiceRun:
        return asyncio.run(self._measure(concurrency, requests, text))

    async def _measure(self, concurrency: int, requests: int, text: str) -> VoiceRun:
        warm = HTTPConnection(self.url, self._headers)
        try:
            await self._speak(warm, "Warm up.")
        finally:
            await warm.close()
        latencies: list[float] = []
        first_audio: list[float] = []
        spoken = 0.0
        pending = requests

        async def client() -> None:
            nonlocal pending, spoken
            connection = HTTPConnection(self.url, self._headers)
            try:
                while pending > 0:
                    pending -= 1
                    sent = time.perf_counter()
                    first, seconds = await self._speak(connection, text)
                    latencies.append(time.perf_counter() - sent)
                    first_audio.append(first - sent)
                    spoken += seconds
            finally:
                await connection.close()

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(concurrency)))
        wall = time.perf_counter() - started
        return VoiceRun(self.name, concurrency, requests, spoken, wall, latencies, first_audio)

    async def _speak(self, connection: HTTPConnection, text: str) -> tuple[float, float]:
        """(when the first audio arrived, seconds of audio) of one request."""
        payload = {"model": self.model, "input": text, "response_format": "pcm"}
        body, first = 0, 0.0
        async with connection.post(_PATH, payload) as response:
            if response.status != 200:
                raise HTTPError(f"{_PATH} answered {response.status}: {(await response.read())[:300]!r}")
            async for arrived, data in response.chunks():
                first = first or arrived
                body += len(data)
        return first, body / 2 / 24_000


class RawVoice:
    name = "raw"

    def __init__(self, graph: Graph) -> None:
        import openvino

        from appliance.engine.worker.hibari_voice import front_end, open_voice

        facts = graph.tts_facts
        if facts is None or facts.family != "hibari":
            raise ValueError(
                f"{graph.source}: the voice bench measures hibari voices (a SpeechT5 graph has no raw run here)"
            )
        core = openvino.Core()
        path = graph.voices[graph.default_voice]
        self._voice = open_voice(core, path, front_end(core, british=facts.british), graph.device, graph.plugin_config)

    def first_audio_seconds(self, text: str) -> float:
        """Seconds from the start to the audio of `text`'s first piece, as the engine speaks it
        (0 for a text with nothing to say)."""
        import numpy as np

        from appliance.engine.worker.hibari_voice import spoken_pieces

        started = time.perf_counter()
        for phonemes in spoken_pieces(self._voice, text):
            self._voice.from_ids(self._voice.ids(phonemes), 1.0, np.random.default_rng(0))
            return time.perf_counter() - started
        return 0.0

    def measure(self, concurrency: int, requests: int, text: str) -> VoiceRun:
        import numpy as np

        from appliance.engine.worker.hibari_voice import spoken_pieces

        voice = self._voice
        voice.from_phonemes(voice.phonemize("Warm up.")[0], seed=0)
        finished, firsts, samples = [], [], 0
        started = time.perf_counter()
        for _ in range(requests):
            first = 0.0
            rng = np.random.default_rng(0)
            for phonemes in spoken_pieces(voice, text):
                samples += len(voice.from_ids(voice.ids(phonemes), 1.0, rng))
                first = first or time.perf_counter() - started
            firsts.append(first)
            finished.append(time.perf_counter() - started)
        # Client k's i-th request is sent when its previous one ended (or at 0) and served in order.
        sent = [finished[index - concurrency] if index >= concurrency else 0.0 for index in range(requests)]
        latencies = [end - start for end, start in zip(finished, sent)]
        first_audio = [first - start for first, start in zip(firsts, sent)]
        return VoiceRun(self.name, concurrency, requests, samples / 24_000, finished[-1], latencies, first_audio)


def table(runs: list[VoiceRun]) -> str:
    lines = [
        "| concurrency | system | requests | audio s per s | p50 latency s | first audio p50 s | first audio p95 s "
        "| served / raw |",
        "|---|---|---|---|---|---|---|---|",
    ]
    served = {run.concurrency: run for run in runs if run.system == "served"}
    for run in runs:
        figures = run.as_dict()
        ratio = ""
        if run.system == "raw" and run.concurrency in served and run.audio_per_second:
            ratio = f"{served[run.concurrency].audio_per_second / run.audio_per_second:.2f}"
        lines.append(
            f"| {run.concurrency} | {run.system} | {run.requests} | {run.audio_per_second:.1f} "
            f"| {figures['latency_p50_s']:.2f} | {figures['first_audio_p50_s']:.2f} "
            f"| {figures['first_audio_p95_s']:.2f} | {ratio} |"
        )
    return "\n".join(lines)


def run_voice(args: argparse.Namespace, graph: Graph, levels: tuple[int, ...]) -> int:
    """Measure the served graph and its raw voice at each level; print the report (and JSON)."""
    from contextlib import nullcontext

    from appliance.tools.bench.local_server import LocalServer
    from appliance.tools.bench.machine import describe_machine, machine_line

    text = text_of(args.text_sentences or 8)
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    machine = describe_machine(graph.device)
    runs: list[VoiceRun] = []
    try:
        with nullcontext(args.url) if args.url else LocalServer(graph) as url:
            systems: list[ServedVoice | RawVoice] = [ServedVoice(url, args.model or graph.name, args.api_key)]
            if not args.no_raw:
                systems.append(RawVoice(graph))
            for level in levels:
                requests = args.requests or max(8, 3 * level)
                for system in systems:
                    run = system.measure(level, requests, text)
                    say(f"{system.name} c={level}: {run.audio_per_second:.1f} audio s/s")
                    runs.append(run)
    except (RuntimeError, OSError, HTTPError) as exc:
        print(f"appliance bench: {exc}", file=sys.stderr)
        return 1
    runs.sort(key=lambda run: (run.concurrency, run.system != "served"))
    print(f"voice bench: {graph.name}; {machine_line(machine)}")
    print(f"each request: {len(text)} characters, {text.count('.')} sentences; pcm, 24 kHz\n")
    print(table(runs))
    if args.json:
        report = {
            "graph": graph.name,
            "machine": machine,
            "text": text,
            "levels": [
                {
                    "concurrency": level,
                    "systems": {run.system: run.as_dict() for run in runs if run.concurrency == level},
                }
                for level in levels
            ],
            "served_over_raw_median": _median_ratio(runs),
        }
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


def _median_ratio(runs: list[VoiceRun]) -> float | None:
    raw = {run.concurrency: run.audio_per_second for run in runs if run.system == "raw"}
    ratios = [
        run.audio_per_second / raw[run.concurrency]
        for run in runs
        if run.system == "served" and raw.get(run.concurrency)
    ]
    return round(statistics.median(ratios), 4) if ratios else None
