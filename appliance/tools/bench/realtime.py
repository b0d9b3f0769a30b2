"""`appliance bench --graph <chat graph> --realtime`: a live voice turn's latencies over the
Realtime API, as a caller on a kiosk would feel them.

A websocket client (`/v1/realtime?model=...`, the GA events) streams a recording (`--audio`, by
default the packaged espeak-ng "The capital of France is Paris.") at real-time pace, in 100 ms
chunks each sent when its last sample would have been captured, then silence, as a microphone
does; server VAD decides the turn has ended, the chat graph's `speech_model` transcribes it and
the chat model answers, spoken by its `voice_model`. Measured from the end of speech (the moment
the recording's last sample was captured):

- `speech stopped`: server VAD's `input_audio_buffer.speech_stopped` arrives (the turn has ended:
  its silence wait, the 100 ms chunks' arrival and VAD's own time);
- `transcript`: the turn's final transcript arrives
  (`conversation.item.input_audio_transcription.completed`; it includes server VAD's
  `silence_duration_ms`, 500 ms by default: the silence that ends a turn);
- `first text`: the answer's first words (`response.output_audio_transcript.delta`);
- `first sentence`: the delta that completes the answer's first sentence (what the voice waits
  for; an answer of one sentence has none: its end is the end of the text, `last text`);
- `first audio`: the answer's first audio (`response.output_audio.delta`);
- `last text`: the answer's last words;
- `done`: `response.done`;
- `vad_wait` (not a stage): where server VAD ended the turn (`speech_stopped`'s `audio_end_ms`)
  past the end of the recording, the part of the times above that is silence waited for.

Each round is a new session; the first is a warm-up, not measured. Then a neighbour streams chat
completions from the same model (`realtime_neighbour`), alone and while as many turns run again:
its largest gap between chunks says what the live sessions cost the server's other clients. The chat graph, its speech and
voice graphs are served together (`LocalServer`'s companions) unless `--url` names a server.

Unless `--no-raw`, the server stopped, the same utterance then runs through the same stages raw in
this process (`realtime_raw`: Whisper, the chat model, the voice), and the report sets each stage
served, less server VAD's silence wait, against raw (`realtime_figures`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from appliance.dialects.realtime.speaking import Sentences

__all__ = ["TurnTimes", "companion_graphs", "measure_turns", "report", "run_realtime"]

CHUNK_SECONDS = 0.1
OUTPUT_TOKENS = 64
_STAGES = ("speech_stopped", "transcript", "first_text", "first_sentence", "first_audio", "last_text", "done")
_EVENTS = {
    "input_audio_buffer.speech_stopped": "speech_stopped",
    "conversation.item.input_audio_transcription.completed": "transcript",
    "response.output_audio_transcript.delta": "first_text",
    "response.output_text.delta": "first_text",
    "response.output_audio.delta": "first_audio",
    "response.done": "done",
}


@dataclass
class TurnTimes:
    """One turn: seconds from the end of speech to each stage, and what was heard and said."""

    seconds: dict[str, float] = field(default_factory=dict)
    heard: str = ""
    said: str = ""


async def _turn(url: str, model: str, api_key: str | None, speech: bytes, timeout: float) -> TurnTimes:
    from websockets.asyncio.client import connect

    socket_url = url.replace("http://", "ws://").replace("https://", "wss://") + f"/v1/realtime?model={model}"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    times = TurnTimes()
    sentences = Sentences()
    async with connect(socket_url, additional_headers=headers, max_size=None) as socket:
        update = {"type": "realtime", "max_output_tokens": OUTPUT_TOKENS}
        await socket.send(json.dumps({"type": "session.update", "session": update}))
        chunk = int(2 * 24_000 * CHUNK_SECONDS)
        silence = bytes(chunk)
        # Whole chunks, as a microphone sends: the recording's last piece is filled with silence
        # (sent short, it arrived a whole chunk's time after the one before, and every later
        # sample that much after its capture: 52 ms for the packaged recording).
        padded = speech + bytes(-len(speech) % chunk)
        started = time.monotonic()
        speech_end = started + len(speech) / 48_000
        done = asyncio.Event()

        async def send_audio() -> None:
            sent = 0
            while not done.is_set():
                piece = padded[sent : sent + chunk] if sent < len(padded) else silence
                sent += chunk
                # Sent when its last sample would have been captured, as a microphone's would.
                await asyncio.sleep(max(0.0, started + sent / 48_000 - time.monotonic()))
                await socket.send(
                    json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(piece).decode()})
                )

        sender = asyncio.ensure_future(send_audio())
        try:
            async with asyncio.timeout(timeout):
                async for message in socket:
                    event = json.loads(message)
                    kind = event.get("type")
                    if kind == "error":
                        raise RuntimeError(f"the server answered an error: {event['error'].get('message')}")
                    stage = _EVENTS.get(kind)
                    if stage is not None and stage not in times.seconds:
                        times.seconds[stage] = time.monotonic() - speech_end
                    if kind == "input_audio_buffer.speech_stopped" and "audio_end_ms" in event:
                        # Server VAD's silence wait past the end of the recording (part of the
                        # silence it waits for may be the recording's own trailing quiet).
                        times.seconds["vad_wait"] = event["audio_end_ms"] / 1000 - len(speech) / 48_000
                    if kind == "response.output_audio_transcript.delta":
                        times.seconds["last_text"] = time.monotonic() - speech_end
                        if sentences.feed(event.get("delta", "")):
                            times.seconds.setdefault("first_sentence", times.seconds["last_text"])
                    if stage == "transcript":
                        times.heard = event.get("transcript", "")
                    elif kind == "response.output_audio_transcript.done":
                        times.said = event.get("transcript", "")
                    elif kind == "response.done":
                        return times
        finally:
            done.set()
            sender.cancel()
    raise RuntimeError("the session ended before response.done")


def measure_turns(
    url: str, model: str, api_key: str | None, speech: bytes, rounds: int, say, timeout: float = 300.0
) -> tuple[list[TurnTimes], list[TurnTimes], dict[str, list[float]]]:
    """`rounds` measured turns after one warm-up, each a new session; then the neighbour's streams
    alone, then `rounds` more turns while it streams (returned second); the neighbour's largest
    gaps, `alone` and `beside` the turns."""
    from appliance.tools.bench.realtime_neighbour import stream_gaps

    async def measure() -> tuple[list[TurnTimes], list[TurnTimes], dict[str, list[float]]]:
        turns = []
        for number in range(rounds + 1):
            turn = await _turn(url, model, api_key, speech, timeout)
            say(f"turn {number}{' (warm-up)' if number == 0 else ''}: " + _line(turn))
            if number:
                turns.append(turn)
        alone = await stream_gaps(url, model, api_key, streams=max(3, rounds))
        stop, beside = asyncio.Event(), []
        neighbour = asyncio.ensure_future(stream_gaps(url, model, api_key, stop=stop))
        try:
            for number in range(rounds):
                turn = await _turn(url, model, api_key, speech, timeout)
                say(f"turn {number + 1} beside the neighbour: " + _line(turn))
                beside.append(turn)
        finally:
            stop.set()
        return turns, beside, {"alone": alone, "beside": await neighbour}

    return asyncio.run(measure())


def _line(turn: TurnTimes) -> str:
    return ", ".join(f"{stage} {turn.seconds.get(stage, float('nan')):.3f} s" for stage in _STAGES)


def report(turns: list[TurnTimes], header: str) -> tuple[str, dict]:
    """The table (median, min, max of each stage, in ms) and the same as JSON."""
    lines = [header, "", "| from the end of speech to | median ms | min ms | max ms |", "|---|---:|---:|---:|"]
    summary: dict[str, dict[str, float]] = {}
    for stage in _STAGES:
        values = [turn.seconds[stage] * 1000 for turn in turns if stage in turn.seconds]
        if not values:
            continue
        summary[stage] = {"median_ms": statistics.median(values), "min_ms": min(values), "max_ms": max(values)}
        row = summary[stage]
        lines.append(
            f"| {stage.replace('_', ' ')} | {row['median_ms']:.0f} | {row['min_ms']:.0f} | {row['max_ms']:.0f} |"
        )
    if turns:
        lines += ["", f"heard: {turns[-1].heard!r}", f"said: {turns[-1].said!r}"]
    return "\n".join(lines), {"stages": summary, "turns": [turn.__dict__ for turn in turns]}


def companion_graphs(graph_file: Path, names: list[str]) -> list[Path]:
    """The graph files beside `graph_file` that serve `names` (its speech and voice models)."""
    import tomllib

    found = {}
    for candidate in sorted(graph_file.parent.glob("*.toml")):
        try:
            text = tomllib.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            continue
        for name in (text.get("name"), *text.get("aliases", ())):
            if name in names:
                found.setdefault(name, candidate)
    missing = [name for name in names if name not in found]
    if missing:
        raise ValueError(f"{', '.join(missing)}: no graph file beside {graph_file} serves it")
    return [found[name] for name in names]


def run_realtime(args) -> int:
    """The `--realtime` bench of a chat graph that names a speech and a voice model; 1 when the
    server did not start or answered an error, ValueError for a graph that cannot talk."""
    import functools
    import sys
    from contextlib import nullcontext

    from appliance.dialects.realtime.speaking import pcm16
    from appliance.dialects.realtime.turns import VadSettings
    from appliance.graphfiles import load_graph
    from appliance.tools.bench.local_server import LocalServer
    from appliance.tools.bench.machine import describe_machine, machine_line
    from appliance.tools.bench.realtime_figures import served_against_raw
    from appliance.tools.bench.realtime_neighbour import NEIGHBOUR_PROMPT, gap_summary
    from appliance.tools.bench.realtime_raw import measure_raw_turns
    from appliance.tools.bench.recording import DEFAULT_CLIP, SAMPLE_RATE, load_clip
    from appliance.tools.bench.speech_command import refuse_other_flags

    refuse_other_flags(args, "--realtime")
    loads = (
        args.audio_seconds,
        args.faster_whisper,
        args.concurrency,
        args.repeat != 1 or None,
        args.interleave or None,
    )
    if any(flag is not None for flag in loads):
        raise ValueError(
            "--realtime measures one turn at a time with --requests turns and --audio: no other load flags"
        )
    graph = load_graph(args.graph)
    if graph.task != "generate" or graph.speech_model is None or graph.voice_model is None:
        raise ValueError("--realtime: the graph must be a chat graph naming a speech_model and a voice_model")
    say = functools.partial(print, file=sys.stderr, flush=True)
    clip_path = args.audio or DEFAULT_CLIP
    samples = load_clip(clip_path)
    speech = pcm16(samples, SAMPLE_RATE)  # the Realtime API's input: pcm16 at 24 kHz
    rounds = args.requests or 5
    needs_graphs = not args.url or not args.no_raw
    companions = tuple(companion_graphs(args.graph, [graph.speech_model, graph.voice_model])) if needs_graphs else ()
    try:
        with nullcontext(args.url) if args.url else LocalServer(graph, companions=companions) as url:
            turns, beside, gaps = measure_turns(url, args.model or graph.name, args.api_key, speech, rounds, say)
        # After the server stopped: the same stages in this process, nothing else running.
        raw = (
            []
            if args.no_raw
            else measure_raw_turns(
                graph, *map(load_graph, companions), samples, rounds, output_tokens=OUTPUT_TOKENS, say=say
            )
        )
    except (RuntimeError, OSError, TimeoutError) as exc:
        print(f"appliance bench: {exc}", file=sys.stderr)
        return 1
    header = (
        f"realtime bench: {graph.name} (heard by {graph.speech_model}, spoken by {graph.voice_model}); "
        f"{machine_line(describe_machine(graph.device))}\n"
        f"each turn: {clip_path.name} ({len(speech) / 48_000:.1f} s) streamed at real-time pace in "
        f"{CHUNK_SECONDS * 1000:.0f} ms chunks, then silence; server VAD defaults (silence_duration_ms 500); "
        f"answers up to {OUTPUT_TOKENS} tokens; {rounds} turns after a warm-up, each a new session"
    )
    table, summary = report(turns, header)
    beside_table, summary["beside_neighbour"] = report(
        beside, f"the same turns while a neighbour streamed from {graph.name}:"
    )
    summary["neighbour"] = {phase: gap_summary(values) for phase, values in gaps.items()}
    alone, during = summary["neighbour"]["alone"], summary["neighbour"]["beside"]
    print(table + "\n\n" + beside_table)
    if raw:
        against_raw, summary["served_against_raw"] = served_against_raw(turns, raw, VadSettings().silence_duration_ms)
        summary["raw_turns"] = [{"stages": turn.stages, "heard": turn.heard, "said": turn.said} for turn in raw]
        print("\n" + against_raw)
    print(
        f"\nthe neighbour ({NEIGHBOUR_PROMPT!r}, streamed back to back), its largest gap between chunks: "
        f"alone median {alone.get('median_ms', 0):.0f} ms, max {alone.get('max_ms', 0):.0f} ms "
        f"({alone['streams']} streams); while the turns ran median {during.get('median_ms', 0):.0f} ms, "
        f"max {during.get('max_ms', 0):.0f} ms ({during['streams']} streams)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"graph": graph.name, **summary}, indent=2), encoding="utf-8")
    return 0
