"""Anthropic's Messages API through the real `anthropic` SDK against the real server: create with a
system prompt and a stop sequence, the stream helper agreeing with create under greedy decoding, a
tool-use round trip (a named tool, then the tool's result answered in text), tool_choice any,
token counting agreeing with a create's usage, errors in Anthropic's shape (missing max_tokens, an
unknown model, a wrong key sent as x-api-key, a server tool), and images on demo-vision (base64
and a local file as the url source, in create and stream; a pixel bomb refused while a neighbour
streams).

demo-smol is the real SmolLM2-135M-Instruct (greedy); demo-vision's words are random, so its
answers are checked for structure only.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx
import pytest

from tests.conftest import RunningServer, copy_demo_graphs, running_server
from tests.e2e.neighbour import Neighbour
from tests.images import encode, noise, png_header_only

SMOL = "demo-smol"
VISION = "demo-vision"
API_KEY = "messages-key"
GREEDY = {"temperature": 0}
WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 20}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
ASK_WEATHER = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def media_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("messages-media")
    (directory / "noise.png").write_bytes(encode(noise(64, 48)))
    return directory


@pytest.fixture(scope="module")
def server(
    smol_root: Path, demo_root: Path, media_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    base = tmp_path_factory.mktemp("messages")
    graphs = copy_demo_graphs(smol_root, base / "graphs", [SMOL])
    copy_demo_graphs(demo_root, graphs, [VISION])
    (base / "api-keys").write_text(f"{API_KEY}\n")
    with running_server(
        graphs,
        base / "server.log",
        "--api-key-file",
        str(base / "api-keys"),
        "--allowed-local-media-path",
        str(media_dir),
    ) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: RunningServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key=API_KEY, max_retries=0, timeout=120)


def test_create_with_system_and_a_stop_sequence(client: anthropic.Anthropic) -> None:
    fields = dict(
        model=SMOL,
        max_tokens=60,
        system="You are a helpful assistant.",
        messages=[{"role": "user", "content": "Count from 1 to 10, separated by commas."}],
        extra_body=GREEDY,
    )
    whole = client.messages.create(**fields)
    print("without a stop sequence:", repr(whole.content[0].text))
    assert whole.id.startswith("msg_") and whole.type == "message" and whole.role == "assistant"
    assert whole.model == SMOL and whole.usage.input_tokens > 0 and whole.usage.output_tokens > 0
    assert "4, 5" in whole.content[0].text
    stopped = client.messages.create(**fields, stop_sequences=["5"])
    print("stopped at '5':", repr(stopped.content[0].text), stopped.stop_reason, stopped.stop_sequence)
    assert stopped.stop_reason == "stop_sequence" and stopped.stop_sequence == "5"
    assert whole.content[0].text.startswith(stopped.content[0].text)
    assert stopped.content[0].text.rstrip().endswith("4,") and "5" not in stopped.content[0].text
    assert stopped.usage.output_tokens < whole.usage.output_tokens


def test_stream_helper_agrees_with_create(client: anthropic.Anthropic) -> None:
    fields = dict(
        model=SMOL,
        max_tokens=12,
        messages=[{"role": "user", "content": "Write one sentence about the sea."}],
        extra_body=GREEDY,
    )
    created = client.messages.create(**fields)
    with client.messages.stream(**fields) as stream:
        texts = list(stream.text_stream)
        final = stream.get_final_message()
    assert len(texts) > 1, "the text arrives in several deltas"
    assert "".join(texts) == final.content[0].text == created.content[0].text
    assert final.stop_reason == created.stop_reason == "max_tokens"
    assert final.usage.input_tokens == created.usage.input_tokens
    assert final.usage.output_tokens == created.usage.output_tokens == 12


def test_tool_use_round_trip(client: anthropic.Anthropic) -> None:
    called = client.messages.create(
        model=SMOL,
        max_tokens=60,
        messages=ASK_WEATHER,
        tools=[WEATHER],
        tool_choice={"type": "tool", "name": "get_weather"},
        extra_body=GREEDY,
    )
    print("call:", called.content)
    assert called.stop_reason == "tool_use"
    (use,) = [block for block in called.content if block.type == "tool_use"]
    assert use.id.startswith("toolu_") and use.name == "get_weather"
    assert isinstance(use.input, dict) and isinstance(use.input["city"], str)
    answered = client.messages.create(
        model=SMOL,
        max_tokens=40,
        messages=[
            *ASK_WEATHER,
            {"role": "assistant", "content": called.content},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "Sunny, 24 degrees Celsius."}],
            },
        ],
        tools=[WEATHER],
        extra_body=GREEDY,
    )
    print("answer:", answered.content)
    assert answered.stop_reason in ("end_turn", "max_tokens")
    assert [block.type for block in answered.content] == ["text"] and answered.content[0].text.strip()


def test_tool_choice_any_streams_a_tool_use(client: anthropic.Anthropic) -> None:
    with client.messages.stream(
        model=SMOL,
        max_tokens=60,
        messages=ASK_WEATHER,
        tools=[WEATHER],
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
        extra_body=GREEDY,
    ) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_message()
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert "input_json" in events and final.stop_reason == "tool_use"
    (use,) = final.content
    assert use.type == "tool_use" and use.name == "get_weather" and isinstance(use.input["city"], str)


def test_count_tokens_is_the_prompt_a_create_reads(client: anthropic.Anthropic) -> None:
    fields = dict(model=SMOL, system="Answer briefly.", messages=ASK_WEATHER, tools=[WEATHER])
    counted = client.messages.count_tokens(**fields)
    created = client.messages.create(**fields, max_tokens=1)
    assert counted.input_tokens == created.usage.input_tokens > 0
    without_tools = client.messages.count_tokens(model=SMOL, system="Answer briefly.", messages=ASK_WEATHER)
    assert without_tools.input_tokens < counted.input_tokens


def test_consecutive_user_turns_are_combined_as_anthropic_does(client: anthropic.Anthropic) -> None:
    two_turns = [{"role": "user", "content": "What is the capital"}, {"role": "user", "content": " of France?"}]
    one_turn = [{"role": "user", "content": [{"type": "text", "text": "What is the capital"},
                                             {"type": "text", "text": " of France?"}]}]  # fmt: skip
    counted = [client.messages.count_tokens(model=SMOL, messages=turns).input_tokens for turns in (two_turns, one_turn)]
    assert counted[0] == counted[1] > 0
    answers = [
        client.messages.create(model=SMOL, messages=turns, max_tokens=16, extra_body=GREEDY)
        for turns in (two_turns, one_turn)
    ]
    assert answers[0].content[0].text == answers[1].content[0].text


def test_errors_take_anthropics_shape(server: RunningServer, client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError) as missing:
        client.post("/v1/messages", cast_to=httpx.Response, body={"model": SMOL, "messages": ASK_WEATHER})
    assert missing.value.body["type"] == "error"
    assert missing.value.body["error"]["type"] == "invalid_request_error"
    assert "max_tokens" in missing.value.body["error"]["message"]
    assert missing.value.request_id
    with pytest.raises(anthropic.NotFoundError) as unknown:
        client.messages.create(model="no-such-model", max_tokens=5, messages=ASK_WEATHER)
    assert unknown.value.body["error"]["type"] == "not_found_error"
    # A server tool is not offered to the model (docs/api.md, Hosted tools); the header names it.
    server_tool = client.messages.with_raw_response.create(
        model=SMOL, max_tokens=5, messages=ASK_WEATHER, tools=[{"type": "web_search_20250305", "name": "web_search"}]
    )
    assert server_tool.headers["x-dropped-tools"] == "tools[0]=web_search_20250305"
    with pytest.raises(anthropic.BadRequestError) as thinking:
        client.messages.create(
            model=SMOL, max_tokens=5, messages=ASK_WEATHER, thinking={"type": "enabled", "budget_tokens": 1024}
        )
    assert thinking.value.body["error"]["message"].startswith("thinking:")
    wrong_key = anthropic.Anthropic(base_url=server.url, api_key="wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as refused:
        wrong_key.messages.create(model=SMOL, max_tokens=5, messages=ASK_WEATHER)
    # The gate's refusal in Anthropic's shape, with the request id as every error on these routes.
    assert refused.value.body == {
        "type": "error",
        "error": {"type": "authentication_error", "message": refused.value.body["error"]["message"]},
        "request_id": refused.value.request_id,
    }
    # The same key the SDK sends as x-api-key also works as a Bearer token.
    bearer = httpx.post(
        f"{server.url}/v1/messages",
        json={"model": SMOL, "max_tokens": 2, "messages": ASK_WEATHER},
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=60,
    )
    assert bearer.status_code == 200 and bearer.headers["request-id"]


def _image_block(source: dict) -> dict:
    return {"type": "image", "source": source}


def test_images_as_base64_and_as_a_local_file(client: anthropic.Anthropic, media_dir: Path) -> None:
    png = base64.b64encode(encode(noise(40, 30, seed=1))).decode()
    for source in (
        {"type": "base64", "media_type": "image/png", "data": png},
        {"type": "url", "url": str(media_dir / "noise.png")},
    ):
        messages = [{"role": "user", "content": [_image_block(source), {"type": "text", "text": "What is this?"}]}]
        created = client.messages.create(model=VISION, max_tokens=8, messages=messages, extra_body=GREEDY)
        with client.messages.stream(model=VISION, max_tokens=8, messages=messages, extra_body=GREEDY) as stream:
            streamed = stream.get_final_message()
        assert created.content[0].text == streamed.content[0].text
        assert created.usage.input_tokens == streamed.usage.input_tokens > 10  # the image's tokens count
    with pytest.raises(anthropic.BadRequestError) as uncounted:
        client.messages.count_tokens(model=VISION, messages=messages)
    assert "images" in uncounted.value.body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError) as outside:
        client.messages.create(
            model=VISION,
            max_tokens=8,
            messages=[{"role": "user", "content": [_image_block({"type": "url", "url": "/etc/hostname"})]}],
        )
    assert outside.value.body["error"]["message"].startswith("messages[0].content[0].source")


def test_a_pixel_bomb_is_refused_while_a_neighbour_streams(server: RunningServer, client: anthropic.Anthropic) -> None:
    bomb = base64.b64encode(png_header_only(60000, 60000)).decode()
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look."},
                _image_block({"type": "base64", "media_type": "image/png", "data": bomb}),
            ],
        }
    ]
    with Neighbour(server.url, VISION, headers={"Authorization": f"Bearer {API_KEY}"}) as neighbour:
        for _ in range(5):
            with pytest.raises(anthropic.BadRequestError) as refused:
                client.messages.create(model=VISION, max_tokens=8, messages=messages)
            assert refused.value.body["error"]["message"].startswith("messages[0].content[1]")
    print(f"largest neighbour gap during the pixel bombs: {neighbour.largest_gap:.3f} s")
    neighbour.assert_unharmed()
