"""`appliance bench` on an embedding graph: texts per second served against the raw pipeline.

Each level runs `concurrency` clients in a closed loop, each request one text of about
`--prompt-tokens` tokens, over HTTP to `POST /v1/embeddings` in base64 (as the official SDK asks; the server batches the waiting
requests' texts into pipeline calls). The raw baseline is the graph's own `TextEmbeddingPipeline`
in this process, fed the same texts in batches of `concurrency` (what perfect batching of that many
clients would give, without HTTP, JSON or the engine's pipe). The ratio served/raw is what serving
costs; the server's pipeline calls per level (its `steps`) show the batching. With `--interleave`
one raw pipeline stays loaded beside the server and each level runs on both before the next, the
order flipping every round.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from appliance.graphfiles import Graph
from appliance.tools.bench.http import HTTPConnection, HTTPError

__all__ = ["EmbeddingLevel", "RawEmbedder", "rounds_table", "run_embedding_bench", "table"]

_WORDS = (
    "the model reads every document on the box and writes a vector for each so that search finds "
    "what a question means rather than the words it happens to use while nothing leaves the site"
).split()


@dataclass
class EmbeddingLevel:
    """One concurrency level's figures (served, then raw)."""

    concurrency: int
    requests: int
    served_seconds: float = 0.0
    served_tokens: int = 0
    served_calls: int = 0
    client_cpu: float = 0.0
    """Cores the bench's own clients used while served (they share the machine with the server)."""
    raw_seconds: float = 0.0

    @property
    def served_inputs_per_s(self) -> float:
        return self.requests / self.served_seconds if self.served_seconds else 0.0

    @property
    def raw_inputs_per_s(self) -> float:
        return self.requests / self.raw_seconds if self.raw_seconds else 0.0

    @property
    def ratio(self) -> float:
        return self.served_inputs_per_s / self.raw_inputs_per_s if self.raw_inputs_per_s else 0.0


def texts_for(count: int, tokens: int, seed: int) -> list[str]:
    """`count` different texts of about `tokens` tokens (one word, one token, for a WordPiece vocabulary)."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(_WORDS) for _ in range(max(1, tokens - 2))) for _ in range(count)]


def run_embedding_bench(
    graph: Graph,
    url: str,
    levels: tuple[int, ...],
    *,
    requests: int | None,
    prompt_tokens: int,
    seed: int,
    raw: RawEmbedder | None = None,
    raw_first: bool = False,
    interleave: bool = False,
    model: str | None = None,
    api_key: str | None = None,
    say: Callable[[str], None] = print,
) -> list[EmbeddingLevel]:
    """Every level served at `url`, then every level on `raw`; with `interleave`, each level on
    both before the next (`raw_first`: the raw pipeline first)."""
    results = []
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def served(result: EmbeddingLevel) -> None:
        texts = texts_for(result.requests, prompt_tokens, seed + result.concurrency)
        steps = functools.partial(_steps, url, graph.name, headers)
        asyncio.run(_serve(url, model or graph.name, texts, result.concurrency, headers, result, steps))
        say(
            f"served c={result.concurrency}: {result.served_inputs_per_s:.1f} inputs/s "
            f"in {result.served_calls} pipeline calls"
        )

    def raw_level(result: EmbeddingLevel) -> None:
        if raw is not None:
            raw.measure(result, texts_for(result.requests, prompt_tokens, seed + result.concurrency))
            say(f"raw c={result.concurrency}: {result.raw_inputs_per_s:.1f} inputs/s")

    for level in levels:
        result = EmbeddingLevel(concurrency=level, requests=requests or max(64, 4 * level))
        results.append(result)
        if interleave:
            for measure in (raw_level, served) if raw_first else (served, raw_level):
                measure(result)
        else:
            served(result)
    if not interleave:
        for result in results:
            raw_level(result)
    return results


async def _serve(
    url: str,
    model: str,
    texts: list[str],
    level: int,
    headers: dict,
    result: EmbeddingLevel,
    steps: Callable[[], int],
) -> None:
    """The level's texts sent by `level` clients; `steps()` is the server's pipeline calls so
    far (read after the warm-up, so its call is not counted as the level's)."""
    # One keep-alive connection per client, through the bench's own light HTTP client: httpx took
    # 1.2-1.4 ms of the box's CPU per request (more than the server's own 0.9 ms), which the
    # served figures then paid and the raw baseline did not.
    pending = list(reversed(texts))
    warm_up = HTTPConnection(url, headers)
    await _embed(warm_up, {"model": model, "input": texts[0]})
    await warm_up.close()

    async def worker() -> None:
        connection = HTTPConnection(url, headers)
        try:
            while pending:
                text = pending.pop()
                answer = await _embed(connection, {"model": model, "input": text, "encoding_format": "base64"})
                result.served_tokens += answer["usage"]["prompt_tokens"]
        finally:
            await connection.close()

    calls = steps()
    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(level)))
    result.served_seconds = time.perf_counter() - started
    result.client_cpu = (time.process_time() - cpu) / result.served_seconds
    result.served_calls = steps() - calls


async def _embed(connection: HTTPConnection, payload: dict) -> dict:
    async with connection.post("/v1/embeddings", payload) as response:
        body = await response.read()
    if response.status != 200:
        raise HTTPError(f"/v1/embeddings answered {response.status}: {body[:300]!r}")
    return json.loads(body)


def _steps(url: str, name: str, headers: dict) -> int:
    return int(httpx.get(f"{url}/health", headers=headers, timeout=10).json()["models"][name]["steps"])


class RawEmbedder:
    """The graph's own TextEmbeddingPipeline in this process, loaded at its first level (so not in
    memory while the server's levels run before it), fed each level's texts in batches of its
    concurrency."""

    def __init__(self, graph: Graph, say: Callable[[str], None] = print) -> None:
        self._graph, self._say = graph, say
        self._pipe: Any = None

    def measure(self, result: EmbeddingLevel, texts: list[str]) -> None:
        if self._pipe is None:
            self._pipe = self._load()
        pipe = self._pipe
        pipe.embed_documents(texts[:1])
        started = time.perf_counter()
        for start in range(0, len(texts), result.concurrency):
            pipe.embed_documents(texts[start : start + result.concurrency])
        result.raw_seconds = time.perf_counter() - started

    def _load(self) -> Any:
        import openvino_genai  # only when measuring: the table and its tests need no OpenVINO

        graph = self._graph
        config = graph.retrieval
        assert config is not None
        settings = openvino_genai.TextEmbeddingPipeline.Config()
        settings.pooling_type = getattr(openvino_genai.TextEmbeddingPipeline.PoolingType, config.pooling.upper())
        settings.normalize = config.normalize
        settings.max_length = config.max_length
        self._say(f"raw: loading {graph.model_dir} on {graph.device}")
        return openvino_genai.TextEmbeddingPipeline(str(graph.model_dir), graph.device, settings, **graph.plugin_config)


def table(results: list[EmbeddingLevel]) -> str:
    """The results as a Markdown table."""
    lines = [
        "| concurrency | requests | served inputs/s | served tokens/s | texts per pipeline call | client CPU "
        "| raw inputs/s | served/raw |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        tokens_per_s = r.served_tokens / r.served_seconds if r.served_seconds else 0.0
        per_call = r.requests / r.served_calls if r.served_calls else 0.0
        lines.append(
            f"| {r.concurrency} | {r.requests} | {r.served_inputs_per_s:.1f} | {tokens_per_s:.0f} | {per_call:.1f} "
            f"| {r.client_cpu:.0%} | {r.raw_inputs_per_s:.1f} | {r.ratio:.2f} |"
        )
    return "\n".join(lines)


def rounds_table(rounds: list[list[EmbeddingLevel]]) -> str:
    """served/raw of each round (served then raw, in turns) per level, and their median: on a
    shared machine one round decides little."""
    lines = ["| concurrency | served/raw per round | median | spread (max - min) |", "|---|---|---|---|"]
    for index, first in enumerate(rounds[0]):
        ratios = [results[index].ratio for results in rounds]
        lines.append(
            f"| {first.concurrency} | {', '.join(f'{ratio:.2f}' for ratio in ratios)} | {statistics.median(ratios):.2f} "
            f"| {max(ratios) - min(ratios):.2f} |"
        )
    return "\n".join(lines)
