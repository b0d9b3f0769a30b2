"""The engine behind the API: greedy parity with openvino_genai, concurrency, cancellation."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from urllib.parse import urlsplit

import httpx
import openai
import pytest

MODEL = "demo-chat"
PROMPTS = ["Hello there", "What is a license?", "import os", "Write a poem about rivers", "The GNU project"]


@pytest.fixture(scope="module")
def reference_pipeline(demo_root):
    import openvino_genai

    model_dir = demo_root / "models" / MODEL
    return openvino_genai.LLMPipeline(str(model_dir), "CPU", INFERENCE_PRECISION_HINT="f32")


def test_greedy_parity_with_openvino_genai(openai_client: openai.OpenAI, reference_pipeline) -> None:
    import openvino_genai

    tokenizer = reference_pipeline.get_tokenizer()
    for prompt in PROMPTS:
        templated = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True)
        config = openvino_genai.GenerationConfig(max_new_tokens=24, do_sample=False, apply_chat_template=False)
        expected = reference_pipeline.generate(templated, config)
        served = openai_client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": prompt}], max_tokens=24, temperature=0
        )
        assert served.choices[0].message.content == str(expected), prompt


def test_16_concurrent_streams_complete_with_correct_outputs(server, openai_client: openai.OpenAI) -> None:
    prompts = [f"{PROMPTS[i % len(PROMPTS)]} #{i}" for i in range(16)]
    expected = [
        openai_client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": p}], max_tokens=32, temperature=0
        )
        .choices[0]
        .message.content
        for p in prompts
    ]

    async def stream_one(client: openai.AsyncOpenAI, prompt: str) -> str:
        stream = await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": prompt}], max_tokens=32, temperature=0, stream=True
        )
        return "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])

    async def run_all() -> list[str]:
        async with openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0) as client:
            return await asyncio.gather(*(stream_one(client, p) for p in prompts))

    results = asyncio.run(run_all())
    assert results == expected
    assert len(set(results)) > 1
    assert server.wait_idle(MODEL, timeout=5.0)["in_flight"] == 0


def _long_request(stream: bool) -> dict:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Go on forever"}],
        "max_tokens": 1000,
        "ignore_eos": True,
        "stream": stream,
    }


def test_stream_disconnect_cancels_generation(server) -> None:
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=_long_request(True), timeout=30) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        next(lines)
        assert server.model_status(MODEL)["running"] >= 0
    status = server.wait_idle(MODEL, timeout=2.0)
    assert status["in_flight"] == 0 and status["running"] == 0, status
    assert status["kv_cache_usage"] == 0.0


def test_non_stream_disconnect_cancels_generation(server) -> None:
    # The client leaves once the request is admitted, not after a fixed time: on a fast CPU the
    # tiny model generated all 1,000 tokens within a 0.3 s client timeout.
    steps_before = server.wait_idle(MODEL)["steps"]
    body = json.dumps(_long_request(False)).encode()
    address = urlsplit(server.url)
    with socket.create_connection((address.hostname, address.port)) as client:
        client.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        deadline = time.monotonic() + 10
        while server.model_status(MODEL)["in_flight"] == 0 and time.monotonic() < deadline:
            time.sleep(0.002)
    status = server.wait_idle(MODEL, timeout=2.0)
    assert status["in_flight"] == 0 and status["running"] == 0, status
    assert status["steps"] - steps_before < 1000, status  # stopped, not generated to its end


def test_served_after_cancellations(openai_client: openai.OpenAI) -> None:
    reply = openai_client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "still there?"}], max_tokens=4
    )
    assert reply.choices[0].finish_reason in ("stop", "length")


@pytest.mark.parametrize("graph_name", ["demo-chat", "demo-smol"])
def test_stream_interval_merges_tokens_and_keeps_the_text_exact(
    demo_root, smol_root, tmp_path, graph_name: str
) -> None:
    """With `stream_interval_ms = 1000` a stream's tokens after the first come merged (a few chunks
    for 48 tokens) and the streamed text is the non-streamed text, on the random model and on the
    real one (SmolLM2, whose GGUF tokenizer drops invalid UTF-8 instead of replacing it)."""
    from tests.conftest import copy_demo_graphs, start_server, stop_server

    graphs = tmp_path / "graphs"
    graphs.mkdir()
    root = demo_root if graph_name == "demo-chat" else smol_root
    copy_demo_graphs(root, graphs, [graph_name])
    path = graphs / f"{graph_name}.toml"
    path.write_text(path.read_text().replace('device = "CPU"\n', 'device = "CPU"\nstream_interval_ms = 1000\n', 1))
    server = start_server(graphs, tmp_path / "server.log")
    try:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
        request = dict(
            model=graph_name,
            messages=[{"role": "user", "content": "Tell me about rivers and the sea."}],
            temperature=0,
            max_tokens=48,
            extra_body={"ignore_eos": True},
        )
        whole = client.chat.completions.create(**request)
        started = time.monotonic()
        chunks = list(client.chat.completions.create(**request, stream=True, stream_options={"include_usage": True}))
        streamed_for = time.monotonic() - started
    finally:
        stop_server(server)
    texts = [chunk.choices[0].delta.content for chunk in chunks if chunk.choices and chunk.choices[0].delta.content]
    assert "".join(texts) == whole.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens == 48
    # The first token at once, the other 47 in merged chunks, one per second at most (a few
    # seconds on a quiet 2-core box; a busy one takes longer, and sends a chunk a second).
    assert 1 <= len(texts) <= max(6, 3 + streamed_for), (len(texts), streamed_for)
    assert len(texts) < 48 / 2
