"""`POST /v1/embeddings` (OpenAI), `POST /v1/rerank` (Cohere/Jina, as vLLM and OVMS serve it) and
`POST /v1/score` (vLLM's), also under /v3 (OpenVINO Model Server's prefix) and bare (`/rerank` is
llama.cpp's, `/score` vLLM's)."""

from __future__ import annotations

from litestar import Request, post

from appliance.api.handling import unless_disconnected
from appliance.api.profiles import OPERATION, Operation
from appliance.entry import Entry
from appliance.entry.decoding import decode_body
from appliance.protocol.retrieval import (
    CreateEmbeddingResponse,
    EmbeddingRequest,
    RerankRequest,
    RerankResponse,
    ScoreRequest,
    ScoreResponse,
)

__all__ = ["routes"]


@post(
    ["/v1/embeddings", "/v3/embeddings", "/embeddings"],
    status_code=200,
    opt={OPERATION: Operation(summary="Embeddings of texts (OpenAI)", body=EmbeddingRequest)},
)
async def embeddings(request: Request, entry: Entry) -> CreateEmbeddingResponse:
    return await unless_disconnected(request, entry.embeddings(decode_body(await request.body(), EmbeddingRequest)))


@post(
    ["/v1/rerank", "/v3/rerank", "/rerank", "/v2/rerank"],
    status_code=200,
    opt={OPERATION: Operation(summary="Documents ranked by relevance to a query (Cohere, Jina)", body=RerankRequest)},
)
async def rerank(request: Request, entry: Entry) -> RerankResponse:
    return await unless_disconnected(request, entry.rerank(decode_body(await request.body(), RerankRequest)))


@post(
    ["/v1/score", "/v3/score", "/score"],
    status_code=200,
    opt={OPERATION: Operation(summary="Relevance scores of text pairs (vLLM)", body=ScoreRequest)},
)
async def score(request: Request, entry: Entry) -> ScoreResponse:
    return await unless_disconnected(request, entry.score(decode_body(await request.body(), ScoreRequest)))


routes = [embeddings, rerank, score]
