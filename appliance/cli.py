"""The `appliance` command: serve, check, demo."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from appliance import __version__
from appliance.config import DEFAULT_MAX_PROMPT_LEN
from appliance.errors import ConfigError
from appliance.settings import DEFAULT_CONFIG, load_settings

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="appliance", description="OpenVINO GenAI edge-serving appliance (OpenAI-compatible API)."
    )
    parser.add_argument("--version", action="version", version=f"appliance {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "serve",
        help="serve every graph file in a directory",
        description="Serve every graph file in a directory. Each setting can also come from "
        "APPLIANCE_<NAME> environment variables or a TOML settings file (flags win).",
    )
    serve.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help=f"TOML settings file (default {DEFAULT_CONFIG} when it exists)",
    )
    serve.add_argument("--graphs", metavar="DIR", help="directory of graph files (*.toml)")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1; 0.0.0.0 for all)")
    serve.add_argument("--port", type=int, help="port to listen on (default 8000)")
    serve.add_argument(
        "--max-body-size",
        type=int,
        metavar="BYTES",
        help="largest request body accepted, larger ones get 413 (default 32 MiB)",
    )
    serve.add_argument("--log-level", choices=["debug", "info", "warning", "error"], help="default info")
    serve.add_argument(
        "--drain-seconds",
        type=float,
        metavar="S",
        help="on SIGTERM, how long in-flight requests may take to finish (default 30)",
    )
    serve.add_argument(
        "--api-key-file",
        metavar="FILE",
        help="require 'Authorization: Bearer <key>' with a key from FILE (one per line); default: "
        "$CREDENTIALS_DIRECTORY/api-keys under systemd, else no keys",
    )
    serve.add_argument(
        "--model-cache-dir",
        metavar="DIR",
        help="OpenVINO compiled-model cache (CACHE_DIR) for graphs that set none; speeds up restarts",
    )
    serve.add_argument(
        "--allowed-hosts",
        type=_comma_list,
        metavar="H,H",
        help="Host header values accepted (name, name:port, *.domain); others get 400. Default: any",
    )
    serve.add_argument(
        "--cors-allowed-origins",
        type=_comma_list,
        metavar="ORIGIN,ORIGIN",
        help="browser origins allowed to call the API (e.g. https://app.example.com). Default: none",
    )
    lmi = serve.add_argument_group("LMI / SageMaker /invocations")
    lmi.add_argument("--invocations-model", metavar="NAME", help="model /invocations uses (default: the only one)")
    lmi.add_argument("--lmi-output-formatter", choices=["jsonlines", "sse"], help="stream format (default jsonlines)")
    lmi.add_argument("--tgi-compat", action="store_true", default=None, help="TGI-compatible answers (arrays, SSE)")
    serve.add_argument(
        "--metrics-open",
        action="store_true",
        default=None,
        help="serve /metrics without an API key",
    )
    media = serve.add_argument_group(
        "chat images",
        "Vision graphs take images as base64 data URLs always; as http(s) URLs and local paths only "
        "when enabled here.",
    )
    media.add_argument(
        "--allowed-media-domains",
        type=_comma_list,
        metavar="HOSTS",
        help="comma-separated hosts image URLs may be fetched from: example.com, *.example.com "
        "(subdomains), an IP address, or * (any host); default: none, URLs refused",
    )
    media.add_argument(
        "--allowed-media-networks",
        type=_comma_list,
        metavar="CIDRS",
        help="comma-separated non-public networks image fetches may connect to, e.g. 10.0.0.0/8 or "
        "127.0.0.1/32 (private, loopback, link-local, CGNAT, multicast and reserved addresses are "
        "refused otherwise); default: none",
    )
    media.add_argument(
        "--allowed-local-media-path",
        metavar="DIR",
        help="directory images may be read from as absolute paths or file:// URLs (symlinks must stay "
        "inside); default: none, local paths refused",
    )
    media.add_argument(
        "--max-image-bytes",
        type=int,
        metavar="BYTES",
        help="largest encoded image (download, file or decoded data URL) (default 20 MiB)",
    )
    media.add_argument(
        "--media-fetch-timeout",
        type=float,
        metavar="S",
        help="seconds an image download may take, DNS to last byte, redirects included (default 10)",
    )

    check = commands.add_parser("check", help="validate graph files, models and devices without serving")
    check.add_argument("--graphs", type=Path, required=True, metavar="DIR")

    export = commands.add_parser(
        "export",
        help="export a Hugging Face model to OpenVINO IR and write its graph file",
        description="Export SOURCE (a Hugging Face model id or a local folder) with optimum-intel into "
        "MODELS/NAME, check that it loads and renders its chat template, and write GRAPHS/NAME.toml.",
    )
    export.add_argument("source", metavar="SOURCE", help="Hugging Face model id or local model folder")
    export.add_argument("--name", required=True, help="served model name (and folder name)")
    export.add_argument("--weight-format", default="int8", choices=["int4", "int8", "fp16", "fp32"], help="default int8")
    export.add_argument("--models-dir", type=Path, default=Path("models"), metavar="DIR", help="default ./models")
    export.add_argument("--graphs-dir", type=Path, default=Path("graphs"), metavar="DIR", help="default ./graphs")
    export.add_argument(
        "--device",
        default="CPU",
        help="device written to the graph file (default CPU); NPU also means symmetric int4 weights with "
        "--weight-format int4 and a stateful-pipeline graph",
    )
    export.add_argument(
        "--max-prompt-len",
        type=int,
        default=DEFAULT_MAX_PROMPT_LEN,
        metavar="N",
        help=f"NPU graphs: longest prompt in tokens (MAX_PROMPT_LEN, default {DEFAULT_MAX_PROMPT_LEN})",
    )
    export.add_argument("--task", help="optimum task, when it cannot be inferred (e.g. image-text-to-text)")
    export.add_argument("--trust-remote-code", action="store_true", help="allow the model's own code (trusted repos only)")
    export.add_argument("--force", action="store_true", help="replace an existing model folder and graph file")

    soak = commands.add_parser(
        "soak",
        help="run minutes of mixed traffic against a server and check every answer",
        description="Streaming and non-streaming, text and image requests, early disconnects and "
        "bursts above the queue limit against URL; reports outcomes, lost or malformed answers, and "
        "RSS and open fds of the server's processes (read from /proc: run it on the same machine).",
    )
    soak.add_argument("--url", default="http://127.0.0.1:8000", help="server to soak (default http://127.0.0.1:8000)")
    soak.add_argument("--minutes", type=float, default=5.0, help="default 5")
    soak.add_argument("--concurrency", type=int, default=8, help="clients at once (default 8)")
    soak.add_argument("--model", default="demo-chat", help="text model (default demo-chat)")
    soak.add_argument("--vision-model", help="also send images to this model (e.g. demo-vision)")
    soak.add_argument("--max-tokens", type=int, default=48, help="largest max_tokens drawn (default 48)")
    soak.add_argument("--disconnect-fraction", type=float, default=0.15, help="clients that hang up early (default 0.15)")
    soak.add_argument("--burst-every", type=float, default=60.0, metavar="S", help="seconds between bursts (default 60)")
    soak.add_argument("--api-key", help="bearer key, when the server needs one")
    soak.add_argument("--seed", type=int, default=0)
    soak.add_argument("--json", type=Path, metavar="FILE", help="also write the report as JSON")

    devices = commands.add_parser("devices", help="list the OpenVINO devices of this machine")
    devices.add_argument("--json", action="store_true", help="print JSON")

    demo = commands.add_parser("demo", help="build the offline demo models into DIR/models and DIR/graphs")
    demo.add_argument("dir", type=Path, metavar="DIR")
    demo.add_argument(
        "--models",
        default="demo-chat,demo-vision",
        help="comma-separated demo models to build (default demo-chat,demo-vision; also: demo-bench, demo-spec, demo-lookup)",
    )
    demo.add_argument("--force", action="store_true", help="rebuild even when the output is current")

    bench = commands.add_parser(
        "bench",
        help="benchmark a served graph against its raw OpenVINO GenAI pipeline",
        description="Drive an OpenAI-compatible server with streamed, fixed-length requests at each "
        "concurrency level, then run the same workload on the graph's own pipeline in process "
        "(no HTTP), and report throughput, TTFT, TPOT and ITL for both.",
    )
    bench.add_argument("--graph", type=Path, required=True, metavar="FILE", help="graph file of the model")
    bench.add_argument(
        "--url", help="an OpenAI-compatible server to drive (default: start `appliance serve` for the graph)"
    )
    bench.add_argument("--model", help="model name to send (default: the graph's name)")
    bench.add_argument("--api-key", metavar="KEY", help="bearer key for --url")
    bench.add_argument(
        "--concurrency", default="1,4,16", metavar="N,N,...", help="concurrency levels (default 1,4,16)"
    )
    bench.add_argument("--requests", type=int, metavar="N", help="requests per level (default max(8, 4 x level))")
    bench.add_argument("--prompt-tokens", type=int, default=128, metavar="N", help="default 128")
    bench.add_argument("--output-tokens", type=int, default=128, metavar="N", help="default 128")
    bench.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    bench.add_argument("--plot", type=Path, metavar="FILE", help="also draw throughput and TTFT (PNG)")
    bench.add_argument("--no-raw", action="store_true", help="skip the raw pipeline baseline")
    return parser


def _comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, (getattr(args, "log_level", None) or "info").upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stdout,
    )
    # httpx logs every request at INFO (bench and soak send thousands).
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        if args.command == "serve":
            from appliance.server import serve

            flags = {name: value for name, value in vars(args).items() if name not in ("command", "config")}
            return serve(load_settings(flags, config=args.config))
        if args.command == "check":
            from appliance.service.graphs import prepare_graphs

            for graph in prepare_graphs(args.graphs):
                print(f"ok  {graph.name:<24} {graph.device:<8} {graph.pipeline_kind:<6} {graph.model_dir}  ({graph.source})")
            return 0
        if args.command == "export":
            from appliance.tools.export import ExportError, export_model

            try:
                export_model(
                    args.source,
                    args.name,
                    weight_format=args.weight_format,
                    models_dir=args.models_dir,
                    graphs_dir=args.graphs_dir,
                    device=args.device,
                    task=args.task,
                    trust_remote_code=args.trust_remote_code,
                    force=args.force,
                    max_prompt_len=args.max_prompt_len,
                )
            except ExportError as exc:
                print(f"appliance export: {exc}", file=sys.stderr)
                return 1
            return 0
        if args.command == "soak":
            import asyncio
            import json

            from appliance.tools.soak.traffic import SoakConfig, format_report, run_soak

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
            report = asyncio.run(run_soak(config))
            print(format_report(report))
            if args.json:
                args.json.write_text(json.dumps(report, indent=2))
            return 0 if report["passed"] else 1
        if args.command == "devices":
            import json

            from appliance.engine.devices import describe_devices

            described = describe_devices()
            if args.json:
                print(json.dumps(described, indent=2))
            for device, properties in ({} if args.json else described).items():
                print(device)
                for name, value in properties.items():
                    print(f"  {name:<28} {value}")
            return 0
        if args.command == "demo":
            from appliance.tools.demo import build_demo

            names = [name.strip() for name in args.models.split(",") if name.strip()]
            for path in build_demo(args.dir, names, force=args.force):
                print(f"graph: {path}")
            return 0
        if args.command == "bench":
            from appliance.tools.bench import BenchOptions, run_bench
            from appliance.tools.bench.plot import write_plot

            try:
                levels = tuple(int(level) for level in args.concurrency.split(",") if level.strip())
            except ValueError:
                raise ValueError(f"--concurrency {args.concurrency!r}: expected numbers like 1,4,16") from None
            if not levels or min(levels) < 1 or min(args.prompt_tokens, args.output_tokens, args.requests or 1) < 1:
                raise ValueError("--concurrency, --requests and the token counts must be positive")
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
    except ConfigError as exc:
        print(f"appliance: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"appliance: {exc}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
