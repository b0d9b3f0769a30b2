"""`appliance bench` on the command line: its flags, their checks, and where the report goes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["register", "run"]


def register(subcommands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `bench` to the parser."""
    parser = subcommands.add_parser(
        "bench",
        help="benchmark a served graph against its raw OpenVINO GenAI pipeline",
        description="Drive an OpenAI-compatible server with streamed, fixed-length requests at each "
        "concurrency level, then run the same workload on the graph's own pipeline in process "
        "(no HTTP), and report throughput, TTFT, TPOT and ITL for both.",
    )
    parser.add_argument("--graph", type=Path, required=True, metavar="FILE", help="graph file of the model")
    parser.add_argument(
        "--url", help="an OpenAI-compatible server to drive (default: start `appliance serve` for the graph)"
    )
    parser.add_argument("--model", help="model name to send (default: the graph's name)")
    parser.add_argument("--api-key", metavar="KEY", help="bearer key for --url")
    parser.add_argument(
        "--concurrency", default="1,4,16", metavar="N,N,...", help="concurrency levels (default 1,4,16)"
    )
    parser.add_argument("--requests", type=int, metavar="N", help="requests per level (default max(8, 4 x level))")
    parser.add_argument("--prompt-tokens", type=int, default=128, metavar="N", help="default 128")
    parser.add_argument("--output-tokens", type=int, default=128, metavar="N", help="default 128")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--plot", type=Path, metavar="FILE", help="also draw throughput and TTFT (PNG)")
    parser.add_argument("--no-raw", action="store_true", help="skip the raw pipeline baseline")
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the benchmark and print its table; 1 when the server did not start or refused the
    workload, ValueError (exit 2) for flags out of range."""
    levels = _levels(args)
    from appliance.tools.bench.plot import write_plot
    from appliance.tools.bench.runner import BenchOptions, run_bench

    options = BenchOptions(
        graph=args.graph,
        url=args.url,
        model=args.model,
        concurrency=levels,
        requests=args.requests,
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        raw=not args.no_raw,
        api_key=args.api_key,
    )
    try:
        report = run_bench(options)
    except RuntimeError as exc:  # the server did not start, or refused the workload
        print(f"appliance bench: {exc}", file=sys.stderr)
        return 1
    print(report.table())
    if args.json:
        report.write_json(args.json)
    if args.plot:
        write_plot(report, args.plot)
    return 0


def _levels(args: argparse.Namespace) -> tuple[int, ...]:
    """The concurrency levels, after checking them and the counts (ValueError names the flag)."""
    try:
        levels = tuple(int(level) for level in args.concurrency.split(",") if level.strip())
    except ValueError:
        raise ValueError(f"--concurrency {args.concurrency!r}: expected numbers like 1,4,16") from None
    if not levels or min(levels) < 1 or min(args.prompt_tokens, args.output_tokens, args.requests or 1) < 1:
        raise ValueError("--concurrency, --requests and the token counts must be positive")
    return levels
