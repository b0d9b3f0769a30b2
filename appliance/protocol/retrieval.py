"""Embeddings (OpenAI's `POST /v1/embeddings`), rerank (`POST /v1/rerank`, the shape Cohere and
Jina defined and vLLM, llama.cpp and OpenVINO Model Server serve) and score (`POST /v1/score`,
vLLM's): request and response structs.

`input` is declared loosely (a string or a list) because msgspec cannot tell apart a union of list
types; `service.retrieval` checks its items and names the one at fault (`input[3]`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

__all__ = [
    "CreateEmbeddingResponse",
    "Embedding",
    "EmbeddingRequest",
    "EmbeddingUsage",
    "RerankDocument",
    "RerankRequest",
    "RerankResponse",
    "RerankResult",
    "RerankUsage",
    "Score",
    "ScoreRequest",
    "ScoreResponse",
    "ScoreUsage",
]


class _Request(Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class EmbeddingRequest(_Request):
    input: str | list[Any]
    model: str
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: Annotated[int, Meta(ge=1)] | None = None
    user: str | None = None
    # Extensions (Cohere, Jina and NVIDIA's name): which instruction the model puts before the texts.
    input_type: Literal["query", "document", "passage", "search_query", "search_document"] | None = None


class Embedding(Struct, kw_only=True):
    object: Literal["embedding"] = "embedding"
    embedding: list[float] | str
    """Floats, or with `encoding_format: "base64"` the float32 little-endian bytes in base64."""
    index: int


class EmbeddingUsage(Struct, kw_only=True):
    prompt_tokens: int
    total_tokens: int


class CreateEmbeddingResponse(Struct, kw_only=True):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: EmbeddingUsage


class RerankDocument(_Request):
    """A document as an object (Jina's and Cohere's shape): its text, and no other field."""

    text: str


class RerankRequest(_Request):
    model: str
    query: str
    documents: list[str | RerankDocument]
    top_n: Annotated[int, Meta(ge=1)] | None = None
    return_documents: bool = True


class RerankResult(Struct, kw_only=True, omit_defaults=True):
    index: int
    relevance_score: float
    document: RerankDocument | None = None


class RerankUsage(Struct, kw_only=True):
    """The tokens the model read (vLLM's and llama.cpp's shape; Cohere and Jina send `total_tokens`)."""

    prompt_tokens: int
    total_tokens: int


class RerankResponse(Struct, kw_only=True):
    id: str
    model: str
    usage: RerankUsage
    results: list[RerankResult]


class ScoreRequest(_Request):
    """vLLM's score API: `text_1` against `text_2`. A string on one side is paired with every text
    on the other; two lists are paired item by item (a list of one counts as a string)."""

    model: str
    text_1: str | list[str]
    text_2: str | list[str]


class Score(Struct, kw_only=True):
    index: int
    object: Literal["score"] = "score"
    score: float


class ScoreUsage(Struct, kw_only=True):
    prompt_tokens: int
    total_tokens: int
    completion_tokens: int = 0


class ScoreResponse(Struct, kw_only=True):
    id: str
    object: Literal["list"] = "list"
    created: int
    model: str
    data: list[Score]
    usage: ScoreUsage
