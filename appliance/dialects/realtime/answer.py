"""One Realtime response, from `response.created` to `response.done`: a chat call's answer pieces
as the Realtime API's events, its text spoken sentence by sentence.

The model's text opens an assistant message item (`response.output_item.added`,
`conversation.item.added`, `response.content_part.added`) and streams as
`response.output_text.delta` (text modality) or `response.output_audio_transcript.delta` (audio);
with audio, each finished sentence is handed to the voice graph (`service.tts.open_speech`, the
same checks and engine calls as `/v1/audio/speech`) while the model writes the next, and its
samples leave as `response.output_audio.delta` (`speaking.pcm16`). A tool call the model makes is a
`function_call` item with its arguments in one `response.function_call_arguments.delta`.
`response.done` carries the output items and the usage (text tokens as the chat model counts
them; audio out as the voice's acoustic frames).

`cancel(reason)` stops the answer: the chat stream and the speech in the engine are cancelled (the
task running them is), the items are closed `incomplete`, the assistant's transcript cut to the
sentences whose audio was sent (`Spoken`), and `response.done` says `cancelled`.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from msgspec import Struct

from appliance.dialects.realtime.items import new_id, snapshot
from appliance.dialects.realtime.plan import TalkPlan
from appliance.dialects.realtime.speaking import OUTPUT_RATE, Sentences, pcm16
from appliance.engine import EngineClient
from appliance.errors import ApplianceError
from appliance.media.work_pool import WorkPool
from appliance.protocol.realtime import (
    AudioPCM,
    ContentPart,
    ConversationItem,
    ConversationItemAdded,
    ConversationItemDone,
    FunctionCallItem,
    InputTokenDetails,
    MessageItem,
    OutputTokenDetails,
    RealtimeResponse,
    ResponseAudio,
    ResponseAudioOutput,
    ResponseContentPartAdded,
    ResponseContentPartDone,
    ResponseCreated,
    ResponseDone,
    ResponseFunctionCallArgumentsDelta,
    ResponseFunctionCallArgumentsDone,
    ResponseOutputAudioDelta,
    ResponseOutputAudioDone,
    ResponseOutputAudioTranscriptDelta,
    ResponseOutputAudioTranscriptDone,
    ResponseOutputItemAdded,
    ResponseOutputItemDone,
    ResponseOutputTextDelta,
    ResponseOutputTextDone,
    ResponseStatusDetails,
    ResponseStatusError,
    ResponseUsage,
)
from appliance.protocol.speech import SpeechRequest
from appliance.service import tts
from appliance.service.chat import ChatCall
from appliance.service.pieces import ContentPiece, FinishPiece, ToolCallPiece, UsagePiece

__all__ = ["Send", "Spoken", "TalkResponse", "Voice"]

Send = Callable[[Struct], Awaitable[None]]
"""Sends one server event to the client (the session's transport)."""
CancelReason = str
"""`turn_detected` (the user spoke: barge-in) or `client_cancelled` (`response.cancel`)."""


@dataclass(frozen=True)
class Voice:
    """Who speaks a conversation's answers: the chat graph's `voice_model`, in one of its voices."""

    engine: EngineClient
    name: str
    speed: float
    encoding: WorkPool


@dataclass
class Spoken:
    """An assistant item's audio as sent: each sentence's first millisecond and text."""

    sentences: list[tuple[int, str]] = field(default_factory=list)
    milliseconds: int = 0

    def heard(self, end_ms: int | None = None) -> str:
        """The text of the sentences whose audio began before `end_ms` (None: all sent)."""
        end = self.milliseconds if end_ms is None else end_ms
        return " ".join(text for start, text in self.sentences if start < end)


class TalkResponse:
    """A response being answered; `run` sends its events until `response.done`."""

    def __init__(
        self, plan: TalkPlan, call: ChatCall, voice: Voice | None, send: Send, metadata: dict[str, str] | None = None
    ) -> None:
        self.plan = plan
        self.metadata = metadata
        """`response.create`'s, echoed (clients tell their responses apart by it)."""
        self.call = call
        self.voice = voice if "audio" in plan.settings.output_modalities else None
        self.send = send
        self.id = new_id("resp")
        self.cancel_reason: CancelReason | None = None
        self.spoken = Spoken()
        self.output: list[ConversationItem] = []
        self.message: MessageItem | None = None
        self.on_item: Callable[[ConversationItem], Awaitable[str | None]] | None = None
        """Adds an output item to the conversation, returning the id before it (set by the conversation)."""
        self._text = ""
        self._finish = "stop"
        self._usage: UsagePiece | None = None
        self._frames = 0

    def resource(self, status: str, details: ResponseStatusDetails | None = None) -> RealtimeResponse:
        settings = self.plan.settings
        audio = None
        if self.voice is not None:
            audio = ResponseAudio(output=ResponseAudioOutput(format=AudioPCM(), voice=self.voice.name))
        return RealtimeResponse(
            id=self.id,
            status=status,
            status_details=details,
            output=[snapshot(item) for item in self.output],
            output_modalities=list(settings.output_modalities),
            max_output_tokens=settings.max_output_tokens,
            conversation_id="conv_default",
            audio=audio,
            usage=self._usage_resource() if status != "in_progress" else None,
            metadata=self.metadata,
        )

    async def run(self) -> None:
        """The response's events; the engine's work is cancelled however it ends."""
        status, details = "completed", None
        try:
            await self.send(ResponseCreated(response=self.resource("in_progress")))
            await self._answer()
            if self._finish == "length":
                status, details = "incomplete", ResponseStatusDetails(type="incomplete", reason="max_output_tokens")
        except asyncio.CancelledError:
            if self.cancel_reason is None:
                raise  # the session is closing: nobody to tell
            status, details = "cancelled", ResponseStatusDetails(type="cancelled", reason=self.cancel_reason)
        except ApplianceError as exc:
            error = ResponseStatusError(type=exc.type, code=exc.code, message=exc.message)
            status, details = "failed", ResponseStatusDetails(type="failed", error=error)
        finally:
            self.call.stream.cancel()  # a no-op once finished
        await self._close_message("completed" if status == "completed" else "incomplete")
        await self.send(ResponseDone(response=self.resource(status, details)))

    async def _answer(self) -> None:
        sentences: asyncio.Queue[str | None] = asyncio.Queue()
        speaker = asyncio.ensure_future(self._speak(sentences)) if self.voice is not None else None
        splitter = Sentences()
        try:
            async for piece in self.call.pieces():
                if isinstance(piece, ContentPiece) and piece.text:
                    await self._write(piece.text)
                    for sentence in splitter.feed(piece.text) if speaker else ():
                        sentences.put_nowait(sentence)
                elif isinstance(piece, ToolCallPiece):
                    await self._call(piece)
                elif isinstance(piece, FinishPiece):
                    self._finish = piece.reason
                elif isinstance(piece, UsagePiece):
                    self._usage = piece
            if speaker is not None:
                for sentence in splitter.finish():
                    sentences.put_nowait(sentence)
                sentences.put_nowait(None)
                await speaker
        finally:
            if speaker is not None:
                speaker.cancel()

    async def _write(self, text: str) -> None:
        if self.message is None:
            await self._open_message()
        self._text += text
        event = ResponseOutputAudioTranscriptDelta if self.voice is not None else ResponseOutputTextDelta
        await self.send(event(delta=text, **self._where()))

    def _where(self, message: MessageItem | None = None) -> dict:
        """Where the message's content part is: the fields of its content events."""
        message = message or self.message
        assert message is not None and message.id is not None
        return {
            "response_id": self.id,
            "item_id": message.id,
            "output_index": self.output.index(message),
            "content_index": 0,
        }

    def _part(self, text: str, *, in_item: bool) -> ContentPart:
        """The message's one part holding `text`: as the item holds it, or as content part events name it."""
        if self.voice is not None:
            return ContentPart(type="output_audio" if in_item else "audio", transcript=text)
        return ContentPart(type="output_text" if in_item else "text", text=text)

    async def _open_message(self) -> None:
        self.message = MessageItem(role="assistant", content=[], status="in_progress", id=new_id("item"))
        await self._add_item(self.message)
        self.message.content.append(self._part("", in_item=True))
        await self.send(ResponseContentPartAdded(part=self._part("", in_item=False), **self._where()))

    async def _add_item(self, item: ConversationItem) -> None:
        self.output.append(item)
        previous = await self.on_item(item) if self.on_item is not None else None
        await self.send(
            ResponseOutputItemAdded(response_id=self.id, output_index=len(self.output) - 1, item=snapshot(item))
        )
        await self.send(ConversationItemAdded(item=snapshot(item), previous_item_id=previous))

    async def _finish_item(self, item: ConversationItem, status: str) -> None:
        item.status = status
        index = self.output.index(item)
        await self.send(ResponseOutputItemDone(response_id=self.id, output_index=index, item=snapshot(item)))
        await self.send(ConversationItemDone(item=snapshot(item)))

    async def _close_message(self, status: str) -> None:
        """The message item's last events, its text cut to what was heard unless completed."""
        message, self.message = self.message, None
        if message is None:
            return
        where = self._where(message)
        if self.voice is not None:
            text = self._text if status == "completed" else self.spoken.heard()
            await self.send(ResponseOutputAudioDone(**where))
            await self.send(ResponseOutputAudioTranscriptDone(transcript=text, **where))
        else:
            text = self._text
            await self.send(ResponseOutputTextDone(text=text, **where))
        message.content[0] = self._part(text, in_item=True)
        await self.send(ResponseContentPartDone(part=self._part(text, in_item=False), **where))
        await self._finish_item(message, status)

    async def _call(self, piece: ToolCallPiece) -> None:
        if self.message is not None:
            await self._close_message("completed")
        item = FunctionCallItem(
            name=piece.name, arguments="", call_id=piece.id, id=new_id("item"), status="in_progress"
        )
        await self._add_item(item)
        where = {"response_id": self.id, "item_id": item.id, "output_index": len(self.output) - 1, "call_id": piece.id}
        await self.send(ResponseFunctionCallArgumentsDelta(delta=piece.arguments, **where))
        item.arguments = piece.arguments
        await self.send(ResponseFunctionCallArgumentsDone(name=piece.name, arguments=piece.arguments, **where))
        await self._finish_item(item, "completed")

    async def _speak(self, sentences: asyncio.Queue[str | None]) -> None:
        """Each sentence spoken in turn as `response.output_audio.delta` events."""
        voice = self.voice
        assert voice is not None
        while (sentence := await sentences.get()) is not None:
            request = SpeechRequest(
                input=sentence, model=voice.engine.name, voice=voice.name, speed=voice.speed, response_format="pcm"
            )
            speech = await tts.open_speech(voice.engine, request, voice.encoding)
            try:
                self.spoken.sentences.append((self.spoken.milliseconds, sentence))
                async for samples, rate, _ in speech.samples():
                    audio = pcm16(samples, rate)
                    if audio:
                        self.spoken.milliseconds += len(audio) * 1000 // (2 * OUTPUT_RATE)
                        await self.send(
                            ResponseOutputAudioDelta(delta=base64.b64encode(audio).decode(), **self._where())
                        )
                self._frames += (await speech.work).frames
            finally:
                speech.work.cancel()  # a no-op once spoken; else the engine stops before its next sentence

    def _usage_resource(self) -> ResponseUsage:
        usage = self._usage
        prompt = usage.prompt_tokens if usage else self.call.stream.prompt_tokens
        completion = usage.completion_tokens if usage else self.call.stream.completion_tokens
        output = completion + self._frames
        return ResponseUsage(
            total_tokens=prompt + output,
            input_tokens=prompt,
            output_tokens=output,
            input_token_details=InputTokenDetails(text_tokens=prompt),
            output_token_details=OutputTokenDetails(text_tokens=completion, audio_tokens=self._frames),
        )
