"""The `--realtime` bench's served turns against the raw ones (`realtime_raw`): per stage and end
to end (the first answer audio), medians in ms and their ratio.

Served times are from the end of speech and include server VAD's silence wait (the
`silence_duration_ms` of silence that ends a turn); that wait is not work, and the raw turn has
none, so the ratio compares the served time *less the configured wait* with the raw time:
`served - wait` over `raw`, 1.0 when the server costs nothing beyond the stages themselves.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from appliance.tools.bench.realtime import TurnTimes
from appliance.tools.bench.realtime_raw import RawTurn

__all__ = ["COMPARED", "served_against_raw"]

COMPARED = ("transcript", "first_text", "first_sentence", "first_audio")
"""The stages both runs have; `first_audio` is the turn end to end."""


def served_against_raw(
    served: Sequence[TurnTimes], raw: Sequence[RawTurn], wait_seconds: float
) -> tuple[str, dict[str, dict[str, float]]]:
    """The table and its JSON: per stage, the medians (ms) served, served less `wait_seconds`,
    raw, and `served_over_raw` (of the served time less the wait). A stage missing from every
    served turn (`first_sentence` when answers are one sentence) is left out."""
    lines = [
        f"served against the stages run raw in one process (served less the VAD wait of {wait_seconds * 1000:.0f} ms):",
        "",
        "| from the end of speech to | served median ms | served less wait ms | raw median ms | served / raw |",
        "|---|---:|---:|---:|---:|",
    ]
    figures: dict[str, dict[str, float]] = {}
    for stage in COMPARED:
        served_ms = [turn.seconds[stage] * 1000 for turn in served if stage in turn.seconds]
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
    if raw:
        lines += ["", f"raw heard: {raw[-1].heard!r}", f"raw said: {raw[-1].said!r}"]
    return "\n".join(lines), figures
