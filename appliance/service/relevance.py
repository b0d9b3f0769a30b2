"""Rerank (`/v1/rerank`, Cohere and Jina's shape) and score (`/v1/score`, vLLM's): how relevant
texts are to a query, by one rule for both routes on both kinds of retrieval model.

- A rerank graph (a cross-encoder) reads each query and text together: the score is the relevance
  `TextRerankPipeline` gives (the model's logit through a sigmoid, or its first class's softmax:
  0 to 1). One pipeline call per distinct query, its texts scored together.
- An embedding graph (a bi-encoder) embeds the queries (with the model's query instruction) and the
  texts (with its document instruction) apart, in one engine batch: the score is the cosine of
  their vectors (-1 to 1), as vLLM serves both routes with embedding models. Each distinct text is
  embedded once.

`usage.prompt_tokens` counts the tokens the model read: every (query, text) pair on a
cross-encoder, every distinct text once on a bi-encoder. Bounds are `retrieval`'s, each error
naming the request's own field (`documents[3]`, `text_2[1]`, `query`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass

import numpy as np

from appliance.engine import EngineClient
from appliance.errors import InvalidRequest
from appliance.protocol.retrieval import (
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
from appliance.service.retrieval import Answered, check_count, check_texts, item_names, renamed

__all__ = ["rerank", "score"]


@dataclass(frozen=True)
class _Text:
    """A text of the request and its name there (`documents[2]`, `text_1`)."""

    text: str
    name: str


@dataclass(frozen=True)
class _Scored:
    scores: list[float]
    """One per pair, in the pairs' order."""
    prompt_tokens: int


async def rerank(engine: EngineClient, request: RerankRequest) -> tuple[RerankResponse, Answered]:
    """`request.documents` scored against `request.query` by `engine`, best first."""
    _require_relevance(engine)
    if not request.documents:
        raise InvalidRequest("`documents` is empty: send at least one.", param="documents", code="empty_array")
    check_count(engine, len(request.documents), "documents")
    texts = [doc.text if isinstance(doc, RerankDocument) else doc for doc in request.documents]
    query = _Text(request.query, "query")
    documents = [_Text(text, name) for text, name in zip(texts, item_names("documents", texts), strict=True)]
    scored = await _scored(engine, [(query, document) for document in documents], "documents")
    ranked = sorted(range(len(documents)), key=lambda index: -scored.scores[index])
    results = [
        RerankResult(
            index=index,
            relevance_score=scored.scores[index],
            document=RerankDocument(text=texts[index]) if request.return_documents else None,
        )
        for index in ranked[: request.top_n]
    ]
    usage = RerankUsage(prompt_tokens=scored.prompt_tokens, total_tokens=scored.prompt_tokens)
    response = RerankResponse(id=f"rerank-{uuid.uuid4().hex}", model=engine.name, usage=usage, results=results)
    return response, Answered(scored.prompt_tokens)


async def score(engine: EngineClient, request: ScoreRequest) -> tuple[ScoreResponse, Answered]:
    """Each pair of `text_1` and `text_2` scored (see the module docstring), in pair order."""
    _require_relevance(engine)
    sides = [
        [_Text(text, name) for text, name in zip(texts, item_names(field, value), strict=True)]
        for field, value in (("text_1", request.text_1), ("text_2", request.text_2))
        for texts in ([value] if isinstance(value, str) else value,)
    ]
    pairs = _pairs(*sides)
    check_count(engine, len(pairs), "text_2")
    scored = await _scored(engine, pairs, "text_2")
    response = ScoreResponse(
        id=f"score-{uuid.uuid4().hex}",
        created=int(time.time()),
        model=engine.name,
        data=[Score(index=index, score=value) for index, value in enumerate(scored.scores)],
        usage=ScoreUsage(prompt_tokens=scored.prompt_tokens, total_tokens=scored.prompt_tokens),
    )
    return response, Answered(scored.prompt_tokens)


def _require_relevance(engine: EngineClient) -> None:
    """Rerank and score serve rerank and embedding graphs; a chat model gets the 400 naming what it serves."""
    if engine.graph.task not in ("rerank", "embed"):
        engine.require("rerank")


def _pairs(firsts: list[_Text], seconds: list[_Text]) -> list[tuple[_Text, _Text]]:
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


async def _scored(engine: EngineClient, pairs: list[tuple[_Text, _Text]], whole: str) -> _Scored:
    """The relevance of each (query, text) pair, by the model's kind; `whole` names all the texts
    in an error about their sum."""
    named = {text.name: text.text for pair in pairs for text in pair}
    check_texts(engine, list(named.values()), list(named), whole)
    if engine.graph.task == "rerank":
        return await _cross_encoded(engine, pairs, whole)
    return await _bi_encoded(engine, pairs, whole)


async def _cross_encoded(engine: EngineClient, pairs: list[tuple[_Text, _Text]], whole: str) -> _Scored:
    by_query: dict[str, list[int]] = {}
    for index, (query, _) in enumerate(pairs):
        by_query.setdefault(query.text, []).append(index)
    scores = [0.0] * len(pairs)
    tokens = 0
    for indexes in by_query.values():  # one call per distinct query: its texts scored together
        query = pairs[indexes[0]][0]
        documents = [pairs[index][1] for index in indexes]
        call = engine.rerank(query.text, [document.text for document in documents])
        answer = await renamed(call, [document.name for document in documents], whole)
        tokens += answer.prompt_tokens
        for index, value in zip(indexes, answer.scores, strict=True):
            scores[index] = float(value)
    return _Scored(scores, tokens)


async def _bi_encoded(engine: EngineClient, pairs: list[tuple[_Text, _Text]], whole: str) -> _Scored:
    # Queries and texts are two engine requests (each gets its own instruction), sent together so
    # that they share a pipeline call; when one fails the other is cancelled.
    queries = list({query.text: query for query, _ in pairs}.values())
    documents = list({document.text: document for _, document in pairs}.values())
    asked = [
        asyncio.ensure_future(
            renamed(engine.embed([text.text for text in texts], query=query), [text.name for text in texts], whole)
        )
        for texts, query in ((queries, True), (documents, False))
    ]
    try:
        answers = await asyncio.gather(*asked)
    except BaseException:
        for task in asked:
            task.cancel()
        raise
    vectors: list[dict[str, np.ndarray]] = []
    for texts, answer in zip((queries, documents), answers, strict=True):
        rows = np.frombuffer(answer.vectors, dtype="<f4").reshape(-1, answer.size)
        rows = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)  # graphs may not normalize
        vectors.append({text.text: row for text, row in zip(texts, rows, strict=True)})
    by_query, by_document = vectors
    scores = [float(by_query[query.text] @ by_document[document.text]) for query, document in pairs]
    return _Scored(scores, sum(answer.prompt_tokens for answer in answers))
