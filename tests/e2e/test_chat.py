"""Chat and text completions through the real `openai` client against the real server."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

MODEL = "demo-chat"
GREEDY = {"temperature": 0}


def test_chat_non_stream(openai_client: openai.OpenAI) -> None:
    reply = openai_client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hello"}],
        max_tokens=12,
        **GREEDY,
    )
    assert reply.id.startswith("chatcmpl-")
    assert reply.object == "chat.completion"
    assert reply.model == MODEL
    choice = reply.choices[0]
    assert choice.index == 0
    assert choice.message.role == "assistant"
    assert choice.finish_reason in ("stop", "length")
    assert reply.usage.completion_tokens <= 12
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    if choice.finish_reason == "length":
        assert reply.usage.completion_tokens == 12


def test_v3_route_is_the_same_api(server, openai_client: openai.OpenAI) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "same"}], "max_tokens": 8, **GREEDY}
    v3 = httpx.post(f"{server.url}/v3/chat/completions", json=body, timeout=30)
    assert v3.status_code == 200
    v1 = openai_client.chat.completions.create(**body)
    assert v3.json()["choices"][0]["message"]["content"] == v1.choices[0].message.content


def test_chat_stream_chunks(openai_client: openai.OpenAI) -> None:
    stream = openai_client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Tell me a story"}],
        max_tokens=16,
        stream=True,
        stream_options={"include_usage": True},
        **GREEDY,
    )
    chunks = list(stream)
    assert len({chunk.id for chunk in chunks}) == 1
    assert all(chunk.object == "chat.completion.chunk" and chunk.model == MODEL for chunk in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    content_chunks = [chunk for chunk in chunks if chunk.choices]
    assert all(chunk.choices[0].index == 0 for chunk in content_chunks)
    assert content_chunks[-1].choices[0].finish_reason in ("stop", "length")
    assert all(chunk.choices[0].finish_reason is None for chunk in content_chunks[:-1])
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == []
    text = "".join(chunk.choices[0].delta.content or "" for chunk in content_chunks)
    full = openai_client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Tell me a story"}], max_tokens=16, **GREEDY
    )
    assert text == full.choices[0].message.content
    assert usage_chunk.usage.model_dump() == full.usage.model_dump()


def test_raw_sse_framing(server) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": True}
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = response.read().decode()
    events = [block for block in raw.split("\n\n") if block]
    assert all(event.startswith("data: ") for event in events)
    assert events[-1] == "data: [DONE]"
    for event in events[:-1]:
        chunk = json.loads(event.removeprefix("data: "))
        assert chunk["id"].startswith("chatcmpl-") and "choices" in chunk
        for choice in chunk["choices"]:
            assert "index" in choice and "delta" in choice


def test_multi_turn_and_text_parts(openai_client: openai.OpenAI) -> None:
    reply = openai_client.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "Again", "name": "alice"},
        ],
        max_completion_tokens=5,
        user="test-user",
        **GREEDY,
    )
    assert reply.usage.completion_tokens <= 5
    assert reply.usage.prompt_tokens > 20


def test_seeded_sampling_is_reproducible(openai_client: openai.OpenAI) -> None:
    def sample(seed: int) -> str:
        reply = openai_client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "Sample"}],
            max_tokens=24,
            temperature=1.0,
            top_p=0.9,
            seed=seed,
        )
        return reply.choices[0].message.content

    assert sample(7) == sample(7)
    assert len({sample(seed) for seed in (1, 2, 3)}) > 1


def test_stop_string_cuts_output(openai_client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": "Repeat"}]
    free = openai_client.chat.completions.create(model=MODEL, messages=messages, max_tokens=24, **GREEDY)
    text = free.choices[0].message.content
    stop = text[len(text) // 2 : len(text) // 2 + 3]
    assert stop.strip(), f"need a visible stop string from {text!r}"
    cut = openai_client.chat.completions.create(model=MODEL, messages=messages, max_tokens=24, stop=[stop], **GREEDY)
    assert cut.choices[0].finish_reason == "stop"
    assert stop not in cut.choices[0].message.content
    assert text.startswith(cut.choices[0].message.content)


def test_completions_single_and_list(openai_client: openai.OpenAI) -> None:
    one = openai_client.completions.create(model=MODEL, prompt="The license", max_tokens=6, **GREEDY)
    assert one.object == "text_completion" and len(one.choices) == 1
    many = openai_client.completions.create(model=MODEL, prompt=["The license", "import os"], max_tokens=6, **GREEDY)
    assert [choice.index for choice in many.choices] == [0, 1]
    assert many.choices[0].text == one.choices[0].text
    assert many.usage.prompt_tokens > one.usage.prompt_tokens


def test_completions_stream(openai_client: openai.OpenAI) -> None:
    chunks = list(
        openai_client.completions.create(
            model=MODEL, prompt=["a", "b"], max_tokens=5, stream=True, stream_options={"include_usage": True}, **GREEDY
        )
    )
    texts = {0: "", 1: ""}
    for chunk in chunks:
        for choice in chunk.choices:
            texts[choice.index] += choice.text
    reference = openai_client.completions.create(model=MODEL, prompt=["a", "b"], max_tokens=5, **GREEDY)
    assert texts == {choice.index: choice.text for choice in reference.choices}
    assert chunks[-1].usage.completion_tokens == reference.usage.completion_tokens


def test_models_routes(server, openai_client: openai.OpenAI) -> None:
    assert [model.id for model in openai_client.models.list()] == [MODEL, "demo-lookup", "demo-spec", "demo-vision"]
    assert openai_client.models.retrieve(MODEL).id == MODEL
    for prefix in ("v1", "v3"):
        assert httpx.get(f"{server.url}/{prefix}/models", timeout=5).json()["data"][0]["id"] == MODEL
    with pytest.raises(openai.NotFoundError):
        openai_client.models.retrieve("nope")


def test_health_ready(server) -> None:
    response = httpx.get(f"{server.url}/health", timeout=5)
    assert response.status_code == 200
    assert response.json()["models"][MODEL]["state"] == "ready"
    assert httpx.get(f"{server.url}/health/live", timeout=5).status_code == 200


def test_unseeded_sampling_varies(openai_client: openai.OpenAI) -> None:
    def sample() -> str:
        reply = openai_client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Vary"}], max_tokens=24, temperature=1.0
        )
        return reply.choices[0].message.content

    assert len({sample() for _ in range(4)}) > 1
