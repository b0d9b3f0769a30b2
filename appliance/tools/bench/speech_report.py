"""The speech bench's report: what each system heard, a table per round, the rounds' spread of
the ratios, and the same as JSON."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from appliance.tools.bench.recording import Recording
from appliance.tools.bench.speech import Heard
from appliance.tools.bench.speech_figures import SpeechLevel

__all__ = ["heard_table", "report_json", "rounds_table", "table", "write_json"]


def heard_table(heard: Heard, reference: str | None) -> str:
    """Each system's text for the clip alone, with its word error rate when the clip's words are known."""
    said = f' (said: "{reference}")' if reference else " (--audio: its words are not known, so no error rate)"
    lines = [f"heard the clip once, alone{said}", "", "| system | heard | word error rate |", "|---|---|---|"]
    for name, (text, rate) in heard.items():
        shown = text.strip().replace("|", "\\|")
        lines.append(f"| {name} | {shown} | {'-' if rate is None else f'{rate:.2f}'} |")
    return "\n".join(lines)


def table(levels: list[SpeechLevel], systems: list[str]) -> str:
    """One round as a Markdown table: a row per level and system; `served / this` is served's
    audio seconds per second over the row's."""
    lines = [
        "| concurrency | system | requests | audio s per s (RTF) | requests/s | p50 latency s | p95 latency s "
        "| words heard | served / this |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for level in levels:
        for name in systems:
            run = level.runs.get(name)
            if run is None:
                continue
            ratio = "" if name == "served" else f"{level.served_over(name):.2f}"
            lines.append(
                f"| {level.concurrency} | {name} | {run.requests} | {run.audio_per_second:.1f} "
                f"| {run.requests_per_second:.2f} | {run.p50:.2f} | {run.p95:.2f} | {run.words} | {ratio} |"
            )
    return "\n".join(lines)


def rounds_table(rounds: list[list[SpeechLevel]], systems: list[str]) -> str:
    """served / each other system in every round, per level, their median and spread: on a shared
    machine one round decides little."""
    lines = ["| concurrency | served / | per round | median | spread (max - min) |", "|---|---|---|---|---|"]
    for index, first in enumerate(rounds[0]):
        for name in systems:
            if name == "served":
                continue
            ratios = [levels[index].served_over(name) for levels in rounds]
            lines.append(
                f"| {first.concurrency} | {name} | {', '.join(f'{ratio:.2f}' for ratio in ratios)} "
                f"| {statistics.median(ratios):.2f} | {max(ratios) - min(ratios):.2f} |"
            )
    return "\n".join(lines)


def report_json(
    *,
    graph: str,
    machine: dict[str, object],
    recording: Recording,
    clip: str,
    heard: Heard,
    systems: list[str],
    skipped: dict[str, str],
    rounds: list[list[SpeechLevel]],
    interleave: bool,
) -> dict[str, Any]:
    """Everything measured: per level, each system's figures in every round and their medians, and
    served's ratio to each other system (per round and median)."""
    levels = []
    for index, first in enumerate(rounds[0]):
        per_system: dict[str, Any] = {}
        for name in systems:
            runs = [level[index].runs[name] for level in rounds if name in level[index].runs]
            if not runs:
                continue
            figures = [run.as_dict() for run in runs]
            entry: dict[str, Any] = {
                "rounds": figures,
                "median": {key: statistics.median(f[key] for f in figures) for key in figures[0]},
            }
            if name != "served" and "served" in systems:
                ratios = [level[index].served_over(name) for level in rounds]
                entry["served_over_this"] = [round(ratio, 4) for ratio in ratios]
                entry["served_over_this_median"] = round(statistics.median(ratios), 4)
            per_system[name] = entry
        levels.append({"concurrency": first.concurrency, "requests": first.requests, "systems": per_system})
    return {
        "graph": graph,
        "machine": machine,
        "recording": {
            "clip": clip,
            "clip_seconds": round(recording.clip_seconds, 3),
            "repeats": recording.repeats,
            "seconds": round(recording.seconds, 3),
        },
        "heard": {name: {"text": text, "word_error_rate": rate} for name, (text, rate) in heard.items()},
        "systems": systems,
        "skipped": skipped,
        "repeat": len(rounds),
        "interleave": interleave,
        "levels": levels,
    }


def write_json(report: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
