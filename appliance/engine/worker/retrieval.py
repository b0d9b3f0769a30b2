"""The engine of embedding and rerank graphs: texts in, vectors or scores out, batched across requests.

Each `Embed` is tokenized when it arrives (its counts checked against the model's `max_length` and
the request's token limit before any text is embedded), and its texts join one queue. Each turn of
the loop embeds the texts at the head of the queue, from as many requests as fit in
`max_batch_tokens`, in one `TextEmbeddingPipeline.embed_documents` call (dynamic batching): the
pipeline has no add_request/step interface, so requests cannot join a call already running, but
every call takes all that waits. Bounding a call's tokens bounds how long a request that arrives
behind a large one waits, and how long the engine is silent (the watchdog judges hangs by that).

A `Rerank` scores its documents against its query in calls of at most `max_batch_tokens` too
(`TextRerankPipeline.rerank` takes one query per call, so rerank requests are not merged). Its
tokens are counted as the pipeline reads them: each document with the query, as one pair.
"""

from __future__ import annotations

import collections
import json
import queue
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
import openvino_genai

from appliance.engine.messages import (
    Batch,
    Cancel,
    Embed,
    Embedded,
    EngineEvent,
    Ready,
    Rejected,
    Rerank,
    Reranked,
    Shutdown,
    Stats,
    encoder,
)
from appliance.engine.worker.base import STATS_INTERVAL_S
from appliance.engine.worker.inbox import Inbox
from appliance.engine.worker.preparer import reason
from appliance.graphfiles import Graph

__all__ = ["RetrievalEngine", "open_engine"]

_POOLING = {
    "cls": openvino_genai.TextEmbeddingPipeline.PoolingType.CLS,
    "mean": openvino_genai.TextEmbeddingPipeline.PoolingType.MEAN,
    "last_token": openvino_genai.TextEmbeddingPipeline.PoolingType.LAST_TOKEN,
}
_COUNT_CHUNK = 32
"""Texts tokenized together when counting (the tokenizer pads a call's texts to its longest)."""


@dataclass
class _Texts:
    """A request's texts, before their tokens are counted."""

    request_id: int
    field: str
    """The request field they came from (`input`, `documents`), for errors."""
    texts: list[str]
    query: str | None = None
    """The query each text is read with (rerank); None: each text is embedded alone."""


@dataclass
class _Work:
    """One embeddings or rerank request: its texts, their token counts, results so far."""

    request_id: int
    texts: list[str]
    tokens: list[int]
    query: str | None = None
    done: int = 0
    results: list = field(default_factory=list)
    cancelled: bool = False


class RetrievalEngine:
    """One embedding or rerank model serving the server's commands."""

    def __init__(self, graph: Graph) -> None:
        config = graph.retrieval
        assert config is not None, "a generative graph has no retrieval engine"
        self.graph, self.config = graph, config
        self.embeds = graph.task == "embed"
        self.tokenizer = (
            openvino_genai.Tokenizer(str(graph.model_dir)) if self.embeds else _rerank_tokenizer(graph.model_dir)
        )
        self.vocab_size = len(self.tokenizer.get_vocab_vector())
        self.pipe = self._load()
        self.embedding_size = len(self.pipe.embed_documents(["warm-up"])[0]) if self.embeds else 0
        self.max_context = config.max_length
        self._works: dict[int, _Work] = {}
        self._queue: collections.deque[tuple[_Work, int]] = collections.deque()
        self._calls = 0

    def _load(self) -> Any:
        """The graph's pipeline: built at start, and anew after a call of it failed (a failed call
        may leave state behind: the rule for every engine, see `fifo.py`)."""
        config, model, graph = self.config, str(self.graph.model_dir), self.graph
        # Instructions are put before the texts here, not by the pipeline: queries and documents
        # of different requests then share one embed_documents call.
        if self.embeds:
            settings = openvino_genai.TextEmbeddingPipeline.Config()
            settings.pooling_type = _POOLING[config.pooling]
            settings.normalize = config.normalize
            settings.max_length = config.max_length
            return openvino_genai.TextEmbeddingPipeline(model, graph.device, settings, **graph.plugin_config)
        settings = openvino_genai.TextRerankPipeline.Config()
        settings.max_length = config.max_length
        settings.top_n = graph.limits.max_inputs_per_request
        return openvino_genai.TextRerankPipeline(model, graph.device, settings, **graph.plugin_config)

    # -- the loop ---------------------------------------------------------------------------

    def ready(self, load_seconds: float) -> Ready:
        """What the server hears once the pipeline is loaded: the texts' bound and the vectors' length."""
        return Ready(max_context=self.max_context, load_seconds=load_seconds, embedding_size=self.embedding_size)

    def run(self, conn: Connection, inbox: Inbox) -> None:
        last_stats = 0.0
        while True:
            events: list[EngineEvent] = []
            arrived: list[Embed | Rerank] = []
            try:
                command = inbox.get(timeout=STATS_INTERVAL_S) if not self._works else inbox.get_nowait()
                while True:
                    if isinstance(command, Shutdown):
                        return
                    if isinstance(command, Cancel):
                        arrived = [waiting for waiting in arrived if waiting.request_id != command.request_id]
                        self._cancel(command.request_id)
                    elif isinstance(command, Embed | Rerank):
                        arrived.append(command)
                    # Submit, Tokenize and Detokenize never reach here: the server refuses them for this graph.
                    command = inbox.get_nowait()
            except queue.Empty:
                pass
            if arrived:
                self._admit(arrived, events)
            if self._works:
                self._call(events)
            if events:
                conn.send_bytes(encoder.encode(Batch(events=events)))
            now = time.monotonic()
            if now - last_stats >= STATS_INTERVAL_S or events:
                last_stats = now
                waiting = sum(1 for work in self._works.values() if work.done == 0)
                stats = Stats(running=len(self._works), kv_cache_usage=0.0, steps=self._calls, waiting=waiting)
                conn.send_bytes(encoder.encode(stats))

    def _cancel(self, request_id: int) -> None:
        work = self._works.pop(request_id, None)
        if work is not None:
            work.cancelled = True

    def _admit(self, commands: list[Embed | Rerank], events: list[EngineEvent]) -> None:
        """Prepare the requests that arrived in this turn, the texts to embed counted together in
        tokenizer calls of 32: a call per request cost 0.49 ms per text (64-token texts, MiniLM's
        tokenizer, 2 cores) against 0.05 ms in calls of 32, on the thread that feeds the pipeline.
        A rerank request's documents are counted with its query (its pairs), 32 to a call too."""
        prepared = [self._texts(command) for command in commands]
        alone = [text for item in prepared if isinstance(item, _Texts) and item.query is None for text in item.texts]
        counts = iter(self._count(alone))
        for item in prepared:
            if isinstance(item, Rejected):
                events.append(item)
                continue
            if item.query is None:
                tokens = [next(counts) for _ in item.texts]
            else:
                tokens = self._count(item.texts, item.query)
            work = self._bounded(item, tokens)
            if isinstance(work, Rejected):
                events.append(work)
            else:
                self._works[work.request_id] = work
                self._queue.extend((work, index) for index in range(len(work.texts)))

    # -- preparing a request ----------------------------------------------------------------

    def _texts(self, command: Embed | Rerank) -> _Texts | Rejected:
        """A request's texts as the model will read them (instructions put before them, token ids
        decoded), or its rejection (an id outside the vocabulary)."""
        request_id = command.request_id
        config = self.config
        if isinstance(command, Rerank):
            texts = [config.document_instruction + text for text in command.documents]
            return _Texts(request_id, "documents", texts, query=config.query_instruction + command.query)
        texts = []
        for index, text in enumerate(command.texts):
            if isinstance(text, list):
                unknown = next((token for token in text if not 0 <= token < self.vocab_size), None)
                if unknown is not None:
                    message = f"Token id {unknown} is not in this model's vocabulary ({self.vocab_size} tokens)."
                    return _rejected(request_id, message, "invalid_value", f"input[{index}]")
                text = self.tokenizer.decode(text, skip_special_tokens=True)
            texts.append(text)
        prefix = config.query_instruction if command.query else config.document_instruction
        return _Texts(request_id, "input", [prefix + text for text in texts])

    def _bounded(self, item: _Texts, tokens: list[int]) -> _Work | Rejected:
        """The request's work, given its texts' token counts (each with the query, for rerank), or
        a 400 when a text or the whole is beyond the limits. A text is named by its place in the
        command (`input[2]`): the server names it as its request did."""
        config, limits = self.config, self.graph.limits
        request_id, field_name = item.request_id, item.field
        if not limits.truncate_inputs:
            for index, count in enumerate(tokens):
                if count > config.max_length:
                    what = f"{field_name}[{index}]"
                    message = (
                        f"This model's maximum context length is {config.max_length} tokens, however {what} has "
                        f"{count} tokens{'' if item.query is None else ' with the query'}. Shorten it, or ask "
                        "the operator for `limits.truncate_inputs`."
                    )
                    return _rejected(request_id, message, "context_length_exceeded", what)
        tokens = [min(count, config.max_length) for count in tokens]
        if sum(tokens) > limits.max_request_tokens:
            message = (
                f"The request's texts hold {sum(tokens)} tokens; this model takes at most "
                f"{limits.max_request_tokens} per request. Send them in several requests."
            )
            return _rejected(request_id, message, "context_length_exceeded", field_name)
        return _Work(request_id=request_id, texts=item.texts, tokens=tokens, query=item.query)

    def _count(self, texts: list[str], query: str | None = None) -> list[int]:
        """The tokens of each text as the pipeline reads it: alone (embedding), or with `query` as
        `TextRerankPipeline` tokenizes them, a pair where the tokenizer takes one
        (`[CLS] query [SEP] text [SEP]`), else the two joined."""
        counts: list[int] = []
        for start in range(0, len(texts), _COUNT_CHUNK):
            chunk = texts[start : start + _COUNT_CHUNK]
            if query is None:
                encoded = self.tokenizer.encode(chunk, add_special_tokens=True)
            elif self.tokenizer.supports_paired_input():
                encoded = self.tokenizer.encode([query], chunk, add_special_tokens=True)
            else:
                encoded = self.tokenizer.encode([query + text for text in chunk], add_special_tokens=True)
            counts.extend(int(n) for n in encoded.attention_mask.data.sum(axis=1))
        return counts

    # -- one pipeline call ------------------------------------------------------------------

    def _call(self, events: list[EngineEvent]) -> None:
        batch = self._take()
        if not batch:
            return
        self._calls += 1
        if self.pipe is None:
            self.pipe = self._load()
        try:
            if self.embeds:
                vectors = self.pipe.embed_documents([work.texts[index] for work, index in batch])
                for (work, _), vector in zip(batch, vectors, strict=True):
                    work.results.append(vector)
            else:
                work = batch[0][0]
                first = batch[0][1]
                scored = self.pipe.rerank(work.query, [work.texts[index] for _, index in batch])
                scores = [0.0] * len(batch)
                for position, score in scored:
                    scores[position] = float(score)
                work.results.extend(scores)
                assert len(work.results) == first + len(batch)
        except Exception as exc:  # the pipeline refused this batch: its requests fail, the engine goes on
            self.pipe = None  # built anew before the next call
            for work in {id(work): work for work, _ in batch}.values():
                if self._works.pop(work.request_id, None) is not None:
                    message = f"The model could not process the request: {reason(exc)}"
                    events.append(_rejected(work.request_id, message, "engine_error", None))
                    work.cancelled = True
            return
        for work in {id(work): work for work, _ in batch}.values():
            work.done = len(work.results)
            if work.done == len(work.texts) and self._works.pop(work.request_id, None) is not None:
                events.append(self._answer(work))

    def _take(self) -> list[tuple[_Work, int]]:
        """The texts of the next call: from the head of the queue, within `max_batch_tokens` (at
        least one text); a rerank call takes one request's documents only."""
        budget = self.config.max_batch_tokens
        batch: list[tuple[_Work, int]] = []
        used = 0
        while self._queue:
            work, index = self._queue[0]
            if work.cancelled:
                self._queue.popleft()
                continue
            if batch and (used + work.tokens[index] > budget or (not self.embeds and work is not batch[0][0])):
                break
            self._queue.popleft()
            batch.append((work, index))
            used += work.tokens[index]
        return batch

    def _answer(self, work: _Work) -> EngineEvent:
        prompt_tokens = sum(work.tokens)
        if not self.embeds:
            return Reranked(request_id=work.request_id, scores=work.results, prompt_tokens=prompt_tokens)
        vectors = np.asarray(work.results, dtype="<f4")
        return Embedded(
            request_id=work.request_id, vectors=vectors.tobytes(), size=vectors.shape[1], prompt_tokens=prompt_tokens
        )


def _rerank_tokenizer(model: Path) -> Any:
    """The tokenizer `TextRerankPipeline` builds for `model`: with a second input (query and text
    read as a pair), except for Qwen3 rerankers, which read the two joined (openvino.genai's
    src/cpp/src/rag/text_rerank_pipeline.cpp: "qwen3 tokenizer doesn't support add_second_input")."""
    try:
        model_type = json.loads((model / "config.json").read_text()).get("model_type")
    except (OSError, ValueError, AttributeError):
        model_type = None
    return openvino_genai.Tokenizer(str(model), add_second_input=model_type != "qwen3")


def _rejected(request_id: int, message: str, code: str, param: str | None) -> Rejected:
    return Rejected(request_id=request_id, message=message, code=code, param=param)


def open_engine(graph: Graph) -> RetrievalEngine:
    """The engine of an embedding or rerank graph (`messages.TASKS`)."""
    return RetrievalEngine(graph)
