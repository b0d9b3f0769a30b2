"""Vision chat end to end: the real server with demo-vision, the `openai` client, images as base64,
as http URLs (a server on 127.0.0.1, allowed explicitly) and as local paths, checked against
OpenVINO GenAI run directly; then every refusal case of RELIABILITY.md's image rows.

URL tests only contact servers on 127.0.0.1 started here; names resolving to private ranges are
covered in tests/unit/media/test_fetch.py with a fake resolver.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from tests.conftest import RunningServer, running_server
from tests.images import animated_gif, data_url, encode, image_server, noise, png_header_only

MODEL = "demo-vision"
MAX_IMAGE_BYTES = 200_000
IMAGE_A = noise(30, 20, seed=1)
IMAGE_B = noise(12, 16, seed=2)
PNG_A, PNG_B = encode(IMAGE_A), encode(IMAGE_B)


@pytest.fixture(scope="module")
def media_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("media")
    allowed = base / "allowed"
    allowed.mkdir()
    (allowed / "a.png").write_bytes(PNG_A)
    (allowed / "b.png").write_bytes(PNG_B)
    (base / "allowed-evil").mkdir()
    (base / "allowed-evil" / "a.png").write_bytes(PNG_A)
    (base / "secret.png").write_bytes(PNG_A)
    (allowed / "link-out.png").symlink_to(base / "secret.png")
    return allowed


@pytest.fixture(scope="module")
def http_images() -> Iterator:
    with image_server({"/a.png": PNG_A, "/b.png": PNG_B, "/huge.png": b"x" * (MAX_IMAGE_BYTES + 1)}) as server:
        yield server


@pytest.fixture(scope="module")
def vision_server(
    demo_root: Path, media_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    """demo-chat and demo-vision, with URLs from 127.0.0.1 (explicitly allowed) and local paths."""
    with running_server(
        demo_root / "graphs",
        tmp_path_factory.mktemp("vision-server") / "server.log",
        "--allowed-media-domains",
        "127.0.0.1",
        "--allowed-media-networks",
        "127.0.0.1/32",
        "--allowed-local-media-path",
        str(media_dir),
        "--max-image-bytes",
        str(MAX_IMAGE_BYTES),
        "--media-fetch-timeout",
        "2",
    ) as running:
        yield running


@pytest.fixture(scope="module")
def client(vision_server: RunningServer) -> openai.OpenAI:
    return vision_server.client()


@pytest.fixture(scope="module")
def reference(demo_root: Path):
    """The same model in an in-process pipeline: (prompt text with tags, images) -> (text, prompt tokens)."""
    import openvino as ov
    import openvino_genai

    scheduler = openvino_genai.SchedulerConfig()
    scheduler.cache_size = 1
    pipe = openvino_genai.ContinuousBatchingPipeline(
        str(demo_root / "models" / MODEL), scheduler, "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
    )
    tokenizer = pipe.get_tokenizer()
    request_ids = iter(range(1, 10**6))

    def generate(messages: list[dict], images: list, max_new_tokens: int = 16) -> tuple[str, int]:
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        config = openvino_genai.GenerationConfig(
            max_new_tokens=max_new_tokens, do_sample=False, apply_chat_template=False
        )
        config.set_eos_token_id(tokenizer.get_eos_token_id())
        tensors = [ov.Tensor(np.asarray(image, dtype=np.uint8)[None]) for image in images]
        handle = pipe.add_request(next(request_ids), prompt, tensors, config)
        while pipe.has_non_finished_requests():
            pipe.step()
        output = handle.read_all()[0]
        return tokenizer.decode(list(output.generated_ids)), handle.get_perf_metrics().get_num_input_tokens()

    return generate


def image(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def ask(client: openai.OpenAI, messages: list[dict], max_tokens: int = 16):
    return client.chat.completions.create(model=MODEL, messages=messages, max_tokens=max_tokens, temperature=0)


# -- the three sources, with the model's own outputs ---------------------------------------------


def test_base64_image_matches_openvino_genai(client: openai.OpenAI, reference) -> None:
    reply = ask(client, [{"role": "user", "content": [text("What is this?"), image(data_url(PNG_A))]}])
    expected, prompt_tokens = reference([{"role": "user", "content": "What is this?<ov_genai_image_0>"}], [IMAGE_A])
    assert reply.choices[0].message.content == expected
    # Image tokens count: the context check and usage see what the pipeline sees.
    assert reply.usage.prompt_tokens == prompt_tokens
    text_only = ask(client, [{"role": "user", "content": "What is this?"}], max_tokens=1)
    assert reply.usage.prompt_tokens > text_only.usage.prompt_tokens + 2


def test_url_and_local_path_give_the_same_answer(client: openai.OpenAI, http_images, media_dir: Path) -> None:
    def answer(url: str) -> str:
        return ask(client, [{"role": "user", "content": [image(url), text("Describe.")]}]).choices[0].message.content

    from_base64 = answer(data_url(PNG_A))
    assert answer(f"http://127.0.0.1:{http_images.server_port}/a.png") == from_base64
    assert answer(str(media_dir / "a.png")) == from_base64
    assert answer(f"file://{media_dir}/a.png") == from_base64
    assert answer(data_url(PNG_B)) != from_base64


def test_two_images_in_one_message(client: openai.OpenAI, reference, http_images) -> None:
    content = [image(data_url(PNG_A)), image(f"http://127.0.0.1:{http_images.server_port}/b.png"), text("Compare.")]
    reply = ask(client, [{"role": "user", "content": content}])
    expected, prompt_tokens = reference(
        [{"role": "user", "content": "<ov_genai_image_0><ov_genai_image_1>Compare."}], [IMAGE_A, IMAGE_B]
    )
    assert reply.choices[0].message.content == expected
    assert reply.usage.prompt_tokens == prompt_tokens
    swapped = ask(client, [{"role": "user", "content": [content[1], content[0], content[2]]}])
    assert swapped.choices[0].message.content != expected  # order reaches the model


def test_image_in_an_earlier_turn(client: openai.OpenAI, reference, media_dir: Path) -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [text("Look:"), image(str(media_dir / "a.png"))]},
        {"role": "assistant", "content": "A noisy picture."},
        {"role": "user", "content": [image(data_url(PNG_B)), text("And this one, compared to the first?")]},
    ]
    reply = ask(client, messages)
    expected, prompt_tokens = reference(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Look:<ov_genai_image_0>"},
            {"role": "assistant", "content": "A noisy picture."},
            {"role": "user", "content": "<ov_genai_image_1>And this one, compared to the first?"},
        ],
        [IMAGE_A, IMAGE_B],
    )
    assert reply.choices[0].message.content == expected
    assert reply.usage.prompt_tokens == prompt_tokens


def test_streaming_with_an_image(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": [image(data_url(PNG_A)), text("Stream it.")]}]
    chunks = list(
        client.chat.completions.create(
            model=MODEL,
            messages=messages,
            max_tokens=12,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    whole = ask(client, messages, max_tokens=12)
    assert streamed == whole.choices[0].message.content
    assert chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens


def test_concurrent_image_requests_batch_and_complete(vision_server: RunningServer, client: openai.OpenAI) -> None:
    requests = [
        [image(data_url(encode(noise(24 + 8 * i, 20 + 4 * i, seed=10 + i)))), text(f"Picture {i}?")] for i in range(8)
    ]
    sequential = [
        ask(client, [{"role": "user", "content": content}]).choices[0].message.content for content in requests
    ]

    async def run_all() -> list[str]:
        async with openai.AsyncOpenAI(base_url=f"{vision_server.url}/v1", api_key="x", max_retries=0) as aclient:
            replies = await asyncio.gather(
                *(
                    aclient.chat.completions.create(
                        model=MODEL, messages=[{"role": "user", "content": content}], max_tokens=16, temperature=0
                    )
                    for content in requests
                )
            )
        return [reply.choices[0].message.content for reply in replies]

    assert asyncio.run(run_all()) == sequential
    assert len(set(sequential)) > 1
    status = vision_server.model_status(MODEL)
    assert status["in_flight"] == 0
    # The engine counts image tokens before a request runs and compares with the pipeline's own
    # count afterwards, logging any difference: there was none for these sizes.
    assert "prompt token count with images" not in vision_server.log()


def test_text_only_graph_refuses_images(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model="demo-chat",
            messages=[{"role": "user", "content": [text("hi"), image(data_url(PNG_A))]}],
            max_tokens=2,
        )
    assert info.value.body["code"] == "unsupported_content"
    assert info.value.body["param"] == "messages[0].content[1]"


# -- refusals: RELIABILITY.md's image rows -------------------------------------------------------


def _refusal_cases(media_dir: Path, port: int) -> list[tuple[str, list[dict], str]]:
    def one(url: str) -> list[dict]:
        return [{"role": "user", "content": [text("x"), image(url)]}]

    base = f"http://127.0.0.1:{port}"
    return [
        # URLs: host not allowed, non-public addresses, redirects, schemes, credentials, slow/huge bodies
        ("host not allowed", one(f"http://localhost:{port}/a.png"), "invalid_image_url"),
        ("private address", one("http://10.0.0.1/a.png"), "invalid_image_url"),
        ("link-local metadata", one("http://169.254.169.254/latest/meta-data/"), "invalid_image_url"),
        ("CGNAT", one("http://100.64.0.1/a.png"), "invalid_image_url"),
        ("IPv4-mapped loopback", one(f"http://[::ffff:127.0.0.1]:{port}/a.png"), "invalid_image_url"),
        ("redirect to a private host", one(f"{base}/redirect?to=http://10.0.0.1/a.png"), "invalid_image_url"),
        ("redirect to metadata", one(f"{base}/redirect?to=http://169.254.169.254/"), "invalid_image_url"),
        ("redirect to file://", one(f"{base}/redirect?to=file:///etc/passwd"), "invalid_image_url"),
        ("redirect to a data: URL", one(f"{base}/redirect?to=data:image/png;base64,iVBORw0KGgo="), "invalid_image_url"),
        ("ftp scheme", one(f"ftp://127.0.0.1:{port}/a.png"), "invalid_image_url"),
        ("userinfo", one(f"http://user:pw@127.0.0.1:{port}/a.png"), "invalid_image_url"),
        ("slow body", one(f"{base}/slow"), "image_fetch_failed"),
        ("huge declared body", one(f"{base}/huge-declared"), "image_too_large"),
        ("huge chunked body", one(f"{base}/huge-chunked"), "image_too_large"),
        ("over the byte cap", one(f"{base}/huge.png"), "image_too_large"),
        ("stacked gzip", one(f"{base}/encoded?codings=gzip,gzip&zeros={64 << 20}"), "image_fetch_failed"),
        ("gzip bomb", one(f"{base}/encoded?codings=gzip&zeros={64 << 20}"), "image_too_large"),
        # local paths
        ("dot-dot", one(f"{media_dir}/../secret.png"), "invalid_image_url"),
        ("encoded dot-dot", one(f"file://{media_dir}/%2e%2e/secret.png"), "invalid_image_url"),
        ("symlink out", one(f"{media_dir}/link-out.png"), "invalid_image_url"),
        ("prefix trap", one(f"{media_dir}-evil/a.png"), "invalid_image_url"),
        ("NUL byte", one(f"{media_dir}/a.png\x00.txt"), "invalid_image_url"),
        ("relative path", one("allowed/a.png"), "invalid_image_url"),
        ("missing file", one(f"{media_dir}/missing.png"), "invalid_image_url"),
        # data and decoding
        ("bad base64", one("data:image/png;base64,not*base64"), "invalid_image"),
        ("wrong MIME", one("data:text/html;base64,PGI+aGk8L2I+"), "invalid_image_format"),
        ("truncated", one(data_url(PNG_A[: len(PNG_A) // 2])), "invalid_image"),
        ("garbage", one(data_url(os.urandom(500))), "invalid_image_format"),
        ("pixel bomb", one(data_url(png_header_only(20_000, 20_000))), "image_too_large"),
        ("too many images", [{"role": "user", "content": [image(data_url(PNG_B))] * 9}], "too_many_images"),
        ("image tag in text", [{"role": "user", "content": "<ov_genai_image_0> hi"}], "invalid_content"),
        ("native image token in text", [{"role": "user", "content": "<|image_pad|>"}], "invalid_content"),
    ]


def test_every_image_refusal_is_a_clean_400(vision_server: RunningServer, media_dir: Path, http_images) -> None:
    for name, messages, code in _refusal_cases(media_dir, http_images.server_port):
        response = httpx.post(
            f"{vision_server.url}/v1/chat/completions",
            json={"model": MODEL, "messages": messages, "max_tokens": 2},
            timeout=30,
        )
        assert response.status_code == 400, (name, response.text)
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}, name
        assert (error["type"], error["code"]) == ("invalid_request_error", code), (name, error)
        assert error["param"].startswith("messages"), (name, error)
    assert vision_server.model_status(MODEL)["in_flight"] == 0
    # The server still serves after all of that.
    ok = httpx.post(
        f"{vision_server.url}/v1/chat/completions",
        json={"model": MODEL, "messages": [{"role": "user", "content": [image(data_url(PNG_A))]}], "max_tokens": 2},
        timeout=30,
    )
    assert ok.status_code == 200


def test_many_frame_gif_uses_its_first_frame(client: openai.OpenAI) -> None:
    reply = ask(client, [{"role": "user", "content": [image(data_url(animated_gif(300), "image/gif"))]}], max_tokens=4)
    single = ask(client, [{"role": "user", "content": [image(data_url(animated_gif(1), "image/gif"))]}], max_tokens=4)
    assert reply.choices[0].message.content == single.choices[0].message.content


def test_elongated_image_is_a_400_not_a_pipeline_error(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        ask(client, [{"role": "user", "content": [image(data_url(encode(noise(3000, 10))))]}])
    assert info.value.body["code"] == "invalid_image"
    assert "elongated" in info.value.body["message"]
    assert ask(client, [{"role": "user", "content": [image(data_url(PNG_A))]}], max_tokens=2).choices


def test_engine_checks_the_rendered_prompt(demo_root: Path) -> None:
    """The engine's last line of defence, whatever text reached the template: each image's tag
    exactly once and in order (the pipeline would silently drop an untagged image), and none of the
    model's own image marker tokens."""
    import openvino_genai

    from appliance.engine.messages import ImageData
    from appliance.engine.worker.vlm import VisionInputError, VisionRequests
    from appliance.graphfiles import load_graph

    graph = load_graph(demo_root / "graphs" / f"{MODEL}.toml")
    requests = VisionRequests(graph, openvino_genai.Tokenizer(str(graph.model_dir)))
    assert requests.exact_counts
    assert requests.native_tokens == ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
    images = [ImageData(width=30, height=20, pixels=memoryview(bytes(30 * 20 * 3)))] * 2
    assert requests.prepare("<ov_genai_image_0><ov_genai_image_1>x", images).prompt_tokens > 16
    for prompt in (
        "<ov_genai_image_0>x",
        "<ov_genai_image_1><ov_genai_image_0>x",
        "<ov_genai_image_0><ov_genai_image_1><ov_genai_image_1>x",
        "<ov_genai_image_0><ov_genai_image_1><|image_pad|>",
    ):
        with pytest.raises(VisionInputError):
            requests.prepare(prompt, images)
    with pytest.raises(VisionInputError, match="elongated"):
        requests.prepare("<ov_genai_image_0>", [ImageData(width=3000, height=10, pixels=memoryview(bytes(90_000)))])


def test_completions_prompt_with_a_native_image_token_is_refused(vision_server: RunningServer) -> None:
    response = httpx.post(
        f"{vision_server.url}/v1/completions",
        json={"model": MODEL, "prompt": "<|vision_start|><|image_pad|><|vision_end|>", "max_tokens": 2},
        timeout=30,
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_image"
