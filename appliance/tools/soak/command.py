"""`appliance soak` on the command line: its flags, the soak's settings, the report and the verdict."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from appliance.commands.numbers import SEED, Number

__all__ = ["register", "run"]


def register(subcommands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `soak` to the parser."""
    parser = subcommands.add_parser(
        "soak",
        help="run minutes of mixed traffic against a server and check every answer",
        description="Streaming and non-streaming, text and image requests, early disconnects and "
        "bursts above the queue limit against URL; reports outcomes, lost or malformed answers, and "
        "RSS and open fds of the server's processes (read from /proc: run it on the same machine).",
    )
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="server to soak (default http://127.0.0.1:8000)")
    parser.add_argument("--minutes", type=Number(float, 0, 7 * 24 * 60, low_open=True), default=5.0, help="default 5")
    parser.add_argument("--concurrency", type=Number(int, 1, 10_000), default=8, help="clients at once (default 8)")
    parser.add_argument("--model", default="demo-chat", help="text model (default demo-chat)")
    parser.add_argument("--vision-model", help="also send images to this model (e.g. demo-vision)")
    parser.add_argument(
        "--max-tokens", type=Number(int, 1, 1_000_000), default=48, help="largest max_tokens drawn (default 48)"
    )
    parser.add_argument(
        "--disconnect-fraction",
        type=Number(float, 0, 1),
        default=0.15,
        help="clients that hang up early (default 0.15)",
    )
    parser.add_argument(
        "--burst-every",
        type=Number(float, 0, 86_400, low_open=True),
        default=60.0,
        metavar="S",
        help="seconds between bursts (default 60)",
    )
    parser.add_argument("--api-key", help="bearer key, when the server needs one")
    parser.add_argument("--seed", type=SEED, default=0)
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the report as JSON")
    return parser


def run(args: argparse.Namespace) -> int:
    """Soak, print the report; 0 when it passed, 1 when it did not."""
    import asyncio

    from appliance.tools.soak.traffic import SoakConfig, SoakError, format_report, run_soak

    config = SoakConfig(
        url=args.url.rstrip("/"),
        minutes=args.minutes,
        concurrency=args.concurrency,
        text_model=args.model,
        vision_model=args.vision_model,
        max_tokens=args.max_tokens,
        disconnect_fraction=args.disconnect_fraction,
        burst_every_s=args.burst_every,
        api_key=args.api_key,
        seed=args.seed,
    )
    try:
        report = asyncio.run(run_soak(config))
    except SoakError as exc:
        print(f"appliance soak: {exc}", file=sys.stderr)
        return 2
    print(format_report(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0 if report["passed"] else 1
