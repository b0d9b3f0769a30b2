"""Batches beside people, measured on one graph: live TTFT with a batch running against none, and
a batch's throughput on an idle server against the raw pipeline at the same concurrency.

    python scripts/batch_bench.py GRAPH_FILE [--lines 64] [--live 30] [--output-tokens 32]

Phases alternate (live alone, live beside a batch, twice) so that a noisy machine weighs on both
alike; the raw pipeline runs last, in this process, after the server stopped. Every request is
greedy with `ignore_eos`, so each line produces exactly `--output-tokens` tokens.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from appliance.graphfiles.load import load_graph
from appliance.tools.bench.raw import RawPipeline, Tokenizer
from appliance.tools.bench.workload import Prompt
from appliance.tools.launch import ServerProcess

TEXT = "Write a short note about the sea, the wind and a harbour town in autumn number {}."


def _line(index: int, model: str, tokens: int) -> dict:
    return {
        "custom_id": f"r{index}",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {
            "model": model,
            "messages": [{"role": "user", "content": TEXT.format(index)}],
            "max_tokens": tokens,
            "temperature": 0,
            "ignore_eos": True,
        },
    }


def _submit(client: httpx.Client, model: str, lines: int, tokens: int) -> str:
    content = "".join(json.dumps(_line(i, model, tokens)) + "\n" for i in range(lines)).encode()
    uploaded = client.post("/v1/files", files={"file": ("in.jsonl", content)}, data={"purpose": "batch"}).json()
    batch = client.post(
        "/v1/batches",
        json={"input_file_id": uploaded["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"},
    )
    return batch.json()["id"]


def _wait(client: httpx.Client, batch_id: str, until: tuple[str, ...]) -> dict:
    while (batch := client.get(f"/v1/batches/{batch_id}").json())["status"] not in until:
        time.sleep(0.05)
    return batch


def _ttft(client: httpx.Client, model: str, tokens: int, index: int) -> float:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": TEXT.format(10_000 + index)}],
        "max_tokens": tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
    }
    started = time.perf_counter()
    first = None
    with client.stream("POST", "/v1/chat/completions", json=body) as answer:
        for line in answer.iter_lines():
            if first is None and line.startswith("data: {") and '"content":"' in line:
                first = time.perf_counter() - started
    assert first is not None
    return first


def _live(client: httpx.Client, model: str, count: int, tokens: int) -> list[float]:
    times = []
    for index in range(count):
        times.append(_ttft(client, model, tokens, index))
        time.sleep(0.2)  # people arrive now and then, not back to back
    return times


def _percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph", type=Path)
    parser.add_argument("--lines", type=int, default=64)
    parser.add_argument("--live", type=int, default=30)
    parser.add_argument("--output-tokens", type=int, default=32)
    args = parser.parse_args()
    graph = load_graph(args.graph)
    model, tokens = graph.name, args.output_tokens
    work = Path(tempfile.mkdtemp(prefix="batch-bench-"))
    server = ServerProcess.start(args.graph.parent, work / "server.log", "--state-dir", str(work / "state"))
    try:
        server.wait_ready()
        client = httpx.Client(base_url=server.url, timeout=600)
        _live(client, model, 3, tokens)  # warm up
        alone: list[float] = []
        beside: list[float] = []
        for _ in range(2):
            alone += _live(client, model, args.live // 2, tokens)
            busy = _submit(client, model, 2_000, tokens)
            _wait(client, busy, ("in_progress",))
            beside += _live(client, model, args.live // 2, tokens)
            client.post(f"/v1/batches/{busy}/cancel")
            _wait(client, busy, ("cancelled",))
        started = time.perf_counter()
        done = _wait(client, _submit(client, model, args.lines, tokens), ("completed", "failed"))
        batch_seconds = time.perf_counter() - started  # from upload to completed, as a client sees it
        assert done["request_counts"]["completed"] == args.lines, done
    finally:
        server.stop()
    tokenizer = Tokenizer(graph.model_dir)
    prompts = [Prompt(TEXT.format(i), tuple(tokenizer.encode(TEXT.format(i)))) for i in range(args.lines)]
    pipeline = RawPipeline(graph)
    _, raw_seconds = pipeline.run_level(prompts, concurrency=2, output_tokens=tokens)
    results = {
        "live_ttft_ms_alone": [round(v * 1000, 1) for v in _percentiles(alone)],
        "live_ttft_ms_beside_batch": [round(v * 1000, 1) for v in _percentiles(beside)],
        "batch_tokens_per_s": round(args.lines * tokens / batch_seconds, 1),
        "raw_tokens_per_s_at_2": round(args.lines * tokens / raw_seconds, 1),
    }
    results["ttft_p50_ratio"] = round(results["live_ttft_ms_beside_batch"][0] / results["live_ttft_ms_alone"][0], 2)
    results["ttft_p95_ratio"] = round(results["live_ttft_ms_beside_batch"][1] / results["live_ttft_ms_alone"][1], 2)
    results["batch_over_raw"] = round(results["batch_tokens_per_s"] / results["raw_tokens_per_s_at_2"], 2)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
