"""Elasticsearch's chat_completion inference API (`POST /_inference/.../_stream`) on top of the
chat service (`service.chat`).

Elasticsearch's unified chat request is an OpenAI chat request without `stream`: this API only
streams, with usage at the end (unless `stream_options.include_usage` is false). Each OpenAI chunk
is wrapped as `{"chat_completion": chunk}` (the route frames it as `event: message`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from appliance.engine import EngineClient
from appliance.errors import InvalidRequest, unsupported
from appliance.runtime.registry import ModelRegistry
from appliance.service.chat import ChatCall

__all__ = ["chat_body", "chat_engine", "wrapped_chunks"]


def chat_engine(models: ModelRegistry, body: Any, inference_id: str) -> EngineClient:
    """The body's `model` or the inference endpoint's id when either is a served model, else the
    only model served (the endpoint's `model_id` is often an upstream name such as gpt-4o)."""
    names = models.names()
    requested = body.get("model") if isinstance(body, dict) else None
    if isinstance(body, dict) and "model" in body and not isinstance(requested, str):
        raise InvalidRequest(
            "Invalid value for 'model': Expected `str` (a model name); or leave it out.",
            param="model",
            code="invalid_type",
        )
    for name in (requested, inference_id):
        if isinstance(name, str) and name in names:
            return models.get(name)
    if len(names) == 1:
        return models.get(names[0])
    raise InvalidRequest(
        f"Neither model '{requested}' nor inference id '{inference_id}' is served here; served models: "
        f"{', '.join(names)}.",
        param="model",
        code="model_not_found",
    )


def chat_body(body: Any, model: str) -> dict[str, Any]:
    """The OpenAI chat request this Elasticsearch request means: streamed, with usage unless the
    body's own `stream_options` say otherwise (kept, so the chat request's decoder checks them)."""
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.", code="invalid_type")
    if body.get("stream", True) is not True:
        raise unsupported("This route always streams: leave `stream` out, or send true.", "stream")
    options = body.get("stream_options")
    if options is None:
        options = {}
    if isinstance(options, dict):
        options = {"include_usage": True, **options}
    return {**body, "model": model, "stream": True, "stream_options": options}


async def wrapped_chunks(call: ChatCall) -> AsyncIterator[dict[str, object]]:
    """`{"chat_completion": chunk}` per OpenAI chunk (the model field names the served model)."""
    async for chunk in call.chunks():
        yield {"chat_completion": chunk}
