"""`POST /v1/embeddings` (OpenAI), `POST /v1/rerank` (Cohere/Jina, as vLLM and OVMS serve it) and
`POST /v1/score` (vLLM's), also under /v3 (OpenVINO Model Server's prefix) and bare (`/rerank` is
llama.cpp's, `/score` vLLM's)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from litestar import Request, post

from appliance.api.decoding import decode_body
from appliance.api.handling import record_request, unless_disconnected
from appliance.api.profiles import OPERATION, Operation
from appliance.protocol.retrieval import (
    CreateEmbeddingResponse,
    EmbeddingRequest,
    RerankRequest,
    RerankResponse,
    ScoreRequest,
    ScoreResponse,
)
from appliance.runtime.registry import ModelRegistry
from appliance.service import relevance, retrieval

__all__ = ["routes"]


@post(
    ["/v1/embeddings", "/v3/embeddings", "/embeddings"],
    status_code=200,
    opt={OPERATION: Operation(summary="Embeddings of texts (OpenAI)", body=EmbeddingRequest)},
)
async def embeddings(request: Request, models: ModelRegistry) -> CreateEmbeddingResponse:
    return await _answer(request, models, EmbeddingRequest, retrieval.embed)


@post(
    ["/v1/rerank", "/v3/rerank", "/rerank", "/v2/rerank"],
    status_code=200,
    opt={OPERATION: Operation(summary="Documents ranked by relevance to a query (Cohere, Jina)", body=RerankRequest)},
)
async def rerank(request: Request, models: ModelRegistry) -> RerankResponse:
    return await _answer(request, models, RerankRequest, relevance.rerank)


@post(
    ["/v1/score", "/v3/score", "/score"],
    status_code=200,
    opt={OPERATION: Operation(summary="Relevance scores of text pairs (vLLM)", body=ScoreRequest)},
)
async def score(request: Request, models: ModelRegistry) -> ScoreResponse:
    return await _answer(request, models, ScoreRequest, relevance.score)


async def _answer(request: Request, models: ModelRegistry, body_type: type, serve: Callable) -> Any:
    """The body decoded as `body_type`, answered by `serve(engine, body)`, and the access log told."""
    body = decode_body(await request.body(), body_type)
    record = record_request(body.model, getattr(body, "user", None))
    response, answered = await unless_disconnected(request, serve(models.get(body.model), body))
    if record is not None:
        record.streams = [answered]
    return response


routes = [embeddings, rerank, score]
