"""`Entry`: the one way into the house without HTTP. A request struct in (chat, completions,
embeddings, rerank, score, responses), its answer (or the call that streams it) out; a Realtime
session opened (`realtime_session`, `entry.realtime`).

Every request crosses the same steps here, whoever carried it in (an HTTP route, a batch line):
the access-log record is told the model and user before anything can fail (`entry.record`), the
model is looked up in one place (`engine`), and the service plans and submits it, which admits it
on the engine (`max_queued_requests`, its time limit; a batch line in the engine's batch lane,
`EngineClient.batch_turn`). The engine streams are added to the record once submitted. Waiting
for an HTTP client to leave stays with the routes (`api.handling.unless_disconnected`).
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.dialects.hosted_tools import HostedTools
from appliance.dialects.realtime.session import RealtimeLimits, RealtimeSession
from appliance.dialects.responses.plan import ResponseCall, plan_response
from appliance.dialects.responses.store import ResponseStore
from appliance.engine import EngineClient, RequestStream
from appliance.entry.realtime import open_session
from appliance.entry.record import named, streams_recorded
from appliance.errors import ApplianceError
from appliance.media import ImageLoader
from appliance.protocol.openai import ChatCompletionRequest, CompletionRequest
from appliance.protocol.responses import ResponsesRequest
from appliance.protocol.retrieval import (
    CreateEmbeddingResponse,
    EmbeddingRequest,
    RerankRequest,
    RerankResponse,
    ScoreRequest,
    ScoreResponse,
)
from appliance.runtime.registry import ModelRegistry
from appliance.service import completions, relevance, retrieval
from appliance.service.chat import ChatCall, FieldNames, open_chat
from appliance.service.field_policy import check_stream_options

__all__ = ["Entry"]


@dataclass(frozen=True)
class Entry:
    """The served models, the image loader and the stored responses, and the calls on them."""

    models: ModelRegistry
    media: ImageLoader
    responses: ResponseStore

    def engine(self, model: str) -> EngineClient:
        """The engine serving `model`; NotFound (404, param `model`) naming it otherwise."""
        return self.models.get(model)

    def realtime_session(self, model: str | None, intent: str | None, limits: RealtimeLimits) -> RealtimeSession:
        """The Realtime session `?model=<model>&intent=<intent>` opens, its engines found here and
        admitted (`entry.realtime`); the caller starts it once its transport is open."""
        return open_session(self.engine, self.media, model, intent, limits)

    async def chat(self, body: ChatCompletionRequest, names: FieldNames | None = None) -> ChatCall:
        """`body` planned and submitted; returns once the engine accepted it (`service.chat`)."""
        named(body.model, body.user)
        check_stream_options(body.stream, body.stream_options)
        return await self.open_chat(self.engine(body.model), body, names)

    async def open_chat(
        self, engine: EngineClient, body: ChatCompletionRequest, names: FieldNames | None = None
    ) -> ChatCall:
        """A chat request a dialect made (its record named, its `engine` found) submitted; `names`:
        the dialect's field names (`service.chat.open_chat`)."""
        call = await open_chat(engine, body, self.media, names)
        streams_recorded([call.stream])
        return call

    async def completion(self, body: CompletionRequest) -> list[RequestStream]:
        """One engine stream per prompt of `body`, all accepted (`service.completions`)."""
        named(body.model, body.user)
        check_stream_options(body.stream, body.stream_options)
        streams = await completions.open_completion(self.engine(body.model), body)
        streams_recorded(streams)
        return streams

    async def embeddings(self, body: EmbeddingRequest) -> CreateEmbeddingResponse:
        """The vectors of `body.input` (`service.retrieval`)."""
        named(body.model, body.user)
        response, answered = await retrieval.embed(self.engine(body.model), body)
        streams_recorded([answered])
        return response

    async def rerank(self, body: RerankRequest) -> RerankResponse:
        """`body.documents` ranked against its query (`service.relevance`)."""
        named(body.model, None)
        response, answered = await relevance.rerank(self.engine(body.model), body)
        streams_recorded([answered])
        return response

    async def score(self, body: ScoreRequest) -> ScoreResponse:
        """The relevance score of each text pair (`service.relevance`)."""
        named(body.model, None)
        response, answered = await relevance.score(self.engine(body.model), body)
        streams_recorded([answered])
        return response

    async def response(self, body: ResponsesRequest, hosted: HostedTools, owner: str) -> ResponseCall:
        """A Responses request planned (continuing `owner`'s stored `previous_response_id`) and
        submitted; errors name the Responses API's fields (`hosted` renames the tools')."""
        named(body.model, body.user)
        engine = self.engine(body.model)
        previous = await self.responses.get(owner, body.previous_response_id) if body.previous_response_id else None
        try:
            plan = plan_response(body, previous, hosted)
        except ApplianceError as exc:
            raise hosted.rename(exc) from None
        call = await self.open_chat(engine, plan.chat, plan.field_name)
        return ResponseCall(plan, call, self.responses, owner)
