"""`appliance models [list | load NAME | unload NAME]`: a running server's models, loaded and
unloaded, over its admin routes (`/admin/models`): what an operator types on the box itself."""

from __future__ import annotations

import argparse
import json
import sys

from appliance.commands.numbers import Number
from appliance.settings import MAX_DRAIN_SECONDS

__all__ = ["register", "run"]


def register(subcommands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `models` to the parser."""
    parser = subcommands.add_parser(
        "models",
        help="list, load or unload the models of a running server",
        description="List a running server's models with their state, memory and idle time, or load "
        "or unload one (through its admin routes: from the machine itself, or with --admin-key).",
    )
    parser.add_argument("action", nargs="?", choices=("list", "load", "unload"), default="list")
    parser.add_argument("name", nargs="?", help="the model to load or unload")
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the server (default http://127.0.0.1:8000)")
    parser.add_argument("--admin-key", metavar="KEY", help="an admin key, for a server that has them")
    parser.add_argument(
        "--drain-seconds",
        type=Number(float, 0, MAX_DRAIN_SECONDS),
        default=30.0,
        metavar="S",
        help="unload: how long requests may finish",
    )
    parser.add_argument("--json", action="store_true", help="print the server's JSON answer")
    return parser


def run(args: argparse.Namespace) -> int:
    """Call the admin route; 1 with the server's reason when it refuses or cannot be reached."""
    import httpx

    if args.action != "list" and not args.name:
        raise ValueError(f"`appliance models {args.action}` needs the model's name")
    headers = {"Authorization": f"Bearer {args.admin_key}"} if args.admin_key else {}
    base = args.url.rstrip("/")
    try:
        if args.action == "list":
            response = httpx.get(f"{base}/admin/models", headers=headers, timeout=30)
        else:
            params = {"drain_seconds": args.drain_seconds} if args.action == "unload" else {}
            url = f"{base}/admin/models/{args.name}/{args.action}"
            response = httpx.post(url, headers=headers, params=params, timeout=None)
    except httpx.HTTPError as exc:
        print(f"appliance models: {base}: {exc}", file=sys.stderr)
        return 1
    answer = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
    if response.status_code != 200:
        message = (answer.get("error") or {}).get("message") if isinstance(answer, dict) else None
        print(f"appliance models: {response.status_code}: {message or response.text}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(answer, indent=2))
    elif args.action == "list":
        budget = answer.get("memory_budget_mb")
        memory = f", {answer.get('memory_counted_mb')} of memory_budget {budget} MiB counted" if budget else ""
        print(f"{answer['loaded']} loaded (max_loaded_models {answer['max_loaded_models'] or 'unlimited'}{memory})")
        if answer.get("load_queue"):
            print(f"waiting for room to load: {', '.join(answer['load_queue'])}")
        print(
            f"{'model':<24} {'state':<10} {'load':<10} {'pid':>8} {'est. MiB':>8} {'RSS MiB':>8} "
            f"{'in flight':>9} {'idle s':>7}"
        )
        for name, model in answer["models"].items():
            pid, rss = model["pid"] or "-", model["rss_mb"] if model["rss_mb"] is not None else "-"
            print(
                f"{name:<24} {model['state']:<10} {model['load']:<10} {pid:>8} {model.get('footprint_mb', '-'):>8} {rss:>8} "
                f"{model['in_flight']:>9} {model['idle_seconds']:>7}"
            )
    else:
        print(f"{answer['model']}: {answer['state']}")
    return 0
