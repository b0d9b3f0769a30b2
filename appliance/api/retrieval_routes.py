"""`POST /v1/embeddings` (OpenAI) and `POST /v1/rerank` (Cohere/Jina, as vLLM and OVMS serve it),
also under /v3 (OpenVINO Model Server's prefix) and, for rerank, bare `/rerank` (llama.cpp)."""

from __future__ import annotations

from litestar import Request, post

from appliance.api.decoding import decode_body
from appliance.api.handling import record_request, unless_disconnected
from appliance.protocol.retrieval import CreateEmbeddingResponse, EmbeddingRequest, RerankRequest, RerankResponse
from appliance.runtime.registry import ModelRegistry
from appliance.service import retrieval as service

__all__ = ["routes"]


@post(["/v1/embeddings", "/v3/embeddings", "/embeddings"], status_code=200)
async def embeddings(request: Request, models: ModelRegistry) -> CreateEmbeddingResponse:
    body = decode_body(await request.body(), EmbeddingRequest)
    record = record_request(body.model, body.user)
    response, answered = await unless_disconnected(request, service.embed(models.get(body.model), body))
    if record is not None:
        record.streams = [answered]
    return response


@post(["/v1/rerank", "/v3/rerank", "/rerank", "/v2/rerank"], status_code=200)
async def rerank(request: Request, models: ModelRegistry) -> RerankResponse:
    body = decode_body(await request.body(), RerankRequest)
    record = record_request(body.model, None)
    response, answered = await unless_disconnected(request, service.rerank(models.get(body.model), body))
    if record is not None:
        record.streams = [answered]
    return response


routes = [embeddings, rerank]
