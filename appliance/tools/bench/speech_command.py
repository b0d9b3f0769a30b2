"""`appliance bench --graph <speech-to-text graph>`: the flags it takes and refuses, the systems it
starts, and where its report goes (see `speech` for the workload and the baseline)."""

from __future__ import annotations

import argparse
import functools
import sys
from contextlib import nullcontext

__all__ = ["refuse_other_flags", "run_speech"]

_DEFAULT_AUDIO_SECONDS = 30.0
_DEFAULT_COMPUTE_TYPES = "int8,float32"


def run_speech(args: argparse.Namespace, levels: tuple[int, ...]) -> int:
    """Measure the served graph, its raw pipeline and faster-whisper; print the report. 1 when a
    system failed (the server did not start or answered an error), ValueError for bad flags."""
    refuse_other_flags(args, "a speech-to-text graph")
    seconds = _DEFAULT_AUDIO_SECONDS if args.audio_seconds is None else args.audio_seconds
    compute_types = _compute_types(args.faster_whisper)

    from appliance.graphfiles import load_graph
    from appliance.tools.bench.http import HTTPError
    from appliance.tools.bench.local_server import LocalServer
    from appliance.tools.bench.machine import describe_machine, machine_line
    from appliance.tools.bench.recording import DEFAULT_CLIP, SAID, build_recording, load_clip
    from appliance.tools.bench.speech import hear_all, run_speech_bench
    from appliance.tools.bench.speech_report import heard_table, report_json, rounds_table, table, write_json
    from appliance.tools.bench.speech_systems import FasterWhisper, RawWhisper, ServedSpeech, faster_whisper_missing

    graph = load_graph(args.graph)
    say = functools.partial(print, file=sys.stderr, flush=True)
    clip_path = args.audio or DEFAULT_CLIP
    clip = load_clip(clip_path)
    recording = build_recording(clip, seconds)
    reference = None if args.audio else SAID
    skipped: dict[str, str] = {}
    peers = []
    if compute_types:
        missing = faster_whisper_missing()
        if missing:
            skipped["faster-whisper"] = missing
            say(f"faster-whisper peer skipped: {missing}")
        else:
            peers = [FasterWhisper(compute_type, say) for compute_type in compute_types]
    machine = describe_machine(graph.device)
    try:
        with nullcontext(args.url) if args.url else LocalServer(graph) as url:
            systems = [ServedSpeech(url, args.model or graph.name, args.api_key)]
            if not args.no_raw:
                systems.append(RawWhisper(graph, say))
            systems += peers
            heard = hear_all(systems, clip, reference, keep_loaded=args.interleave)
            rounds = run_speech_bench(
                systems,
                levels,
                recording,
                requests=args.requests,
                repeat=args.repeat,
                interleave=args.interleave,
                say=say,
            )
    except (RuntimeError, OSError, HTTPError) as exc:  # a server that did not start or answered an error
        print(f"appliance bench: {exc}", file=sys.stderr)
        return 1
    names = [system.name for system in systems]
    print(f"speech bench: {graph.name}; {machine_line(machine)}")
    print(
        f"each request: {recording.seconds:.1f} s of audio ({clip_path.name}, {recording.clip_seconds:.1f} s, "
        f"x {recording.repeats}, 0.5 s apart); raw = the graph's WhisperPipeline, one generate at a time, "
        "back to back\n"
    )
    if skipped:
        print("".join(f"skipped {name}: {why}\n" for name, why in skipped.items()))
    print(heard_table(heard, reference) + "\n")
    for number, levels_of_round in enumerate(rounds, 1):
        if len(rounds) > 1:
            print(f"round {number} of {len(rounds)}\n")
        print(table(levels_of_round, names) + "\n")
    if len(rounds) > 1 and len(names) > 1:
        print(rounds_table(rounds, names))
    if args.json:
        report = report_json(
            graph=graph.name,
            machine=machine,
            recording=recording,
            clip=str(clip_path),
            heard=heard,
            systems=names,
            skipped=skipped,
            rounds=rounds,
            interleave=args.interleave,
        )
        write_json(report, args.json)
    return 0


def refuse_other_flags(args: argparse.Namespace, kind: str) -> None:
    """The chat bench's flags a speech or voice graph (`kind`) cannot honour are refused, not ignored."""
    chat_only = {
        "--rate": args.rate,
        "--multi-turn": args.multi_turn != 1,
        "--prompt-tokens": args.prompt_tokens is not None,
        "--output-tokens": args.output_tokens is not None,
        "--plot": args.plot,
        "--peer": args.peer,
        "--peer-command": args.peer_command,
        "--peer-url": args.peer_url,
        "--peer-model": args.peer_model,
        "--no-appliance": args.no_appliance,
    }
    given = [flag for flag, value in chat_only.items() if value]
    if given:
        raise ValueError(
            f"{', '.join(given)}: not measured for {kind} (a closed loop of requests against its raw pipeline)"
        )


def _compute_types(given: str | None) -> tuple[str, ...]:
    """faster-whisper's compute types from --faster-whisper (none: no peer)."""
    text = _DEFAULT_COMPUTE_TYPES if given is None else given
    if text.strip().lower() == "none":
        return ()
    types = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    known = {"int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16", "float32"}
    unknown = [name for name in types if name not in known]
    if not types or unknown:
        raise ValueError(f"--faster-whisper {given!r}: compute types among {', '.join(sorted(known))}, or none")
    return types
