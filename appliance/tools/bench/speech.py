"""`appliance bench` on a speech-to-text graph: audio seconds transcribed per second, served
against the raw WhisperPipeline and against faster-whisper on the same weights.

Each level runs `concurrency` clients in a closed loop, each request the same recording of about
`--audio-seconds` (see `recording`), on every system in `speech_systems`: the server over HTTP,
the graph's own pipeline in process (back to back: the engine runs one `generate` at a time, so
that is what N clients can get from it at best, and their latencies are computed as N clients
queued on it would see them), and faster-whisper with one replica per client. Before the levels,
each system transcribes the clip once, alone, and the report prints what it heard (and its word
error rate on the packaged sentence). Each system's first request after it is loaded is a warm-up,
not measured.

In turns (the default) each system runs all its levels and is then unloaded, so it runs alone;
the order of the systems flips every round. With `--interleave` every system stays loaded and each
level runs on all of them, round after round (the order flipping each round), before the next
level: each ratio then compares runs seconds apart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from appliance.tools.bench.recording import Recording, word_error_rate
from appliance.tools.bench.speech_figures import SpeechLevel, SystemRun

__all__ = ["Heard", "SpeechSystem", "hear_all", "requests_for", "run_speech_bench"]


class SpeechSystem(Protocol):
    """What the bench asks of a system (see speech_systems)."""

    name: str

    def hear(self, samples: np.ndarray) -> str: ...

    def measure(self, concurrency: int, requests: int, recording: Recording) -> SystemRun: ...

    def close(self) -> None: ...


Heard = dict[str, tuple[str, float | None]]
"""system -> (its text for the clip, its word error rate against the reference, if one is known)."""


def requests_for(concurrency: int, requests: int | None) -> int:
    """Requests at a level: `--requests`, or three per client (at least 8)."""
    return requests or max(8, 3 * concurrency)


def hear_all(
    systems: Sequence[SpeechSystem], clip: np.ndarray, reference: str | None, *, keep_loaded: bool = False
) -> Heard:
    """Each system's transcription of the clip alone, and its word error rate on `reference`; each
    system is closed after it unless `keep_loaded` (--interleave keeps every system loaded)."""
    heard: Heard = {}
    for system in systems:
        text = system.hear(clip)
        heard[system.name] = (text, word_error_rate(reference, text) if reference else None)
        if not keep_loaded:
            system.close()
    return heard


def run_speech_bench(
    systems: Sequence[SpeechSystem],
    levels: tuple[int, ...],
    recording: Recording,
    *,
    requests: int | None = None,
    repeat: int = 1,
    interleave: bool = False,
    say: Callable[[str], None] = print,
) -> list[list[SpeechLevel]]:
    """Every level on every system, `repeat` rounds; the result is [round][level]."""
    rounds = [[SpeechLevel(level, requests_for(level, requests)) for level in levels] for _ in range(repeat)]

    def measure(system: SpeechSystem, number: int, index: int) -> None:
        level = rounds[number][index]
        run = system.measure(level.concurrency, level.requests, recording)
        level.runs[system.name] = run
        say(
            f"{system.name} c={level.concurrency}: {run.audio_per_second:.1f} audio s/s, "
            f"{run.requests_per_second:.2f} requests/s, p50 {run.p50:.2f} s"
        )

    def in_order(number: int) -> Sequence[SpeechSystem]:
        return systems if number % 2 == 0 else list(reversed(systems))

    if interleave:
        for index in range(len(levels)):
            for number in range(repeat):
                for system in in_order(number):
                    measure(system, number, index)
    else:
        for number in range(repeat):
            if repeat > 1:
                say(f"round {number + 1} of {repeat}")
            for system in in_order(number):
                for index in range(len(levels)):
                    measure(system, number, index)
                system.close()  # the next system runs alone
    for system in systems:
        system.close()
    return rounds
