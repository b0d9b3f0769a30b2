"""Realtime conversation sessions on fake engines (issue 53): the items as the chat request that
answers them, a response's events in the SDK's order (text, audio spoken sentence by sentence,
function calls), one response at a time, barge-in cancelling the answer in the engines and
cutting its item to the audio sent, truncation, and a session that ends cancelling its work."""

from __future__ import annotations

import asyncio
import base64
import functools

import msgspec
import numpy as np
import pytest

from appliance.dialects.realtime import session as live
from appliance.dialects.realtime.conversation import Conversation
from appliance.dialects.realtime.items import ConversationItems
from appliance.dialects.realtime.plan import TalkSettings, plan_talk
from appliance.dialects.realtime.speaking import Sentences, pcm16
from appliance.dialects.realtime.talk import TalkSession
from appliance.engine.messages import SpeechAudio, Synthesized
from appliance.errors import ApplianceError, InvalidRequest
from appliance.graphfiles import Graph
from appliance.media import ImageLoader
from appliance.protocol import realtime as rt
from appliance.protocol.openai import AssistantMessage, SystemMessage, ToolMessage, UserMessage
from appliance.protocol.realtime import (
    UNSET,
    ContentPart,
    ConversationItemCreate,
    ConversationItemTruncate,
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionTool,
    MessageItem,
    RealtimeAudio,
    RealtimeSession,
    ResponseCancel,
    ResponseCreate,
    ResponseCreateParams,
)
from appliance.protocol.realtime import AudioOutput as OutputConfig
from tests.fakes import FakeEngineClient, fake_graph
from tests.unit.test_realtime_session import FakeHearing, append, pcm, settle

ANSWER = "Hello there. How are you today? Fine."


def run(test):
    """The async test run on its own event loop."""

    @functools.wraps(test)
    def runner(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))

    return runner


class FakeVoice(FakeEngineClient):
    """A voice graph that says each text as 0.1 s of 24 kHz tone per word, in two pieces; `hold`
    keeps it from finishing a sentence until released (to barge in while it speaks)."""

    def __init__(self) -> None:
        super().__init__(fake_graph("voice"))
        self.said: list[str] = []
        self.stopped = 0
        self.release = asyncio.Event()
        self.hold_speech = False

    def admit(self, task: str) -> None:
        pass

    async def synthesize(self, text, voice, speed=1.0, on_audio=None) -> Synthesized:
        self.said.append(text)
        samples = np.full(2400 * len(text.split()), 0.25, np.float32)
        half = len(samples) // 2
        try:
            on_audio(SpeechAudio(request_id=0, samples=samples[:half].tobytes(), sample_rate=24_000, last=False))
            await asyncio.sleep(0)
            if self.hold_speech:
                await self.release.wait()
            on_audio(SpeechAudio(request_id=0, samples=samples[half:].tobytes(), sample_rate=24_000, last=True))
        except asyncio.CancelledError:
            self.stopped += 1
            raise
        return Synthesized(request_id=0, samples=b"", sample_rate=24_000, tokens=len(text), frames=len(samples) // 300)


def _talker(voice: FakeVoice | None = None, parser: str | None = None) -> FakeEngineClient:
    graph = Graph(name="talker", model_path="/nonexistent", voice_model="voice" if voice else None, tool_parser=parser)
    engine = FakeEngineClient(graph)
    engine.start()
    if voice is not None:
        voice.start()
        engine.peer = lambda name: voice
    return engine


class Client:
    """The events a conversation sent."""

    def __init__(self) -> None:
        self.events: list[msgspec.Struct] = []

    async def send(self, event: msgspec.Struct) -> None:
        self.events.append(event)

    def types(self) -> list[str]:
        return [type(event).__struct_config__.tag for event in self.events]

    def of(self, kind: str) -> list:
        return [event for event in self.events if type(event).__struct_config__.tag == kind]


def _user(text: str) -> MessageItem:
    return MessageItem(role="user", content=[ContentPart(type="input_text", text=text)])


async def _conversation(
    modality: str = "text", voice: FakeVoice | None = None, **engine
) -> tuple[Conversation, Client]:
    client = Client()
    talker = _talker(voice, **engine)
    settings = TalkSettings(model="talker", output_modalities=(modality,))
    return Conversation(talker, settings, client.send, ImageLoader()), client


async def _answering(*, hold: bool = False) -> tuple[FakeVoice, Conversation, Client]:
    """A voice conversation answering a spoken turn with `ANSWER` (`hold`: its speech held mid-sentence)."""
    voice = FakeVoice()
    voice.hold_speech = hold
    conversation, client = await _conversation("audio", voice)
    conversation.engine.script = ANSWER
    await conversation.user_turn("item_user1", "hi there", respond=True)
    return voice, conversation, client


async def _answered(conversation: Conversation) -> None:
    task = conversation._task
    assert task is not None
    await asyncio.wait_for(task, 5)


# -- items as a chat request ---------------------------------------------------------------


def test_items_become_the_chat_messages_in_order() -> None:
    items = ConversationItems()
    items.add(_user("what time is it"))
    items.add(MessageItem(role="assistant", content=[ContentPart(type="output_audio", transcript="Let me look.")]))
    items.add(FunctionCallItem(name="clock", arguments="{}", call_id="call_1"))
    items.add(FunctionCallOutputItem(call_id="call_1", output="12:00"))
    items.add(MessageItem(role="user", content=[ContentPart(type="input_audio", transcript="thanks")]))
    tools = (FunctionTool(name="clock", parameters={"type": "object"}),)
    config = RealtimeSession(instructions="Be brief.", tools=list(tools), tool_choice="required")
    settings = TalkSettings.of("m", config)
    plan = plan_talk(settings.overridden(ResponseCreateParams(max_output_tokens=50)), items)
    messages = plan.chat.messages
    assert [type(m) for m in messages] == [SystemMessage, UserMessage, AssistantMessage, ToolMessage, UserMessage]
    assert messages[0].content == "Be brief." and messages[1].content == "what time is it"
    assert messages[2].content == "Let me look." and messages[2].tool_calls[0].id == "call_1"
    assert messages[3].tool_call_id == "call_1" and messages[4].content == "thanks"
    chat = plan.chat
    assert (chat.max_completion_tokens, chat.tool_choice, chat.stream) == (50, "required", True)
    assert chat.tools[0].function.name == "clock"
    user_id = list(items._items)[0]
    assert plan.field_name("messages[1].content") == f"item[{user_id}].content"
    assert plan.field_name("messages[0].content") == "instructions.content"
    assert plan.field_name("max_completion_tokens") == "max_output_tokens"


@pytest.mark.parametrize(
    ("item", "param"),
    [
        (FunctionCallOutputItem(call_id="nobody", output="x"), "item.call_id"),
        (
            MessageItem(role="user", content=[ContentPart(type="input_audio", audio="AAAA")]),
            "item.content[0].transcript",
        ),
        (MessageItem(role="user", content=[ContentPart(type="output_text", text="x")]), "item.content[0].type"),
        (MessageItem(role="user", content=[ContentPart(type="input_text", text="x" * 70_000)]), "item.content"),
    ],
)
def test_items_the_conversation_cannot_hold_are_refused(item, param: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        ConversationItems().add(item)
    assert refused.value.param == param


def test_items_are_bounded_oldest_first() -> None:
    items = ConversationItems(limit=3)
    dropped = [items.add(_user(str(n)))[1] for n in range(5)]
    assert [len(d) for d in dropped] == [0, 0, 0, 1, 1] and len(items) == 3
    assert [m.content for m in items.chat_messages(None).messages] == ["2", "3", "4"]
    by_size = ConversationItems(max_chars=100)
    dropped = [by_size.add(_user("x" * 40))[1] for _ in range(4)]
    assert [len(d) for d in dropped] == [0, 0, 1, 1] and len(by_size) == 2


def test_sentences_are_cut_as_the_text_streams() -> None:
    sentences = Sentences()
    out = []
    for piece in ["Hel", "lo there. How", " are you", "? Fine", "..."]:
        out += sentences.feed(piece)
    assert out == ["Hello there.", "How are you?"]
    assert sentences.finish() == ["Fine..."]
    assert Sentences().feed("word " * 100)[0].count("word") < 60
    assert max(map(len, Sentences().feed("word " * 100 + "end. "))) <= 240  # a long piece arriving at once
    assert Sentences().feed("1. one\n2. two\n") == ["1. one", "2. two"]
    assert len(pcm16(np.zeros(16_000, np.float32), 16_000)) == 2 * 24_000


# -- responses -----------------------------------------------------------------------------


@run
async def test_a_text_response_sends_the_events_in_order() -> None:
    conversation, client = await _conversation()
    conversation.engine.script = ANSWER
    await conversation.handle(ConversationItemCreate(item=_user("hi")))
    await conversation.handle(ResponseCreate(response=ResponseCreateParams(metadata={"turn": "1"})))
    await _answered(conversation)
    types = client.types()
    assert types[:2] == ["conversation.item.added", "conversation.item.done"]
    assert types[2:7] == [
        "response.created",
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
        "response.output_text.delta",
    ]
    assert types[-5:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
    ]
    assert "".join(e.delta for e in client.of("response.output_text.delta")) == ANSWER
    done = client.of("response.done")[0].response
    assert done.status == "completed" and done.output[0].content[0].text == ANSWER
    assert done.metadata == {"turn": "1"}
    # Each event shows its item as it was when sent, not as the response left it.
    added = client.of("conversation.item.added")[-1].item
    assert added.status == "in_progress" and added.content == []
    assert done.usage.output_tokens == done.usage.output_token_details.text_tokens > 0
    assert done.usage.total_tokens == done.usage.input_tokens + done.usage.output_tokens
    # The answer joined the conversation: the next response reads it.
    assert conversation.items.chat_messages(None).messages[-1].content == ANSWER


@run
async def test_an_audio_response_speaks_sentence_by_sentence() -> None:
    voice, conversation, client = await _answering()
    await _answered(conversation)
    assert voice.said == ["Hello there.", "How are you today?", "Fine."]
    audio = b"".join(base64.b64decode(e.delta) for e in client.of("response.output_audio.delta"))
    assert len(audio) == 2 * 2400 * 7  # 7 words, 0.1 s each at 24 kHz, 16-bit
    assert "".join(e.delta for e in client.of("response.output_audio_transcript.delta")) == ANSWER
    done = client.of("response.done")[0].response
    assert done.status == "completed" and done.audio.output.voice == "default"
    assert done.output[0].content[0].transcript == ANSWER
    assert done.usage.output_token_details.audio_tokens == 7 * 2400 // 300
    types = client.types()
    assert types.index("response.output_audio.done") < types.index("response.output_audio_transcript.done")


@run
async def test_a_function_call_is_an_item_and_its_output_is_read_next() -> None:
    conversation, client = await _conversation(parser="hermes")
    conversation.engine.script = '<tool_call>{"name": "clock", "arguments": {"zone": "UTC"}}</tool_call>'
    tools = [FunctionTool(name="clock", parameters={"type": "object"})]
    await conversation.add(_user("time?"))
    conversation.create_response(ResponseCreateParams(tools=tools, tool_choice="required", max_output_tokens=99), None)
    await _answered(conversation)
    types = client.types()
    assert "response.function_call_arguments.delta" in types, client.events
    assert "response.output_text.delta" not in types
    call = client.of("response.function_call_arguments.done")[0]
    assert call.name == "clock" and msgspec.json.decode(call.arguments) == {"zone": "UTC"}
    assert client.of("response.done")[0].response.output[0].call_id == call.call_id
    await conversation.add(FunctionCallOutputItem(call_id=call.call_id, output="12:00"))
    messages = conversation.items.chat_messages(None).messages
    assert isinstance(messages[-1], ToolMessage) and messages[-2].tool_calls[0].id == call.call_id


@run
async def test_one_response_at_a_time() -> None:
    conversation, client = await _conversation()
    conversation.engine.hold = True
    await conversation.add(_user("hi"))
    conversation.create_response(None, None)
    with pytest.raises(InvalidRequest) as refused:
        await conversation.handle(ResponseCreate())
    assert refused.value.code == "conversation_already_has_active_response"
    await asyncio.sleep(0.01)
    await conversation.handle(ResponseCancel())
    assert client.of("response.done")[0].response.status == "cancelled"
    assert conversation.engine.cancelled  # the generation stopped in the engine
    with pytest.raises(ApplianceError, match="no response in progress"):
        await conversation.handle(ResponseCancel())


@run
async def test_a_response_refused_by_the_chat_plan_is_an_error_event() -> None:
    conversation, client = await _conversation()
    await conversation.add(_user("hi"))
    conversation.create_response(ResponseCreateParams(tool_choice="required"), "evt_7")
    await _answered(conversation)
    error = client.of("error")[0].error
    assert error.event_id == "evt_7" and error.param == "tool_choice"
    assert not client.of("response.created") and conversation._task is None


@run
async def test_barge_in_cancels_the_answer_and_cuts_it_to_the_audio_sent() -> None:
    voice, conversation, client = await _answering(hold=True)
    for _ in range(100):
        if client.of("response.output_audio.delta"):
            break
        await asyncio.sleep(0.01)
    await conversation.speech_started()
    done = client.of("response.done")[0].response
    assert done.status == "cancelled" and done.status_details.reason == "turn_detected"
    assert done.output[0].status == "incomplete"
    assert done.output[0].content[0].transcript == "Hello there."  # the sentence whose audio had begun
    assert voice.stopped == 1  # the speech in the engine was cancelled
    assert conversation.response is None and conversation._task is None
    message = conversation.items.chat_messages(None).messages[-1]
    assert message.content == "Hello there."


@run
async def test_truncate_cuts_the_transcript_to_what_was_played() -> None:
    voice, conversation, client = await _answering()
    await _answered(conversation)
    item_id = client.of("response.done")[0].response.output[0].id
    with pytest.raises(InvalidRequest) as refused:
        await conversation.handle(ConversationItemTruncate(item_id=item_id, content_index=0, audio_end_ms=10_000))
    assert refused.value.param == "audio_end_ms"
    await conversation.handle(ConversationItemTruncate(item_id=item_id, content_index=0, audio_end_ms=300))
    assert client.of("conversation.item.truncated")[0].audio_end_ms == 300
    assert conversation.items.chat_messages(None).messages[-1].content == "Hello there. How are you today?"


@run
async def test_a_session_that_ends_cancels_its_engine_work() -> None:
    voice, conversation, client = await _answering(hold=True)
    await asyncio.sleep(0.05)
    await conversation.close()
    assert voice.stopped == 1 and not client.of("response.done")
    assert conversation._task is None


@run
async def test_audio_needs_a_voice_graph_and_one_of_its_voices() -> None:
    with pytest.raises(InvalidRequest) as refused:
        await _conversation("audio")
    assert refused.value.param == "session.output_modalities"
    conversation, _ = await _conversation("audio", FakeVoice())
    with pytest.raises(InvalidRequest) as refused:
        conversation.create_response(
            ResponseCreateParams(audio=RealtimeAudio(output=OutputConfig(voice="alloy"))), None
        )
    assert refused.value.param == "response.audio.output.voice"


# -- the session's seam (`talk.TalkSession`) -----------------------------------------------


@run
async def test_a_voice_the_graph_lacks_is_refused_at_session_update() -> None:
    talker = _talker(FakeVoice())
    session = live.RealtimeSession(
        kind="realtime",
        model="talker",
        hearing=FakeHearing(),
        conversation=lambda session: TalkSession(session, talker, ImageLoader()),
    )
    audio = RealtimeAudio(output=OutputConfig(voice="alloy"))
    with pytest.raises(InvalidRequest) as refused:
        await session.handle(rt.SessionUpdate(session=RealtimeSession(instructions="Be brief.", audio=audio)))
    assert (refused.value.param, refused.value.code) == ("session.audio.output.voice", "invalid_value")
    assert "alloy" in refused.value.message and "default" in refused.value.message
    # Refused as a whole: neither the voice nor the instructions beside it were taken.
    assert session.settings.config.instructions is UNSET and session.events.empty()
    good = RealtimeSession(audio=RealtimeAudio(output=OutputConfig(voice="default")))
    await session.handle(rt.SessionUpdate(session=good))
    assert isinstance(session.events.get_nowait(), rt.SessionUpdated)
    assert session.conversation.conversation.settings.voice == "default"


@run
async def test_a_spoken_turn_is_answered_and_speech_during_the_answer_cuts_it() -> None:
    voice = FakeVoice()
    voice.hold_speech = True
    talker = _talker(voice)
    talker.script = ANSWER
    session = live.RealtimeSession(
        kind="realtime",
        model="talker",
        hearing=FakeHearing(),
        conversation=lambda session: TalkSession(session, talker, ImageLoader()),
    )
    session.start()
    for event in append(pcm(0.5, False) + pcm(1.0, True) + pcm(1.0, False)):
        await session.handle(event)
    found = await settle(session, rt.ResponseOutputAudioDelta)
    kinds = [type(event).__name__ for event in found]
    assert kinds.index("TranscriptionCompleted") < kinds.index("ResponseCreated")
    heard = found[kinds.index("TranscriptionCompleted")].transcript
    user = session.conversation.conversation.items.chat_messages(None).messages[0]
    assert user.content == heard  # the turn joined the conversation as its transcript
    for event in append(pcm(1.0, True)):  # barge-in
        await session.handle(event)
    found = await settle(session, rt.ResponseDone)
    done = [event for event in found if isinstance(event, rt.ResponseDone)][0].response
    assert done.status == "cancelled" and done.status_details.reason == "turn_detected"
    assert voice.stopped == 1  # the speech stopped in the engine (the fake wrote its text at once)
    assert session.last_item_id == done.output[0].id
    await session.close()
