"""A Realtime conversation session's conversation: its items and its one response in flight,
free of the transport.

The session hands it the client's conversation and response events (`handle`), each committed
user turn (`user_turn`: the item id and the transcript its audio was heard as) and the start of
speech while an answer plays (`speech_started`: barge-in), and gives it a `send` for server events.
Bounds: one response at a time (a second `response.create` is refused with
`conversation_already_has_active_response`, as OpenAI does), `items.MAX_ITEMS` items, and a
session that ends (`close`) cancels its response's work in the engines. An event refused raises
`ApplianceError` (the session sends the `error` event naming it); a response that fails once
started ends with `response.done` `failed`, one refused before the engine took it with an `error`
event naming the `response.create` it answers.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from msgspec import Struct

from appliance.dialects.realtime.answer import Send, Spoken, TalkResponse, Voice
from appliance.dialects.realtime.items import ConversationItems, snapshot
from appliance.dialects.realtime.plan import TalkPlan, TalkSettings, plan_talk
from appliance.engine import EngineClient
from appliance.errors import ApplianceError, InvalidRequest
from appliance.media import ImageLoader
from appliance.protocol.realtime import (
    UNSET,
    ContentPart,
    ConversationItem,
    ConversationItemAdded,
    ConversationItemCreate,
    ConversationItemDelete,
    ConversationItemDeleted,
    ConversationItemDone,
    ConversationItemRetrieve,
    ConversationItemRetrieved,
    ConversationItemTruncate,
    ConversationItemTruncated,
    ErrorEvent,
    MessageItem,
    OutputAudioBufferClear,
    RealtimeError,
    ResponseCancel,
    ResponseCreate,
    ResponseCreateParams,
)
from appliance.service.chat import open_chat

__all__ = ["Conversation", "error_event"]

CLIENT_EVENTS = (
    ConversationItemCreate,
    ConversationItemDelete,
    ConversationItemRetrieve,
    ConversationItemTruncate,
    OutputAudioBufferClear,
    ResponseCreate,
    ResponseCancel,
)
"""The client events a conversation handles."""


def error_event(exc: ApplianceError, event_id: str | None) -> ErrorEvent:
    """The `error` event telling the client why its event `event_id` was refused."""
    return ErrorEvent(
        error=RealtimeError(message=exc.message, type=exc.type, code=exc.code, param=exc.param, event_id=event_id)
    )


class Conversation:
    """The items of one session on `engine` (a chat graph), its answers spoken by the graph's
    `voice_model`; `media`: the server's loader (its encoding pool serves the voice)."""

    def __init__(self, engine: EngineClient, settings: TalkSettings, send: Send, media: ImageLoader) -> None:
        self.engine = engine
        self.send = send
        self.media = media
        self.items = ConversationItems()
        self.spoken: dict[str, Spoken] = {}
        """Assistant items spoken, by id: what `conversation.item.truncate` cuts."""
        self.response: TalkResponse | None = None
        self._task: asyncio.Task[None] | None = None
        self.settings = self.checked(settings)

    # -- settings -----------------------------------------------------------------------------

    @property
    def voice_engine(self) -> EngineClient | None:
        named = self.engine.graph.voice_model
        return None if named is None or self.engine.peer is None else self.engine.peer(named)

    def default_modalities(self) -> tuple[str, ...]:
        """Audio when the chat graph names a voice, else text."""
        return ("audio",) if self.engine.graph.voice_model is not None else ("text",)

    def checked(self, settings: TalkSettings, param: str = "session") -> TalkSettings:
        """`settings` as this conversation can answer them: 400 for audio with no voice graph or a
        voice the graph does not have."""
        if settings.output_modalities is None:
            settings = replace(settings, output_modalities=self.default_modalities())
        voices = self.voice_engine
        if "audio" not in settings.output_modalities:
            return settings
        if voices is None:
            raise InvalidRequest(
                f"Model '{self.engine.name}' has no voice: its graph names no voice_model; ask for "
                'output_modalities ["text"].',
                param=f"{param}.output_modalities",
                code="unsupported_value",
            )
        graph = voices.graph
        voice = settings.voice or graph.default_voice
        if voice not in graph.voices:
            raise InvalidRequest(
                f"Voice '{voice}' is not one of model '{graph.name}''s voices: {', '.join(graph.voices)}.",
                param=f"{param}.audio.output.voice",
                code="invalid_value",
            )
        return replace(settings, voice=voice)

    def update(self, settings: TalkSettings) -> None:
        """`session.update`'s new settings, for the responses that start after it."""
        self.settings = self.checked(settings)

    # -- client events ------------------------------------------------------------------------

    async def handle(self, event: Struct) -> None:
        """A conversation or response event from the client (one of `CLIENT_EVENTS`)."""
        if isinstance(event, ConversationItemCreate):
            await self.add(event.item, event.previous_item_id)
        elif isinstance(event, ConversationItemDelete):
            await self.delete(event.item_id)
        elif isinstance(event, ConversationItemRetrieve):
            await self.send(ConversationItemRetrieved(item=snapshot(self.items.get(event.item_id))))
        elif isinstance(event, ConversationItemTruncate):
            await self.truncate(event)
        elif isinstance(event, OutputAudioBufferClear):
            raise InvalidRequest(
                "output_audio_buffer.clear is for WebRTC connections, whose server plays the audio; on a "
                "websocket the client plays it: send response.cancel and conversation.item.truncate.",
                param="type",
                code="unsupported_event",
            )
        elif isinstance(event, ResponseCreate):
            self.create_response(event.response, event.event_id)
        elif isinstance(event, ResponseCancel):
            current = self.response.id if self.response is not None else None
            if self._task is None or event.response_id not in (None, current):
                raise InvalidRequest(
                    "There is no response in progress to cancel"
                    + (f" with id '{event.response_id}'." if event.response_id else "."),
                    param="response_id",
                    code="response_cancel_not_active",
                )
            await self.cancel_response("client_cancelled")

    async def add(self, item: ConversationItem, previous_item_id: str | None = None) -> str | None:
        """Add `item` (400 naming its field when the conversation cannot hold it) and tell the
        client; returns the id of the item before it."""
        if isinstance(item, MessageItem):
            item.status = "completed"
        before = await self._added(item, previous_item_id)
        await self.send(ConversationItemAdded(item=snapshot(item), previous_item_id=before))
        await self.send(ConversationItemDone(item=snapshot(item), previous_item_id=before))
        return before

    async def _added(self, item: ConversationItem, previous_item_id: str | None = None) -> str | None:
        before, dropped = self.items.add(item, previous_item_id)
        for item_id in dropped:
            self.spoken.pop(item_id, None)
            await self.send(ConversationItemDeleted(item_id=item_id))
        return before

    async def delete(self, item_id: str) -> None:
        if self.response is not None and any(item.id == item_id for item in self.response.output):
            raise InvalidRequest("The item belongs to the response in progress.", param="item_id")
        self.items.delete(item_id)
        self.spoken.pop(item_id, None)
        await self.send(ConversationItemDeleted(item_id=item_id))

    async def truncate(self, event: ConversationItemTruncate) -> None:
        """Cut an assistant item's transcript to the sentences heard before `audio_end_ms`."""
        self.items.get(event.item_id)
        spoken = self.spoken.get(event.item_id)
        if (
            self.response is not None
            and self.response.message is not None
            and self.response.message.id == event.item_id
        ):
            await self.cancel_response("client_cancelled")  # the client stopped playing it
            spoken = self.spoken.get(event.item_id)
        if spoken is None:
            raise InvalidRequest("Only an assistant message with audio can be truncated.", param="item_id")
        if event.content_index != 0:
            raise InvalidRequest("The item holds one content part: content_index is 0.", param="content_index")
        if event.audio_end_ms > spoken.milliseconds:
            raise InvalidRequest(
                f"audio_end_ms is {event.audio_end_ms}; the item's audio lasts {spoken.milliseconds} ms.",
                param="audio_end_ms",
            )
        item = self.items.get(event.item_id)
        assert isinstance(item, MessageItem)
        item.content = [ContentPart(type="output_audio", transcript=spoken.heard(event.audio_end_ms))]
        spoken.milliseconds = event.audio_end_ms
        await self.send(
            ConversationItemTruncated(item_id=event.item_id, content_index=0, audio_end_ms=event.audio_end_ms)
        )

    # -- turns and responses ------------------------------------------------------------------

    async def user_turn(
        self, item_id: str, transcript: str, *, respond: bool, previous_item_id: str | None = None
    ) -> None:
        """A committed user turn, heard as `transcript`, joins the conversation (the session has
        announced its item); `respond`: answer it now (server VAD's `create_response`), unless
        nothing was heard or an answer is already in flight."""
        item = MessageItem(
            role="user",
            content=[ContentPart(type="input_audio", transcript=transcript)],
            id=item_id,
            status="completed",
        )
        await self._added(item, previous_item_id)
        if respond and transcript.strip() and self.response is None:
            self.create_response(None, None)

    async def speech_started(self) -> None:
        """Barge-in: the user speaks while an answer plays; it stops where its audio was sent."""
        if self.response is not None:
            await self.cancel_response("turn_detected")

    def create_response(self, params: ResponseCreateParams | None, event_id: str | None) -> None:
        """Start answering (the events follow from a task of its own); 400 at once when a
        response is already in flight or the overrides cannot be served."""
        if self._task is not None:
            raise InvalidRequest(
                "Conversation already has an active response in progress: wait for response.done or send "
                "response.cancel first.",
                param="response",
                code="conversation_already_has_active_response",
            )
        settings = self.checked(self.settings.overridden(params), "response")
        plan = plan_talk(settings, self.items)
        metadata = None if params is None or params.metadata is UNSET else params.metadata
        self._task = asyncio.ensure_future(self._answer(plan, event_id, metadata))

    async def _answer(self, plan: TalkPlan, event_id: str | None, metadata: dict[str, str] | None) -> None:
        response = None
        try:
            try:
                call = await open_chat(self.engine, plan.chat, self.media, plan.field_name)
            except ApplianceError as exc:
                await self.send(error_event(exc, event_id))
                return
            voice = None
            if plan.settings.voice is not None and (engine := self.voice_engine) is not None:
                voice = Voice(engine, plan.settings.voice, plan.settings.speed, self.media.encoding)
            response = self.response = TalkResponse(plan, call, voice, self.send, metadata)
            response.on_item = self._added
            await response.run()
        finally:
            self.response, self._task = None, None
            if response is not None and response.voice is not None:
                for item in response.output:
                    if isinstance(item, MessageItem) and item.id is not None:
                        self.spoken[item.id] = response.spoken

    async def cancel_response(self, reason: str) -> None:
        """Stop the response in flight (its engine work cancelled) and wait for its `response.done`."""
        task, response = self._task, self.response
        if task is None:
            return
        if response is not None:
            response.cancel_reason = reason
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    async def close(self) -> None:
        """The session ended: cancel the response's work, telling no one."""
        task = self._task
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
