"""What an idle engine can give back without unloading (issue 43, item 4), measured on a graph.

One run is one fresh process, as an engine is: it builds the graph's pipeline with the engine's own
function (`engine/worker/pipelines.load_pipeline`), optionally with other `[scheduler]
cache_size`, `CACHE_DIR` or `CPU_RUNTIME_CACHE_CAPACITY`, then reads its memory (`/proc/self/status`:
VmRSS, RssAnon, RssFile) after the load, after `--requests` concurrent requests of about
`--prompt-tokens` tokens each, after `--idle` seconds of idleness, and after glibc's
`malloc_trim(0)`, and after the pipeline is dropped and built again in the same process (what
an engine could do while idle to give back its KV cache's pages and keep its process); it times
the loads and a first and second one-token request after each. One JSON line out.

    python scripts/idle_memory.py GRAPH.toml [--cache-size GB] [--cache-dir DIR]
        [--runtime-cache-capacity N] [--requests 4] [--prompt-tokens 1000] [--idle 5]

Not part of the appliance: a measurement kept so docs/operations.md's numbers can be redone.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import time
from pathlib import Path


def memory() -> dict[str, int]:
    """This process's resident memory in MiB: all of it, anonymous, file-backed."""
    wanted = {"VmRSS": "rss", "RssAnon": "anon", "RssFile": "file"}
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in wanted:
            found[wanted[key]] = int(value.split()[0]) // 1024
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("graph", type=Path)
    parser.add_argument("--cache-size", type=int, help="[scheduler] cache_size in GB (0: grown as needed)")
    parser.add_argument("--cache-dir", help="OpenVINO CACHE_DIR (compiled-model cache)")
    parser.add_argument("--runtime-cache-capacity", type=int, help="CPU_RUNTIME_CACHE_CAPACITY")
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--prompt-tokens", type=int, default=1000)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--idle", type=float, default=5.0)
    args = parser.parse_args()

    started = time.monotonic()
    import msgspec
    import openvino_genai

    from appliance.engine.worker.pipelines import load_pipeline
    from appliance.graphfiles import load_graph

    imported = time.monotonic() - started
    graph = load_graph(args.graph)
    plugin_config = dict(graph.plugin_config)
    if args.cache_dir:
        plugin_config["CACHE_DIR"] = args.cache_dir
    if args.runtime_cache_capacity is not None:
        plugin_config["CPU_RUNTIME_CACHE_CAPACITY"] = args.runtime_cache_capacity
    scheduler = graph.scheduler
    if args.cache_size is not None:
        scheduler = msgspec.structs.replace(scheduler, cache_size=args.cache_size)
    graph = msgspec.structs.replace(graph, plugin_config=plugin_config, scheduler=scheduler)

    before = memory()
    started = time.monotonic()
    pipeline = load_pipeline(graph)
    load_seconds = time.monotonic() - started
    loaded = memory()

    def one_token() -> float:
        config = openvino_genai.GenerationConfig()
        config.max_new_tokens = 1
        started = time.monotonic()
        pipeline.generate(["hello"], [config])
        return time.monotonic() - started

    first, second = one_token(), one_token()
    tokenizer = pipeline.get_tokenizer()
    words = "the quick brown fox jumps over the lazy dog and then some more words follow here "
    text = words * (args.prompt_tokens // 8)
    prompt_tokens = int(tokenizer.encode(text, add_special_tokens=False).input_ids.shape[1])
    config = openvino_genai.GenerationConfig()
    config.max_new_tokens = args.new_tokens
    config.ignore_eos = True
    # Distinct prompts (a number in front): prefix caching must not share their blocks.
    prompts = [f"{index} {text}" for index in range(args.requests)]
    started = time.monotonic()
    pipeline.generate(prompts, [config] * args.requests)
    requests_seconds = time.monotonic() - started
    served = memory()
    time.sleep(args.idle)
    idle = memory()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    trimmed = memory()
    del pipeline, tokenizer
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    dropped = memory()
    started = time.monotonic()
    pipeline = load_pipeline(graph)
    rebuild_seconds = time.monotonic() - started
    rebuilt = memory()
    first_rebuilt = one_token()
    print(
        json.dumps(
            {
                "graph": graph.name,
                "cache_size": graph.scheduler.cache_size,
                "prefix_caching": graph.prefix_caching,
                "cache_dir": args.cache_dir or "",
                "runtime_cache_capacity": args.runtime_cache_capacity,
                "import_s": round(imported, 2),
                "load_s": round(load_seconds, 2),
                "first_token_request_s": round(first, 3),
                "second_token_request_s": round(second, 3),
                "requests": args.requests,
                "prompt_tokens": prompt_tokens,
                "requests_s": round(requests_seconds, 2),
                "mib_before_load": before,
                "mib_loaded": loaded,
                "mib_after_requests": served,
                "mib_idle": idle,
                "mib_after_malloc_trim": trimmed,
                "mib_pipeline_dropped": dropped,
                "rebuild_s": round(rebuild_seconds, 2),
                "mib_rebuilt": rebuilt,
                "first_token_request_after_rebuild_s": round(first_rebuilt, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
