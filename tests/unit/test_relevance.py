"""Rerank and score (`service.relevance`) on a stand-in engine: one rule for both routes and both
kinds of model (a cross-encoder's scores, a bi-encoder's cosines), usage as the engine counted it,
empty texts served, and the engine's errors named as the request named the text."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from appliance.engine.messages import Embedded, Reranked
from appliance.errors import ContextLengthExceeded, InvalidRequest
from appliance.graphfiles import Graph, Limits
from appliance.protocol.retrieval import EmbeddingRequest, RerankRequest, ScoreRequest
from appliance.service import relevance, retrieval

# Each text's vector: its letters counted (a..z), so that texts sharing letters are near.
ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def _vector(text: str) -> np.ndarray:
    return np.array([text.count(letter) for letter in ALPHABET] + [1.0], dtype="<f4")


class StandIn:
    """What the services read of an `EngineClient`; the engine's answers computed here, and every
    command recorded. `too_long` texts are refused as the engine refuses them (naming the text by
    its place in the command)."""

    def __init__(self, task: str, too_long: str | None = None) -> None:
        pipeline = "TEXT_EMBEDDING" if task == "embed" else "TEXT_RERANK"
        self.graph = Graph(
            name="m", model_path="/nonexistent", pipeline=pipeline, limits=Limits(max_inputs_per_request=4)
        )
        self.name, self.max_context, self.embedding_size = "m", 512, 27
        self.too_long = too_long
        self.embedded: list[tuple[list[str], bool]] = []
        self.reranked: list[tuple[str, list[str]]] = []

    def require(self, task: str) -> None:
        if task != self.graph.task:
            raise InvalidRequest("wrong model", param="model", code="model_not_supported")

    def _refuse(self, texts: list[str], field: str) -> None:
        if self.too_long in texts:
            what = f"{field}[{texts.index(self.too_long)}]"
            raise ContextLengthExceeded(f"however {what} has 999 tokens", param=what)

    async def embed(self, texts: list[str], *, query: bool = False) -> Embedded:
        self.require("embed")
        self.embedded.append((texts, query))
        self._refuse(texts, "input")
        vectors = np.stack([_vector(text) for text in texts])
        return Embedded(request_id=0, vectors=vectors.tobytes(), size=27, prompt_tokens=10 * len(texts))

    async def rerank(self, query: str, documents: list[str]) -> Reranked:
        self.require("rerank")
        self.reranked.append((query, documents))
        self._refuse(documents, "documents")
        scores = [len(set(query) & set(document)) / 10 for document in documents]
        return Reranked(request_id=0, scores=scores, prompt_tokens=100 * len(documents))


def _cosine(a: str, b: str) -> float:
    x, y = _vector(a), _vector(b)
    return float(x @ y / np.linalg.norm(x) / np.linalg.norm(y))


def test_rerank_on_a_cross_encoder_ranks_by_its_scores_and_counts_its_pairs() -> None:
    engine = StandIn("rerank")
    request = RerankRequest(model="m", query="cat", documents=["dog", "cart", "act"], top_n=2)
    answer, answered = asyncio.run(relevance.rerank(engine, request))
    assert [(result.index, result.relevance_score) for result in answer.results] == [(1, 0.3), (2, 0.3)]
    assert (answer.usage.prompt_tokens, answer.usage.total_tokens, answered.prompt_tokens) == (300, 300, 300)
    assert engine.reranked == [("cat", ["dog", "cart", "act"])]


def test_rerank_on_a_bi_encoder_is_the_cosine_of_query_and_document_vectors() -> None:
    engine = StandIn("embed")
    request = RerankRequest(model="m", query="cat", documents=["dog", "cart", "dog"])
    answer, _ = asyncio.run(relevance.rerank(engine, request))
    scores = {result.index: result.relevance_score for result in answer.results}
    assert scores == pytest.approx({0: _cosine("cat", "dog"), 1: _cosine("cat", "cart"), 2: _cosine("cat", "dog")})
    assert [result.index for result in answer.results][0] == 1
    # The query with the query instruction, the distinct documents with the document instruction.
    assert sorted(engine.embedded, key=lambda call: not call[1]) == [(["cat"], True), (["dog", "cart"], False)]
    assert answer.usage.prompt_tokens == 30


def test_score_follows_the_same_rule_as_rerank_on_both_kinds() -> None:
    for task in ("embed", "rerank"):
        engine = StandIn(task)
        ranked, _ = asyncio.run(
            relevance.rerank(engine, RerankRequest(model="m", query="cat", documents=["dog", "act"]))
        )
        scored, _ = asyncio.run(relevance.score(engine, ScoreRequest(model="m", text_1="cat", text_2=["dog", "act"])))
        by_index = {result.index: result.relevance_score for result in ranked.results}
        assert [item.score for item in scored.data] == pytest.approx([by_index[0], by_index[1]])
        assert scored.usage.prompt_tokens == ranked.usage.prompt_tokens


def test_score_pairs_lists_item_by_item_one_cross_encoder_call_per_query() -> None:
    engine = StandIn("rerank")
    request = ScoreRequest(model="m", text_1=["cat", "dog", "cat"], text_2=["act", "god", "tac"])
    answer, _ = asyncio.run(relevance.score(engine, request))
    assert [item.score for item in answer.data] == [0.3, 0.3, 0.3]
    assert engine.reranked == [("cat", ["act", "tac"]), ("dog", ["god"])]


def test_empty_texts_are_served() -> None:
    engine = StandIn("embed")
    answer, _ = asyncio.run(relevance.rerank(engine, RerankRequest(model="m", query="", documents=["", "a"])))
    assert len(answer.results) == 2
    vectors, _ = asyncio.run(retrieval.embed(engine, EmbeddingRequest(model="m", input=["", "a"])))
    assert len(vectors.data) == 2 and engine.embedded[-1] == (["", "a"], False)


@pytest.mark.parametrize(
    ("task", "request_", "param"),
    [
        ("rerank", RerankRequest(model="m", query="q", documents=["a", "long"]), "documents[1]"),
        ("embed", RerankRequest(model="m", query="q", documents=["a", "long"]), "documents[1]"),
        ("embed", RerankRequest(model="m", query="long", documents=["a"]), "query"),
        ("rerank", ScoreRequest(model="m", text_1=["a", "b"], text_2=["c", "long"]), "text_2[1]"),
        ("embed", ScoreRequest(model="m", text_1=["a", "b"], text_2=["c", "long"]), "text_2[1]"),
        ("embed", ScoreRequest(model="m", text_1="long", text_2=["c", "d"]), "text_1"),
        ("embed", EmbeddingRequest(model="m", input=["a", "b", "long"]), "input[2]"),
        ("embed", EmbeddingRequest(model="m", input="long"), "input"),
    ],
)
def test_the_engines_errors_name_the_requests_own_field(task: str, request_: object, param: str) -> None:
    engine = StandIn(task, too_long="long")
    serve = (
        retrieval.embed
        if isinstance(request_, EmbeddingRequest)
        else (relevance.rerank if isinstance(request_, RerankRequest) else relevance.score)
    )
    with pytest.raises(ContextLengthExceeded) as refused:
        asyncio.run(serve(engine, request_))
    assert refused.value.param == param
    assert refused.value.message == f"however {param} has 999 tokens"


def test_a_chat_model_is_refused_and_bounds_hold() -> None:
    chat = StandIn("rerank")
    chat.graph = Graph(name="m", model_path="/nonexistent")
    with pytest.raises(InvalidRequest) as refused:
        asyncio.run(relevance.score(chat, ScoreRequest(model="m", text_1="a", text_2="b")))
    assert refused.value.param == "model"
    engine = StandIn("embed")
    for request, param in [
        (RerankRequest(model="m", query="q", documents=["x"] * 5), "documents"),
        (RerankRequest(model="m", query="q", documents=[]), "documents"),
        (ScoreRequest(model="m", text_1="q", text_2=["x"] * 5), "text_2"),
        (ScoreRequest(model="m", text_1=["a", "b"], text_2=["x", "y", "z"]), "text_2"),
        (ScoreRequest(model="m", text_1=[], text_2="x"), "text_1"),
    ]:
        serve = relevance.rerank if isinstance(request, RerankRequest) else relevance.score
        with pytest.raises(InvalidRequest) as refused:
            asyncio.run(serve(engine, request))
        assert refused.value.param == param
    assert not engine.embedded
