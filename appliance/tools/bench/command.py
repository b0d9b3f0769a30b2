"""`appliance bench` on the command line: its flags, their checks, and where the report goes."""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

from appliance.commands.numbers import SEED, Number, Numbers

__all__ = ["register", "run"]

_COUNT = Number(int, 1, 1_000_000)
_MS = Number(float, 0, 3_600_000, low_open=True)
"""Milliseconds of a goodput target."""


def register(subcommands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `bench` to the parser."""
    parser = subcommands.add_parser(
        "bench",
        help="benchmark a served graph against its raw OpenVINO GenAI pipeline and other servers "
        "(an embedding graph: inputs and tokens per second, served against the raw pipeline)",
        description="Drive an OpenAI-compatible server with streamed, fixed-length requests at each "
        "concurrency level (or open-loop arrival rate), then any peer servers with the same workload, "
        "then the graph's own pipeline in process (no HTTP), and report throughput, goodput, TTFT, "
        "TPOT and ITL for each, with ratios to the raw pipeline.",
    )
    parser.add_argument("--graph", type=Path, required=True, metavar="FILE", help="graph file of the model")
    parser.add_argument(
        "--url", help="an OpenAI-compatible server to drive (default: start `appliance serve` for the graph)"
    )
    parser.add_argument("--model", help="model name to send (default: the graph's name)")
    parser.add_argument("--api-key", metavar="KEY", help="bearer key for --url")
    parser.add_argument(
        "--concurrency",
        type=Numbers(Number(int, 1, 100_000)),
        metavar="N,N,...",
        help="concurrency levels (default 1,4,16; a speech or voice graph 1,4,8)",
    )
    parser.add_argument(
        "--rate",
        type=Numbers(Number(float, 0, 1_000_000, low_open=True)),
        metavar="R,R,...",
        help="open loop: requests arrive as a seeded Poisson process at R per second, one level per rate "
        "(replaces --concurrency)",
    )
    parser.add_argument(
        "--requests",
        type=_COUNT,
        metavar="N",
        help="requests per level (default max(8, 4 x concurrency); open loop max(16, 10 x rate); "
        "embeddings max(64, 4 x concurrency); speech max(8, 3 x concurrency))",
    )
    parser.add_argument(
        "--multi-turn",
        type=Number(int, 1, 1000),
        default=1,
        metavar="N",
        help="chat conversations of N turns over /v1/chat/completions, each turn sending the history "
        "so far: TTFT per turn, and the appliance with prefix caching on against off (closed loop; "
        "--requests counts conversations; no raw baseline)",
    )
    parser.add_argument(
        "--system-tokens",
        type=_COUNT,
        metavar="N",
        help="with --multi-turn: each conversation opens with a system message of N tokens of its own, as a "
        "coding agent's session does (its instructions and tool schemas, sent again on every turn)",
    )
    parser.add_argument("--prompt-tokens", type=_COUNT, metavar="N", help="default 128")
    parser.add_argument("--output-tokens", type=_COUNT, metavar="N", help="default 128")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--plot", type=Path, metavar="FILE", help="also draw throughput and TTFT (PNG)")
    parser.add_argument("--no-raw", action="store_true", help="skip the raw pipeline baseline")
    parser.add_argument(
        "--no-appliance", action="store_true", help="do not start the appliance: measure only the peers and raw"
    )
    parser.add_argument("--seed", type=SEED, default=0, metavar="N", help="prompts and arrival schedule (default 0)")
    parser.add_argument(
        "--repeat",
        type=Number(int, 1, 1000),
        default=1,
        metavar="N",
        help="measure every system N times, taking turns each round, and report the spread (the table "
        "shows each system's median round; default 1)",
    )
    parser.add_argument(
        "--interleave",
        action="store_true",
        help="start every system at once and take turns level by level and round by round, so each "
        "ratio compares runs seconds apart (a shared host drifts within a minute); every model is in "
        "memory at once (the appliance's, the peers', the raw pipeline's)",
    )
    parser.add_argument(
        "--goodput-ttft", type=_MS, default=1000.0, metavar="MS", help="goodput's TTFT target (default 1000 ms)"
    )
    parser.add_argument(
        "--goodput-tpot", type=_MS, default=100.0, metavar="MS", help="goodput's TPOT target (default 100 ms)"
    )
    parser.add_argument(
        "--realtime",
        action="store_true",
        help="a chat graph naming a speech_model and a voice_model: a spoken turn's latencies over /v1/realtime "
        "(end of speech to the transcript, the first answer text and audio), --requests turns (default 5), "
        "--audio the recording",
    )
    speech = parser.add_argument_group("speech: a speech-to-text graph (POST /v1/audio/transcriptions)")
    speech.add_argument(
        "--audio",
        type=Path,
        metavar="FILE",
        help="the clip each request's recording repeats (any format the server decodes; default: a packaged "
        '2.1 s wav of "The capital of France is Paris.")',
    )
    speech.add_argument(
        "--audio-seconds",
        type=Number(float, 0, 4 * 3600, low_open=True),
        metavar="S",
        help="each request's recording: the clip repeated with 0.5 s of silence, as many times as comes nearest "
        "S seconds (default 30)",
    )
    speech.add_argument(
        "--faster-whisper",
        metavar="TYPE,TYPE,...",
        help="faster-whisper's compute types measured as peers on the same tiny.en weights (default "
        "int8,float32; none: no peer)",
    )
    voice = parser.add_argument_group("voice: a text-to-speech graph (POST /v1/audio/speech)")
    voice.add_argument(
        "--text-sentences",
        type=Number(int, 1, 200),
        metavar="N",
        help="sentences in each request's text (default 8: about 30 s of speech)",
    )
    peers = parser.add_argument_group("peers: other OpenAI-compatible servers measured in the same run")
    peers.add_argument(
        "--peer", action="append", default=[], metavar="NAME=URL", help="a server already running at URL"
    )
    peers.add_argument(
        "--peer-command",
        action="append",
        default=[],
        metavar="NAME=COMMAND",
        help="a shell command that starts a server, run for the peer's turn only; {port} in it becomes a "
        "free port and the URL http://127.0.0.1:{port}",
    )
    peers.add_argument(
        "--peer-url",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="where a --peer-command without {port} listens",
    )
    peers.add_argument(
        "--peer-model",
        action="append",
        default=[],
        metavar="NAME=MODEL",
        help="model name to send to a peer (default: --model, or the graph's name)",
    )
    peers.add_argument(
        "--peer-timeout",
        type=Number(float, 0, 86_400, low_open=True),
        default=300.0,
        metavar="S",
        help="seconds a --peer-command gets to answer GET /v1/models (default 300)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the benchmark and print its table; 1 when the server did not start or refused the
    workload, ValueError (exit 2) for flags out of range."""
    # Each flag's range was checked as it was read (`commands.numbers`).
    levels = args.concurrency or (1, 4, 16)
    rates = args.rate or ()
    _check_multi_turn(args)
    if args.no_appliance and args.url:
        raise ValueError("--no-appliance and --url: the server at --url is the appliance's turn")
    from appliance.graphfiles import load_graph
    from appliance.tools.bench.metrics import Slo
    from appliance.tools.bench.peers import parse_peers
    from appliance.tools.bench.plot import write_plot
    from appliance.tools.bench.runner import BenchOptions, run_bench

    task = load_graph(args.graph).task
    if args.realtime:
        from appliance.tools.bench.realtime import run_realtime

        return run_realtime(args)
    speech_flags = [flag for flag, value in _speech_flags(args).items() if value is not None]
    if task == "transcribe":
        from appliance.tools.bench.speech_command import run_speech

        return run_speech(args, levels if args.concurrency else (1, 4, 8))
    if speech_flags:
        raise ValueError(f"{', '.join(speech_flags)}: only for a speech-to-text graph")
    if task == "synthesize":
        from appliance.tools.bench.speech_command import refuse_other_flags
        from appliance.tools.bench.voice import run_voice

        refuse_other_flags(args, "a text-to-speech graph")
        return run_voice(args, load_graph(args.graph), levels if args.concurrency else (1, 4, 8))
    if args.text_sentences is not None:
        raise ValueError("--text-sentences: only for a text-to-speech graph")
    args.prompt_tokens = 128 if args.prompt_tokens is None else args.prompt_tokens
    args.output_tokens = 128 if args.output_tokens is None else args.output_tokens
    if task == "embed":
        return _run_embeddings(args, levels)
    peers = parse_peers(args.peer, args.peer_command, args.peer_url, args.peer_model)

    options = BenchOptions(
        graph=args.graph,
        url=args.url,
        model=args.model,
        concurrency=levels,
        rates=rates,
        requests=args.requests,
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        raw=not args.no_raw,
        appliance=not args.no_appliance,
        api_key=args.api_key,
        seed=args.seed,
        peers=tuple(peers),
        peer_timeout=args.peer_timeout,
        slo=Slo(ttft_ms=args.goodput_ttft, tpot_ms=args.goodput_tpot),
        turns=args.multi_turn,
        system_tokens=args.system_tokens or 0,
        repeat=args.repeat,
        interleave=args.interleave,
    )
    try:
        report = run_bench(options)
    except RuntimeError as exc:  # a server did not start, or refused the workload
        print(f"appliance bench: {exc}", file=sys.stderr)
        return 1
    print(report.table())
    if args.json:
        report.write_json(args.json)
    if args.plot:
        write_plot(report, args.plot)
    return 0


def _run_embeddings(args: argparse.Namespace, levels: tuple[int, ...]) -> int:
    """An embedding graph: inputs and tokens per second served against the raw pipeline."""
    from contextlib import nullcontext

    from appliance.graphfiles import load_graph
    from appliance.tools.bench.embeddings import RawEmbedder, rounds_table, run_embedding_bench, table
    from appliance.tools.bench.local_server import LocalServer

    # The embeddings bench is a closed loop of one server against its raw pipeline: a flag of the
    # chat bench it cannot honour is refused rather than ignored.
    chat_only = {
        "--rate": args.rate,
        "--multi-turn": args.multi_turn != 1,
        "--json": args.json,
        "--plot": args.plot,
        "--peer": args.peer,
        "--peer-command": args.peer_command,
        "--no-appliance": args.no_appliance,
    }
    given = [flag for flag, value in chat_only.items() if value]
    if given:
        raise ValueError(
            f"{', '.join(given)}: not measured for an embedding graph (a closed loop against its raw pipeline)"
        )
    graph = load_graph(args.graph)
    say = functools.partial(print, file=sys.stderr, flush=True)
    rounds = []
    with nullcontext(args.url) if args.url else LocalServer(graph) as url:
        # --interleave keeps one raw pipeline loaded beside the server; otherwise each round loads
        # its own after the server's levels.
        kept = RawEmbedder(graph, say) if args.interleave else None
        for number in range(args.repeat):
            if args.repeat > 1:
                say(f"round {number + 1} of {args.repeat}")
            results = run_embedding_bench(
                graph,
                url,
                levels,
                requests=args.requests,
                prompt_tokens=args.prompt_tokens,
                seed=args.seed,
                raw=None if args.no_raw else kept or RawEmbedder(graph, say),
                raw_first=number % 2 == 1,
                interleave=args.interleave,
                model=args.model,
                api_key=args.api_key,
                say=say,
            )
            print(table(results))
            rounds.append(results)
    if len(rounds) > 1 and not args.no_raw:
        print(rounds_table(rounds))
    return 0


def _speech_flags(args: argparse.Namespace) -> dict[str, object]:
    return {"--audio": args.audio, "--audio-seconds": args.audio_seconds, "--faster-whisper": args.faster_whisper}


def _check_multi_turn(args: argparse.Namespace) -> None:
    """--multi-turn's range and the flags it cannot go with (ValueError names them)."""
    if args.multi_turn == 1:
        if args.system_tokens:
            raise ValueError("--system-tokens opens each conversation of --multi-turn: give --multi-turn too")
        return
    if args.rate:
        raise ValueError("--multi-turn runs a closed loop of conversations: use --concurrency, not --rate")
    if args.plot:
        raise ValueError("--multi-turn has no plot: its TTFT per turn is in the table and --json")
