"""The conversation side of a `realtime` session: `session.Conversation`'s seam served by a
`conversation.Conversation` on the session's chat model.

The session's configuration is read afresh for every response (`TalkSettings.of`: what
`session.update` last set), so a response answers with the instructions, tools and voice in force
when it starts; `session.update` is checked against the conversation first (`on_update`), so a
voice the voice graph lacks is refused there, naming `session.audio.output.voice`. Server VAD's
`create_response` decides whether a committed turn is answered at once, its `interrupt_response`
whether speech that starts cuts the answer in flight (barge-in).
"""

from __future__ import annotations

from msgspec import Struct

from appliance.dialects.realtime.conversation import Conversation
from appliance.dialects.realtime.plan import TalkSettings
from appliance.dialects.realtime.session import RealtimeSession, Turn
from appliance.engine import EngineClient
from appliance.errors import ApplianceError
from appliance.media import ImageLoader
from appliance.protocol.realtime import ClientEvent, ConversationItemAdded, ResponseCreate, SessionConfig

__all__ = ["TalkSession"]


class TalkSession:
    """A conversation plugged into `session` (see the module's docstring); `engine`: the chat
    model the client connected with, `media`: the server's loader."""

    def __init__(self, session: RealtimeSession, engine: EngineClient, media: ImageLoader) -> None:
        self.session = session
        self.conversation = Conversation(engine, TalkSettings(model=session.model), self._send, media)

    async def _send(self, event: Struct) -> None:
        if isinstance(event, ConversationItemAdded):
            self.session.last_item_id = self.conversation.items.last_id()
        self.session.send(event)

    def _refresh(self) -> None:
        """The session's configuration as it is now (400 naming what cannot be served)."""
        self.on_update(self.session.settings.config)

    def on_update(self, config: SessionConfig) -> None:
        """Take `config` for the responses to come, or refuse it (400 naming the field: a voice
        the voice graph lacks, audio out with no voice graph) before the session takes it."""
        self.conversation.update(TalkSettings.of(self.session.model, config))

    async def on_event(self, event: ClientEvent) -> None:
        if isinstance(event, ResponseCreate):
            self._refresh()
        await self.conversation.handle(event)

    async def on_speech_started(self, item_id: str, audio_start_ms: int) -> None:
        turns = self.session.settings.turns
        if turns is None or turns.interrupt_response:
            await self.conversation.speech_started()

    async def on_turn(self, turn: Turn) -> None:
        turns = self.session.settings.turns
        respond = turns is not None and turns.create_response
        try:
            self._refresh()
            await self.conversation.user_turn(turn.item_id, turn.transcript, respond=respond)
        except ApplianceError as exc:  # the session goes on; the client learns why no answer came
            self.session.refuse(exc, "response.create", None)

    async def close(self) -> None:
        await self.conversation.close()
