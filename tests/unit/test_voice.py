"""Voice in chat on fake engines: every check that needs no audio refuses a request before its
recordings are transcribed (issue 49: a request refused for `n` after 16 s of audio was heard),
and a request that passes them is transcribed part by part."""

from __future__ import annotations

import base64
import io
import wave

import pytest

from appliance.engine.messages import Transcribed, TranscribeOptions
from appliance.graphfiles import Graph, Limits
from tests.apps import app_client, chat
from tests.fakes import FakeEngineClient, fake_graph


class FakeListener(FakeEngineClient):
    """A speech model that hears "one two" in every recording, and counts what it was asked."""

    def __init__(self) -> None:
        super().__init__(fake_graph("listener"))
        self.heard = 0

    def admit(self, task: str) -> None:
        pass

    async def transcribe(self, samples, options: TranscribeOptions, on_text=None) -> Transcribed:
        self.heard += 1
        return Transcribed(request_id=0, text=" one two ")


def _wav(seconds: float = 0.5) -> str:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        out.writeframes(bytes(2 * int(16000 * seconds)))
    return base64.b64encode(buffer.getvalue()).decode()


def _voice(parts: int = 8, text: str = "say") -> list[dict]:
    audio = {"type": "input_audio", "input_audio": {"data": _wav(), "format": "wav"}}
    return [{"role": "user", "content": [{"type": "text", "text": text}, *[audio] * parts]}]


@pytest.fixture
def engines() -> tuple[FakeEngineClient, FakeListener]:
    talker = FakeEngineClient(Graph(name="fake", model_path="/nonexistent", speech_model="listener"))
    return talker, FakeListener()


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"n": 2, "temperature": 0}, "n"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nope"}}}}, None),
        ({"best_of": 2, "temperature": 0.5}, "temperature"),
        ({"stop": ["x" * 10_000]}, "stop"),
        ({"chat_template_kwargs": {"bos_token": "x"}}, "chat_template_kwargs.bos_token"),
        ({"extra_messages": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}, None),
    ],
)
def test_refused_before_any_audio_is_heard(engines, fields: dict, param: str | None) -> None:
    talker, listener = engines
    messages = _voice()
    extra = fields.pop("extra_messages", None)
    if extra:
        messages[0]["content"] += extra
    with app_client(talker, listener) as client:
        answer = chat(client, messages, **fields)
    assert answer.status_code == 400, answer.text
    if param is not None:
        assert answer.json()["error"]["param"] == param
    assert listener.heard == 0


def test_bad_base64_in_the_last_part_costs_no_speech(engines) -> None:
    talker, listener = engines
    messages = _voice(3)
    messages[0]["content"][3] = {"type": "input_audio", "input_audio": {"data": "@@", "format": "wav"}}
    with app_client(talker, listener) as client:
        answer = chat(client, messages)
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "messages[0].content[3].input_audio.data"
    assert listener.heard == 0


def test_heard_once_per_part_when_every_check_passes(engines) -> None:
    talker, listener = engines
    with app_client(talker, listener) as client:
        answer = chat(client, _voice(2), temperature=0)
    assert answer.status_code == 200, answer.text
    assert listener.heard == 2
    # The chat model read what was heard, each part as a text part in place.
    assert talker.submitted[-1].prompt.messages[-1]["content"] == "say\none two\none two"


def test_text_heard_still_counts_against_the_prompt_bound(engines) -> None:
    talker, listener = engines
    talker.graph = Graph(
        name="fake", model_path="/nonexistent", speech_model="listener", limits=Limits(max_prompt_chars=10)
    )
    with app_client(talker, listener) as client:
        answer = chat(client, _voice(3, text="abc"))
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "context_length_exceeded"
    assert listener.heard == 3  # known only once heard
