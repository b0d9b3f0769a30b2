"""Elasticsearch as a client: the body its `openai` service sends to an OpenAI-compatible upstream,
its stream parser's rules, and its own `_inference/.../_stream` route shape (the seed's examples)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from appliance.api.sse import named_events
from appliance.errors import EngineFailure
from tests.conftest import RunningServer

MODEL = "demo-chat"
TOOL = {
    "type": "function",
    "function": {
        "name": "get_current_price",
        "description": "Get the current price of a item",
        "parameters": {"type": "object", "properties": {"item": {"enum": ["scarf", "hat"]}}, "required": ["item"]},
    },
}


def _elastic_request(**overrides: object) -> dict:
    """What Elasticsearch's openai service sends (API-NOTES: read from its source)."""
    body = {
        "messages": [{"role": "user", "content": "What is Elastic?"}],
        "stop": ["\n\n\n"],
        "temperature": 0.2,
        "tool_choice": "auto",
        "tools": [TOOL],
        "top_p": 0.9,
        "max_completion_tokens": 16,
        "model": MODEL,
        "n": 1,
        "stream": True,
        "stream_options": {"include_usage": True},
        "user": "elastic-user",
        "reasoning_effort": "low",
    }
    body.update(overrides)
    return body


def _events(lines: list[str]) -> list[tuple[str, str]]:
    """(event name, data) pairs of an SSE stream; the event name defaults to `message`."""
    events, name = [], "message"
    for line in lines:
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            events.append((name, line[5:].strip()))
            name = "message"
    return events


def _parse_like_elasticsearch(events: list[tuple[str, str]]) -> list[dict]:
    """Elasticsearch's rules for an upstream's stream: [DONE] is skipped, `event: error` fails,
    `id` and `choices` in every chunk, `delta` and `index` in every choice, `index` in every tool
    call, integer token counts in `usage`."""
    chunks = []
    for name, data in events:
        if data == "[DONE]":
            continue
        assert name != "error", data
        chunk = json.loads(data)
        assert "error" not in chunk, chunk
        assert isinstance(chunk["id"], str) and isinstance(chunk["choices"], list)
        for choice in chunk["choices"]:
            assert isinstance(choice["index"], int) and isinstance(choice["delta"], dict)
            for call in choice["delta"].get("tool_calls") or []:
                assert isinstance(call["index"], int)
        if chunk.get("usage") is not None:
            usage = chunk["usage"]
            for key in ("completion_tokens", "prompt_tokens", "total_tokens"):
                assert isinstance(usage[key], int)
        chunks.append(chunk)
    return chunks


def _post_stream(url: str, body: dict) -> tuple[httpx.Response, list[str]]:
    headers = {"Authorization": "Bearer elastic-key"}
    with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as response:
        return response, [line for line in response.iter_lines() if line]


@pytest.mark.parametrize(
    "overrides",
    [{}, {"tool_choice": "required"}, {"tool_choice": {"type": "function", "function": {"name": "get_current_price"}}}],
    ids=["auto", "required", "named"],
)
def test_openai_route_accepts_elasticsearch_body(server: RunningServer, overrides: dict) -> None:
    # A forced call is complete JSON: room for it (the grammar ends it well before).
    body = _elastic_request(**overrides, max_completion_tokens=256)
    response, lines = _post_stream(f"{server.url}/v1/chat/completions", body)
    assert response.status_code == 200
    chunks = _parse_like_elasticsearch(_events(lines))
    assert len({chunk["id"] for chunk in chunks}) == 1
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] <= 256
    if isinstance(overrides.get("tool_choice"), dict):
        # (With "required" a random model may keep adding calls until max_completion_tokens.)
        calls = [
            call for chunk in chunks for choice in chunk["choices"] for call in choice["delta"].get("tool_calls") or []
        ]
        assert calls and calls[0]["function"]["name"] == "get_current_price"


def test_optional_fields_may_be_left_out(server: RunningServer) -> None:
    body = _elastic_request()
    for key in ("user", "reasoning_effort", "stop", "tools", "tool_choice"):
        body.pop(key)
    response, lines = _post_stream(f"{server.url}/v1/chat/completions", body)
    assert response.status_code == 200
    _parse_like_elasticsearch(_events(lines))


def test_bad_reasoning_effort_is_refused(server: RunningServer) -> None:
    body = _elastic_request(reasoning_effort="extreme", stream=False)
    response = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=30)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "reasoning_effort"


# -- Elasticsearch's own route shape (the seed's examples) -----------------------------------

SEED_EXAMPLES = {
    "question": {"model": MODEL, "messages": [{"role": "user", "content": "What is Elastic?"}]},
    "tool_result": {
        "messages": [
            {
                "role": "assistant",
                "content": "Let's find out what the weather is",
                "tool_calls": [
                    {
                        "id": "call_KcAjWtAww20AihPHphUh46Gd",
                        "type": "function",
                        "function": {"name": "get_current_weather", "arguments": '{"location":"Boston, MA"}'},
                    }
                ],
            },
            {"role": "tool", "content": "The weather is cold", "tool_call_id": "call_KcAjWtAww20AihPHphUh46Gd"},
        ]
    },
    "forced_tool": {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "What's the price of a scarf?"}]}],
        "tools": [TOOL],
        "tool_choice": {"type": "function", "function": {"name": "get_current_price"}},
    },
}


@pytest.mark.parametrize("path", ["/_inference/chat_completion/{id}/_stream", "/_inference/{id}/_stream"])
@pytest.mark.parametrize("example", sorted(SEED_EXAMPLES))
def test_inference_stream_route(server: RunningServer, path: str, example: str) -> None:
    body = {**SEED_EXAMPLES[example], "max_completion_tokens": 256 if example == "forced_tool" else 24}
    response, lines = _post_stream(server.url + path.format(id=MODEL), body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = _events(lines)
    assert all(name == "message" for name, _ in events)
    assert events[-1][1] == "[DONE]"
    assert all(line.startswith("event: message") for line in lines[::2])
    chunks = [json.loads(data)["chat_completion"] for _, data in events[:-1]]
    _parse_like_elasticsearch([("message", json.dumps(chunk)) for chunk in chunks])
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(chunk["object"] == "chat.completion.chunk" and chunk["model"] == MODEL for chunk in chunks)
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == [] and usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    if example == "forced_tool":
        assert any(choice["delta"].get("tool_calls") for chunk in chunks for choice in chunk["choices"])


def test_inference_id_names_the_model_when_the_body_does_not(server: RunningServer) -> None:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 4}
    response, lines = _post_stream(f"{server.url}/_inference/chat_completion/{MODEL}/_stream", body)
    assert response.status_code == 200
    assert json.loads(_events(lines)[0][1])["chat_completion"]["model"] == MODEL


def test_errors_before_the_stream_use_the_elasticsearch_body(server: RunningServer) -> None:
    response = httpx.post(f"{server.url}/_inference/chat_completion/{MODEL}/_stream", json={"messages": []}, timeout=30)
    assert response.status_code == 400
    error = response.json()
    assert error["status"] == 400
    assert error["error"]["reason"] and error["error"]["root_cause"][0]["reason"] == error["error"]["reason"]
    unknown = httpx.post(
        f"{server.url}/_inference/chat_completion/nope/_stream",
        json={"messages": [{"role": "user", "content": "hi"}]},
        timeout=30,
    )
    # Two models are served and neither the body nor the id names one of them.
    assert unknown.status_code == 400 and unknown.json()["error"]["root_cause"]


def test_errors_while_streaming_are_error_events() -> None:
    async def chunks():
        yield {"chat_completion": {"id": "chatcmpl-1", "choices": []}}
        raise EngineFailure("The engine failed while generating.")

    async def collect() -> list[bytes]:
        return [frame async for frame in named_events(chunks(), "message")]

    frames = asyncio.run(collect())
    assert frames[0].startswith(b"event: message\ndata: ")
    assert frames[-1].startswith(b"event: error\ndata: ")
    assert json.loads(frames[-1].split(b"data: ", 1)[1])["error"]["code"] == "engine_failure"
    assert b"[DONE]" not in frames[-1]
