"""The endpoints a batch line may name, each as its HTTP route serves it: the body decoded with
the route's struct and its strictness (`entry.decoding`), the task its model must serve, and the
answer from the entry (`entry.Entry`) as the route's non-streamed JSON.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from appliance.dialects.hosted_tools import HostedTools
from appliance.dialects.responses.input import prepare_body
from appliance.entry import Entry
from appliance.entry.decoding import convert_body
from appliance.errors import ApplianceError
from appliance.graphfiles import Task
from appliance.protocol.openai import ChatCompletionRequest, CompletionRequest
from appliance.protocol.responses import ResponsesRequest
from appliance.protocol.retrieval import EmbeddingRequest
from appliance.service.completions import completion

__all__ = ["ENDPOINTS", "Endpoint", "Request"]


@dataclass(frozen=True)
class Request:
    """A line's body decoded for its endpoint; `hosted`: the Responses API's hosted tools taken out."""

    body: Any
    hosted: HostedTools

    @property
    def model(self) -> str:
        return self.body.model


@dataclass(frozen=True)
class Endpoint:
    path: str
    task: Task
    """What the model named must serve (a chat model in /v1/embeddings is refused)."""
    decode: Callable[[dict[str, Any]], Request]
    """The body (plain JSON values, edited in place) as the route decodes it; InvalidRequest naming the field."""
    answer: Callable[[Entry, Request, str], Awaitable[Any]]
    """The answer's struct, for the request's owner."""


def _plain(kind: type) -> Callable[[dict[str, Any]], Request]:
    return lambda body: Request(convert_body(body, kind), HostedTools())


def _responses_request(body: dict[str, Any]) -> Request:
    hosted = prepare_body(body)
    try:
        return Request(convert_body(body, ResponsesRequest), hosted)
    except ApplianceError as exc:
        raise hosted.rename(exc) from None


async def _chat(entry: Entry, request: Request, owner: str) -> Any:
    return await (await entry.chat(request.body)).completion()


async def _completion(entry: Entry, request: Request, owner: str) -> Any:
    return await completion(request.body, await entry.completion(request.body))


async def _embeddings(entry: Entry, request: Request, owner: str) -> Any:
    return await entry.embeddings(request.body)


async def _response(entry: Entry, request: Request, owner: str) -> Any:
    return await (await entry.response(request.body, request.hosted, owner)).response()


ENDPOINTS: dict[str, Endpoint] = {
    endpoint.path: endpoint
    for endpoint in (
        Endpoint("/v1/chat/completions", "generate", _plain(ChatCompletionRequest), _chat),
        Endpoint("/v1/completions", "generate", _plain(CompletionRequest), _completion),
        Endpoint("/v1/embeddings", "embed", _plain(EmbeddingRequest), _embeddings),
        Endpoint("/v1/responses", "generate", _responses_request, _response),
    )
}
