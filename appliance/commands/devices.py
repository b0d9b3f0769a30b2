"""`appliance devices`: the OpenVINO devices of this machine, as a graph file's `device` names them."""

from __future__ import annotations

import argparse
import json

__all__ = ["register", "run"]


def register(subcommands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `devices` to the parser."""
    parser = subcommands.add_parser(
        "devices",
        help="list the OpenVINO devices of this machine",
        description="List the OpenVINO devices of this machine (CPU, GPU, NPU, ...) with their "
        "properties, as OpenVINO reports them.",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    return parser


def run(args: argparse.Namespace) -> int:
    """Print each device and its properties (or all of it as JSON)."""
    from appliance.engine.host.devices import describe_devices

    described = describe_devices()
    if args.json:
        print(json.dumps(described, indent=2))
        return 0
    for device, properties in described.items():
        print(device)
        for name, value in properties.items():
            print(f"  {name:<28} {value}")
    return 0
