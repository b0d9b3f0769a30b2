"""The `--realtime` bench's served turns against the raw ones (`realtime_raw`): per stage and end
to end (the first answer audio), medians in ms and their ratio.

Served times are from the end of speech and include server VAD's silence wait (the
`silence_duration_ms` of silence that ends a turn); that wait is not work, and the raw turn has
none, so the ratio compares the served time *less the wait* with the raw time: `served - wait`
over `raw`, 1.0 when the server costs nothing beyond the stages themselves. The wait taken off is
the one measured in the served turns (`vad_wait`: where VAD ended the turn past the end of the
recording; less than `silence_duration_ms` when the recording ends in quiet, as espeak-ng's does),
else the configured `silence_duration_ms`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Protocol

from appliance.tools.bench.realtime_raw import RawTurn

__all__ = ["COMPARED", "served_against_raw"]

COMPARED = ("transcript", "first_text", "first_sentence", "first_audio")
"""The stages both runs have; `first_audio` is the turn end to end."""


class TurnTimes(Protocol):
    """A served turn (`realtime.TurnTimes`, which imports this module): seconds from the end of
    speech to each stage it reached, and `vad_wait`."""

    seconds: dict[str, float]


def served_against_raw(
    served: Sequence[TurnTimes], raw: Sequence[RawTurn], silence_duration_ms: int
) -> tuple[str, dict[str, dict[str, float]]]:
    """The table and its JSON: per stage, the medians (ms) served, served less the VAD wait, raw,
    and `served_over_raw` (of the served time less the wait); a stage no turn has is left out.
    The wait is the median of the turns' measured `vad_wait` (`silence_duration_ms` for a turn
    without one), in `figures["vad_wait"]`."""
    waits = [turn.seconds.get("vad_wait", silence_duration_ms / 1000) for turn in served]
    wait_seconds = statistics.median(waits) if waits else silence_duration_ms / 1000
    lines = [
        f"served against the stages run raw in one process (served less server VAD's silence wait: "
        f"median {wait_seconds * 1000:.0f} ms past the end of the recording; silence_duration_ms "
        f"{silence_duration_ms}):",
        "",
        "| from the end of speech to | served median ms | served less wait ms | raw median ms | served / raw |",
        "|---|---:|---:|---:|---:|",
    ]
    figures: dict[str, dict[str, float]] = {
        "vad_wait": {"median_ms": round(wait_seconds * 1000, 1), "silence_duration_ms": silence_duration_ms}
    }
    for stage in COMPARED:
        served_ms = [seconds * 1000 for seconds in map(_served_time(stage), served) if seconds is not None]
        raw_ms = [turn.stages[stage] * 1000 for turn in raw]
        if not served_ms or not raw_ms:
            continue
        served_median, raw_median = statistics.median(served_ms), statistics.median(raw_ms)
        less_wait = served_median - wait_seconds * 1000
        row = {
            "served_median_ms": round(served_median, 1),
            "served_less_wait_ms": round(less_wait, 1),
            "raw_median_ms": round(raw_median, 1),
            "served_over_raw": round(less_wait / raw_median, 3) if raw_median > 0 else float("nan"),
        }
        figures[stage] = row
        name = stage.replace("_", " ") + (" (end to end)" if stage == "first_audio" else "")
        lines.append(
            f"| {name} | {served_median:.0f} | {less_wait:.0f} | {raw_median:.0f} | {row['served_over_raw']:.2f} |"
        )
    split = _transcript_split(served, raw, wait_seconds)
    if split:
        figures["transcript_split"] = split
        lines += [
            "",
            f"before the transcript: speech_stopped arrived {split['speech_stopped_ms']:.0f} ms after the end of "
            f"speech ({split['detection_ms']:.0f} ms past VAD's wait: the chunk's arrival and VAD), then the "
            f"transcript {split['transcription_ms']:.0f} ms later against Whisper's {split['raw_transcript_ms']:.0f} "
            "ms raw",
        ]
    if raw:
        lines += ["", f"raw heard: {raw[-1].heard!r}", f"raw said: {raw[-1].said!r}"]
    return "\n".join(lines), figures


def _transcript_split(
    served: Sequence[TurnTimes], raw: Sequence[RawTurn], wait_seconds: float
) -> dict[str, float] | None:
    """Where the served time before the transcript goes (medians, ms): the turn's end seen by the
    client (`speech_stopped`), its part past VAD's silence wait, and the transcription after it
    against raw Whisper; None when the turns lack either event."""
    stopped = [turn.seconds["speech_stopped"] for turn in served if "speech_stopped" in turn.seconds]
    after = [
        turn.seconds["transcript"] - turn.seconds["speech_stopped"]
        for turn in served
        if "speech_stopped" in turn.seconds and "transcript" in turn.seconds
    ]
    if not stopped or not after or not raw:
        return None
    return {
        "speech_stopped_ms": round(statistics.median(stopped) * 1000, 1),
        "detection_ms": round((statistics.median(stopped) - wait_seconds) * 1000, 1),
        "transcription_ms": round(statistics.median(after) * 1000, 1),
        "raw_transcript_ms": round(statistics.median(turn.stages["transcript"] for turn in raw) * 1000, 1),
    }


def _served_time(stage: str) -> Callable[[TurnTimes], float | None]:
    """A served turn's seconds to `stage`; an answer of one sentence has no `first_sentence`: its
    end is the end of the text (`last_text`), as the raw turn counts it."""

    def of(turn: TurnTimes) -> float | None:
        if stage == "first_sentence" and stage not in turn.seconds:
            return turn.seconds.get("last_text")
        return turn.seconds.get(stage)

    return of
