"""The OpenAPI document of the OpenAI and Anthropic Messages routes, generated from the protocol structs.

Handlers decode raw bodies with msgspec (strict, unknown fields refused), so Litestar cannot infer
the schema; msgspec can: the structs are the schema. Served at `GET /openapi.json`; the test suite
fuzzes the server against it with schemathesis.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec
from litestar import get

from appliance import __version__
from appliance.protocol import anthropic, response_events, responses, tokenize
from appliance.protocol import openai as api
from appliance.runtime.registry import ModelRegistry

__all__ = ["openapi_document", "routes"]

_REF = "#/components/schemas/{name}"


class ErrorDetail(msgspec.Struct):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorResponse(msgspec.Struct):
    """Every error: OpenAI's envelope."""

    error: ErrorDetail


def _json(ref: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": ref}}


def _errors(*statuses: int) -> dict[str, Any]:
    descriptions = {
        400: "invalid request",
        401: "missing or wrong API key",
        404: "unknown model",
        413: "body too large",
        503: "model not ready or overloaded",
    }
    return {
        str(s): {"description": descriptions[s], "content": _json({"$ref": _REF.format(name="ErrorResponse")})}
        for s in statuses
    }


def _generation(request: str, response: str, chunk: str, summary: str) -> dict[str, Any]:
    return {
        "post": {
            "summary": summary,
            "requestBody": {"required": True, "content": _json({"$ref": _REF.format(name=request)})},
            "responses": {
                "200": {
                    "description": "the completion, or an SSE stream of chunks when `stream` is true",
                    "content": {
                        **_json({"$ref": _REF.format(name=response)}),
                        # Each SSE event's data is a JSON chunk, the last one the literal [DONE].
                        "text/event-stream": {
                            "schema": {
                                "type": "object",
                                "description": f"data: <{chunk}> events, then data: [DONE]",
                                "properties": {"data": {"type": "string", "contentMediaType": "application/json"}},
                                "required": ["data"],
                            }
                        },
                    },
                },
                **_errors(400, 401, 404, 413, 503),
            },
        }
    }


def _messages_paths(prefix: str) -> dict[str, Any]:
    """Anthropic's Messages API: its errors take Anthropic's envelope."""
    errors = {
        status: {
            "description": error["description"],
            "content": _json({"$ref": _REF.format(name="AnthropicErrorBody")}),
        }
        for status, error in _errors(400, 401, 404, 413, 503).items()
    }
    create = _generation("MessagesRequest", "Message", "StreamEvent", "Create a message (Anthropic)")
    create["post"]["responses"].update(errors)
    create["post"]["responses"]["200"]["content"]["text/event-stream"]["schema"]["description"] = (
        "event: <type> and data: <event> per event, from message_start to message_stop (or error)"
    )
    count = {
        "post": {
            "summary": "Count a message's input tokens (Anthropic)",
            "requestBody": {"required": True, "content": _json({"$ref": _REF.format(name="CountTokensRequest")})},
            "responses": {
                "200": {"description": "the count", "content": _json({"$ref": _REF.format(name="TokenCount")})},
                **errors,
            },
        }
    }
    return {f"{prefix}/messages": create, f"{prefix}/messages/count_tokens": count}


def _easy_input_items(components: dict[str, Any]) -> None:
    """Message items and item references may leave `type` out (the SDK's "easy" messages do; the
    server fills it in), so `type` no longer tells every input item apart."""
    for name in ("InputMessage", "ItemReference"):
        components[name]["required"].remove("type")
    for variant in components["ResponsesRequest"]["properties"]["input"]["anyOf"]:
        variant.get("items", {}).pop("discriminator", None)


def _responses_paths(prefix: str) -> dict[str, Any]:
    create = _generation("ResponsesRequest", "Response", "ResponseEvent", "Create a model response")
    # The Responses API streams typed events (`event: <type>`) and ends without [DONE].
    create["post"]["responses"]["200"]["content"]["text/event-stream"]["schema"]["description"] = (
        "event: <type> and data: <ResponseEvent> per event, from response.created to response.completed, "
        "response.incomplete or response.failed"
    )
    one = [{"name": "response_id", "in": "path", "required": True, "schema": {"type": "string"}}]
    return {
        f"{prefix}/responses": create,
        f"{prefix}/responses/{{response_id}}": {
            "get": {
                "summary": "A stored response",
                "parameters": one,
                "responses": {
                    "200": {"description": "the response", "content": _json({"$ref": _REF.format(name="Response")})},
                    **_errors(400, 401, 404),
                },
            },
            "delete": {
                "summary": "Delete a stored response",
                "parameters": one,
                "responses": {
                    "200": {
                        "description": "deleted",
                        "content": _json({"$ref": _REF.format(name="DeletedResponse")}),
                    },
                    **_errors(401, 404),
                },
            },
        },
    }


@cache
def openapi_document(model_names: tuple[str, ...] = ()) -> dict[str, Any]:
    """The document; with `model_names`, `model` fields list the served models as an enum."""
    types = [
        api.ChatCompletionRequest,
        api.ChatCompletion,
        api.ChatCompletionChunk,
        api.CompletionRequest,
        api.Completion,
        api.Model,
        api.ModelList,
        ErrorResponse,
        tokenize.TokenizeRequest,
        tokenize.TokenizeResponse,
        tokenize.DetokenizeRequest,
        tokenize.DetokenizeResponse,
        responses.ResponsesRequest,
        responses.Response,
        response_events.ResponseEvent,
        responses.DeletedResponse,
        anthropic.MessagesRequest,
        anthropic.CountTokensRequest,
        anthropic.Message,
        anthropic.TokenCount,
        anthropic.AnthropicErrorBody,
    ]
    _, components = msgspec.json.schema_components(types, ref_template=_REF)
    _easy_input_items(components)
    if model_names:
        for request in (
            "ChatCompletionRequest",
            "CompletionRequest",
            "ResponsesRequest",
            "TokenizeRequest",
            "DetokenizeRequest",
            "MessagesRequest",
            "CountTokensRequest",
        ):
            components[request]["properties"]["model"] = {"type": "string", "enum": list(model_names)}
    paths: dict[str, Any] = {}
    for prefix in ("/v1", "/v3"):
        paths[f"{prefix}/chat/completions"] = _generation(
            "ChatCompletionRequest", "ChatCompletion", "ChatCompletionChunk", "Chat completion"
        )
        paths[f"{prefix}/completions"] = _generation("CompletionRequest", "Completion", "Completion", "Text completion")
        paths.update(_responses_paths(prefix))
        paths.update(_messages_paths(prefix))
        paths[f"{prefix}/models"] = {
            "get": {
                "summary": "Served models",
                "responses": {
                    "200": {"description": "models", "content": _json({"$ref": _REF.format(name="ModelList")})},
                    **_errors(401),
                },
            }
        }
        paths[f"{prefix}/models/{{model_id}}"] = {
            "get": {
                "summary": "One served model",
                "parameters": [{"name": "model_id", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {
                    "200": {"description": "the model", "content": _json({"$ref": _REF.format(name="Model")})},
                    **_errors(401, 404),
                },
            }
        }
    for prefix in ("", "/v1", "/v3"):
        for name, request, response in (
            ("tokenize", "TokenizeRequest", "TokenizeResponse"),
            ("detokenize", "DetokenizeRequest", "DetokenizeResponse"),
        ):
            paths[f"{prefix}/{name}"] = {
                "post": {
                    "summary": name.capitalize(),
                    "requestBody": {"required": True, "content": _json({"$ref": _REF.format(name=request)})},
                    "responses": {
                        "200": {"description": name, "content": _json({"$ref": _REF.format(name=response)})},
                        **_errors(400, 401, 404, 413, 503),
                    },
                }
            }
    paths["/health"] = {
        "get": {
            "summary": "Readiness",
            "responses": {
                "200": {"description": "every model ready"},
                "503": {"description": "a model is loading or failed"},
            },
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "appliance",
            "version": __version__,
            "description": "OpenAI-compatible API of the OpenVINO GenAI appliance (and Anthropic's Messages API)",
        },
        "paths": paths,
        "components": {"schemas": components},
    }


@get("/openapi.json", cache=False)
async def openapi_json(models: ModelRegistry) -> dict[str, Any]:
    return openapi_document(tuple(models.names()))


routes = [openapi_json]
