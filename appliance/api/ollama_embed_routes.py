"""Ollama's `/api/embed` and `/api/embeddings` (its older route, one text): `/v1/embeddings`
underneath (`service.retrieval`), so the same vectors."""

from __future__ import annotations

import time

from litestar import Request, Response, post

from appliance.api.handling import json_response, unless_disconnected
from appliance.api.profiles import OPERATION, Operation
from appliance.dialects.ollama.models import find_model
from appliance.dialects.ollama.plan import keep_alive_seconds
from appliance.engine import EngineClient
from appliance.entry import RequestRecord, named
from appliance.entry.decoding import decode_body
from appliance.errors import ApplianceError, unsupported
from appliance.protocol.ollama import EmbeddingsRequest, EmbeddingsResponse, EmbedRequest, EmbedResponse
from appliance.protocol.retrieval import EmbeddingRequest
from appliance.runtime.registry import ModelRegistry
from appliance.service import retrieval

__all__ = ["HANDLERS", "embed", "embeddings"]


def _embedding_request(
    engine: EngineClient, model: str, texts: list[str], body: EmbedRequest | None
) -> EmbeddingRequest:
    if body is not None and body.truncate is False and engine.graph.limits.truncate_inputs:
        raise unsupported(
            "truncate: false cannot be honoured on this model: its graph cuts texts beyond the model's input "
            "(limits.truncate_inputs). Leave truncate out.",
            "truncate",
        )
    return EmbeddingRequest(input=texts, model=model, dimensions=body.dimensions if body is not None else None)


async def _vectors(
    request: Request, engine: EngineClient, embedding: EmbeddingRequest, record: RequestRecord | None
) -> tuple[list[list[float]], int]:
    """The texts' vectors, as `/v1/embeddings` gives them, and the tokens read."""
    response, answered = await unless_disconnected(request, retrieval.embed(engine, embedding))
    if record is not None:
        record.streams = [answered]
    vectors = [item.embedding for item in sorted(response.data, key=lambda item: item.index)]
    return vectors, response.usage.prompt_tokens  # type: ignore[return-value]


@post(
    "/embed",
    status_code=200,
    opt={OPERATION: Operation(summary="Embeddings of texts (Ollama)", body=EmbedRequest, answer=EmbedResponse)},
)
async def embed(request: Request, models: ModelRegistry) -> Response:
    started = time.monotonic()
    body = decode_body(await request.body(), EmbedRequest)
    record = named(body.model, None)
    engine = find_model(models, body.model)
    keep_alive_seconds(body.keep_alive)  # checked; the graph decides when the model unloads
    texts = ([body.input] if body.input else []) if isinstance(body.input, str) else body.input
    if not texts:
        engine.require("embed")
        await unless_disconnected(request, engine.ensure_loaded())
        return json_response(EmbedResponse(model=body.model, embeddings=[]))
    vectors, tokens = await _vectors(request, engine, _embedding_request(engine, body.model, texts, body), record)
    total = round((time.monotonic() - started) * 1e9)
    return json_response(
        EmbedResponse(model=body.model, embeddings=vectors, total_duration=total, prompt_eval_count=tokens)
    )


@post(
    "/embeddings",
    status_code=200,
    opt={
        OPERATION: Operation(
            summary="The embedding of one text (Ollama's older route)",
            body=EmbeddingsRequest,
            answer=EmbeddingsResponse,
        )
    },
)
async def embeddings(request: Request, models: ModelRegistry) -> Response:
    body = decode_body(await request.body(), EmbeddingsRequest)
    record = named(body.model, None)
    engine = find_model(models, body.model)
    keep_alive_seconds(body.keep_alive)
    if not body.prompt:
        engine.require("embed")
        await unless_disconnected(request, engine.ensure_loaded())
        return json_response(EmbeddingsResponse(embedding=[]))
    try:
        embedding = _embedding_request(engine, body.model, [body.prompt], None)
        vectors, _ = await _vectors(request, engine, embedding, record)
    except ApplianceError as exc:
        exc.param = "prompt" if exc.param and exc.param.startswith("input") else exc.param
        raise
    return json_response(EmbeddingsResponse(embedding=vectors[0]))


HANDLERS = [embed, embeddings]
