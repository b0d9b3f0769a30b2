"""Embeddings, rerank and score on their engine: requests checked and bounded before the engine
sees them, answers in OpenAI's (embeddings), Cohere/Jina's (rerank) and vLLM's (score) shapes.

Bounds checked here, in the server, before anything is sent: the number of texts
(`limits.max_inputs_per_request`), the characters of each (`limits.max_prompt_chars`, by default
32 per token the model reads) and of all together (`CHARS_PER_REQUEST_TOKEN` per token of
`limits.max_request_tokens`): the engine tokenizes every text before it embeds any, on the thread
that embeds. Token counts are checked by the engine (`engine/retrieval.py`).
"""

from __future__ import annotations

import base64
import time
import uuid
from dataclasses import dataclass

import numpy as np

from appliance.engine import EngineClient
from appliance.errors import ContextLengthExceeded, InvalidRequest
from appliance.protocol.retrieval import (
    CreateEmbeddingResponse,
    Embedding,
    EmbeddingRequest,
    EmbeddingUsage,
    RerankDocument,
    RerankRequest,
    RerankResponse,
    RerankResult,
    RerankUsage,
    Score,
    ScoreRequest,
    ScoreResponse,
    ScoreUsage,
)
from appliance.service.prompt_limits import check_prompt

__all__ = ["CHARS_PER_REQUEST_TOKEN", "Answered", "embed", "rerank", "score"]

CHARS_PER_REQUEST_TOKEN = 8
"""Characters a request's texts may hold together, per token of `limits.max_request_tokens`
(English text runs about 4 characters a token)."""
_QUERY_TYPES = ("query", "search_query")


@dataclass
class Answered:
    """What the access log reads of an answered embeddings or rerank request."""

    prompt_tokens: int
    completion_tokens: int = 0
    tokens_seen: int = 0
    first_token_at: float | None = None
    submitted_at: float = 0.0
    finish_reason: str = "stop"


async def embed(engine: EngineClient, request: EmbeddingRequest) -> tuple[CreateEmbeddingResponse, Answered]:
    """`request.input` embedded by `engine`, in OpenAI's shape."""
    engine.require("embed")
    texts = _inputs(request.input)
    _check_texts(engine, [text for text in texts if isinstance(text, str)], "input")
    dimensions = request.dimensions
    # The vectors' length is read from the model's files with its graph (`Graph.facts`), so it is
    # known before the model loads; only where the files do not say is it checked on the answer.
    size = engine.embedding_size
    if dimensions is not None and size:
        _check_dimensions(engine, dimensions, size)
    answer = await engine.embed(texts, query=request.input_type in _QUERY_TYPES)
    if dimensions is not None and not size:
        _check_dimensions(engine, dimensions, answer.size)
    vectors = np.frombuffer(answer.vectors, dtype="<f4").reshape(-1, answer.size)
    if dimensions is not None and dimensions != answer.size:
        # A Matryoshka model's leading dimensions are a vector of their own, normalized again.
        vectors = vectors[:, :dimensions]
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    data = [
        Embedding(embedding=_encoded(vector, request.encoding_format), index=index)
        for index, vector in enumerate(vectors)
    ]
    usage = EmbeddingUsage(prompt_tokens=answer.prompt_tokens, total_tokens=answer.prompt_tokens)
    return CreateEmbeddingResponse(data=data, model=engine.name, usage=usage), Answered(answer.prompt_tokens)


def _check_dimensions(engine: EngineClient, dimensions: int, size: int) -> None:
    """Refuse (400, param `dimensions`) a vector length the model does not give: its own `size`,
    or one of the graph's shorter `embedding.dimensions`."""
    if dimensions != size and dimensions not in engine.graph.embedding.dimensions:
        offered = sorted({size, *engine.graph.embedding.dimensions})
        raise InvalidRequest(
            f"Model '{engine.name}' gives vectors of {' or '.join(map(str, offered))} dimensions, not {dimensions}.",
            param="dimensions",
            code="invalid_value",
        )


async def rerank(engine: EngineClient, request: RerankRequest) -> tuple[RerankResponse, Answered]:
    """`request.documents` scored against `request.query` by `engine`, best first."""
    engine.require("rerank")
    documents = [doc.text if isinstance(doc, RerankDocument) else doc for doc in request.documents]
    if not documents:
        raise InvalidRequest("`documents` is empty: send at least one.", param="documents", code="empty_array")
    if not request.query:
        raise InvalidRequest("`query` is empty.", param="query", code="invalid_value")
    check_prompt(request.query, engine.graph, engine.max_context, "query")
    _check_texts(engine, [request.query, *documents], "documents")
    answer = await engine.rerank(request.query, documents)
    ranked = sorted(range(len(documents)), key=lambda index: -answer.scores[index])
    results = [
        RerankResult(
            index=index,
            relevance_score=answer.scores[index],
            document=RerankDocument(text=documents[index]) if request.return_documents else None,
        )
        for index in ranked[: request.top_n]
    ]
    response = RerankResponse(
        id=f"rerank-{uuid.uuid4().hex}",
        model=engine.name,
        usage=RerankUsage(total_tokens=answer.prompt_tokens),
        results=results,
    )
    return response, Answered(answer.prompt_tokens)


async def score(engine: EngineClient, request: ScoreRequest) -> tuple[ScoreResponse, Answered]:
    """Each pair of `text_1` and `text_2` scored: by the cross-encoder of a rerank graph (the
    relevance score /v1/rerank gives), or as the cosine similarity of an embedding graph's vectors
    (as vLLM scores with embedding models)."""
    if engine.graph.task not in ("rerank", "embed"):
        engine.require("rerank")  # the 400 naming what this model serves
    sides = {
        name: [value] if isinstance(value, str) else value
        for name, value in (("text_1", request.text_1), ("text_2", request.text_2))
    }
    pairs = _pairs(sides["text_1"], sides["text_2"])
    limit = engine.graph.limits.max_inputs_per_request
    if len(pairs) > limit:
        raise InvalidRequest(
            f"The request pairs {len(pairs)} texts; model '{engine.name}' scores at most {limit} per request.",
            param="text_2",
            code="array_above_max_length",
        )
    for param, texts in sides.items():
        _check_texts(engine, texts, param)
    by_first: dict[str, list[int]] = {}
    for index, (first, _) in enumerate(pairs):
        by_first.setdefault(first, []).append(index)
    texts = [*by_first, *(second for _, second in pairs)]
    _check_total(engine, texts, "text_2")
    scores = [0.0] * len(pairs)
    tokens = 0
    if engine.graph.task == "rerank":
        for first, indexes in by_first.items():  # one call per distinct text_1: its texts scored together
            answer = await engine.rerank(first, [pairs[index][1] for index in indexes])
            tokens += answer.prompt_tokens
            for index, value in zip(indexes, answer.scores, strict=True):
                scores[index] = float(value)
    else:
        texts = list(dict.fromkeys(texts))
        answer = await engine.embed(texts)
        tokens = answer.prompt_tokens
        vectors = np.frombuffer(answer.vectors, dtype="<f4").reshape(-1, answer.size)
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        row = {text: vectors[index] for index, text in enumerate(texts)}
        scores = [float(row[first] @ row[second]) for first, second in pairs]
    response = ScoreResponse(
        id=f"score-{uuid.uuid4().hex}",
        created=int(time.time()),
        model=engine.name,
        data=[Score(index=index, score=value) for index, value in enumerate(scores)],
        usage=ScoreUsage(prompt_tokens=tokens, total_tokens=tokens),
    )
    return response, Answered(tokens)


def _pairs(firsts: list[str], seconds: list[str]) -> list[tuple[str, str]]:
    """vLLM's pairing: a single text (a string or a list of one) on one side goes with every text
    of the other; two longer lists go item by item and must be as long as each other."""
    for name, texts in (("text_1", firsts), ("text_2", seconds)):
        if not texts:
            raise InvalidRequest(f"`{name}` is an empty list.", param=name, code="empty_array")
    if len(firsts) == 1:
        return [(firsts[0], text) for text in seconds]
    if len(seconds) == 1:
        return [(text, seconds[0]) for text in firsts]
    if len(firsts) != len(seconds):
        raise InvalidRequest(
            f"`text_1` holds {len(firsts)} texts and `text_2` {len(seconds)}: lists are paired item by item "
            "and must be as long as each other (or one side a single text).",
            param="text_2",
            code="invalid_value",
        )
    return list(zip(firsts, seconds, strict=True))


def _inputs(value: str | list) -> list[str | list[int]]:
    """The texts of an embeddings `input`: a string, strings, token ids, or lists of token ids."""
    if isinstance(value, str):
        return [value]
    if not value:
        raise InvalidRequest("`input` is an empty list: send at least one text.", param="input", code="empty_array")
    if all(_is_token(item) for item in value):
        return [value]
    kind = str if isinstance(value[0], str) else list
    for index, item in enumerate(value):
        if kind is str and not isinstance(item, str):
            raise InvalidRequest(
                f"`input[{index}]` is not a string; a list of inputs holds strings, or lists of token ids.",
                param=f"input[{index}]",
                code="invalid_type",
            )
        if kind is list and not (isinstance(item, list) and item and all(_is_token(token) for token in item)):
            raise InvalidRequest(
                f"`input[{index}]` is not a non-empty list of token ids (whole numbers from 0).",
                param=f"input[{index}]",
                code="invalid_type",
            )
    return value


def _is_token(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_texts(engine: EngineClient, texts: list[str], param: str) -> None:
    limits = engine.graph.limits
    if len(texts) > limits.max_inputs_per_request + (param == "documents"):
        raise InvalidRequest(
            f"`{param}` holds {len(texts) - (param == 'documents')} texts; model '{engine.name}' takes at most "
            f"{limits.max_inputs_per_request} per request.",
            param=param,
            code="array_above_max_length",
        )
    offset = 1 if param == "documents" else 0  # the query comes first
    for index, text in enumerate(texts[offset:]):
        if not text:
            raise InvalidRequest(
                f"`{param}[{index}]` is an empty string.", param=f"{param}[{index}]", code="invalid_value"
            )
        check_prompt(text, engine.graph, engine.max_context, f"{param}[{index}]")
    _check_total(engine, texts, param)


def _check_total(engine: EngineClient, texts: list[str], param: str) -> None:
    limits = engine.graph.limits
    chars = sum(map(len, texts))
    bound = limits.max_request_tokens * CHARS_PER_REQUEST_TOKEN
    if chars > bound:
        raise ContextLengthExceeded(
            f"The request's texts hold {chars} characters; model '{engine.name}' takes at most {bound} "
            f"({limits.max_request_tokens} tokens) per request. Send them in several requests.",
            param=param,
        )


def _encoded(vector: np.ndarray, encoding_format: str) -> list[float] | str:
    if encoding_format == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return vector.tolist()
