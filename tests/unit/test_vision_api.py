"""Image parts through the HTTP layer and the service, against the in-process fake engine: tags and
order, limits and refusals before any fetch or decode, admission before preparation."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest
from litestar.testing import TestClient
from PIL import Image

from appliance.engine.messages import ChatPrompt, SamplingParams
from appliance.errors import Overloaded
from appliance.graphfiles import Graph, Limits
from appliance.media import ImageLoader, build_policy
from tests import apps
from tests.apps import app_client
from tests.fakes import FakeEngineClient, fake_graph
from tests.images import data_url, encode, image_server, noise, png_header_only

PNG_A = encode(noise(30, 20, seed=1))
PNG_B = encode(noise(12, 16, seed=2))


def vision_graph(**limits) -> Graph:
    return Graph(name="vision", model_path="/nonexistent", pipeline="VLM_CB", limits=Limits(**limits))


@pytest.fixture
def media_dir(tmp_path: Path) -> Path:
    (tmp_path / "media").mkdir()
    (tmp_path / "media" / "b.png").write_bytes(PNG_B)
    return tmp_path / "media"


@pytest.fixture
def http_images() -> Iterator:
    with image_server({"/a.png": PNG_A}) as server:
        yield server


@pytest.fixture
def vision() -> FakeEngineClient:
    engine = FakeEngineClient(vision_graph(max_images_per_request=3, max_image_pixels=10_000))
    engine.vision_tokens = ("<|image_pad|>",)
    return engine


@pytest.fixture
def client(vision: FakeEngineClient, media_dir: Path) -> Iterator[TestClient]:
    media = ImageLoader(
        build_policy(
            allowed_domains=["127.0.0.1"],
            allowed_networks=["127.0.0.1/32"],
            allowed_local_media_path=str(media_dir),
        )
    )
    text_engine = FakeEngineClient(fake_graph("text"))
    with app_client(vision, text_engine, max_body_size=1 << 20, media=media) as test_client:
        yield test_client


def image(url: str, detail: str | None = None) -> dict:
    part: dict = {"type": "image_url", "image_url": {"url": url}}
    if detail:
        part["image_url"]["detail"] = detail
    return part


def text(value: str) -> dict:
    return {"type": "text", "text": value}


chat = functools.partial(apps.chat, model="vision", max_tokens=4)


def assert_400(response, param: str, code: str) -> str:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["param"], error["code"]) == (param, code), error
    return error["message"]


def test_images_from_every_source_reach_the_engine_in_order(
    client: TestClient, vision: FakeEngineClient, media_dir: Path, http_images
) -> None:
    url = f"http://127.0.0.1:{http_images.server_port}/a.png"
    messages = [
        {"role": "system", "content": "Look closely."},
        {"role": "user", "content": [text("First"), image(data_url(PNG_A)), text("and"), text("more")]},
        {"role": "assistant", "content": "A picture."},
        {"role": "user", "content": [image(url), image(f"{media_dir}/b.png"), text("Compare.")]},
    ]
    response = chat(client, messages)
    assert response.status_code == 200, response.text
    prompt = vision.submitted[-1].prompt
    assert [m["content"] for m in prompt.messages] == [
        "Look closely.",
        "First<ov_genai_image_0>and\nmore",
        "A picture.",
        "<ov_genai_image_1><ov_genai_image_2>Compare.",
    ]
    assert [(i.width, i.height) for i in prompt.images] == [(30, 20), (30, 20), (12, 16)]
    assert bytes(prompt.images[0].pixels) == noise(30, 20, seed=1).tobytes()
    assert bytes(prompt.images[2].pixels) == noise(12, 16, seed=2).tobytes()


def test_text_only_graph_refuses_images(client: TestClient) -> None:
    response = chat(client, [{"role": "user", "content": [text("hi"), image(data_url(PNG_A))]}], model="text")
    assert_400(response, "messages[0].content[1]", "unsupported_content")


def test_too_many_images_counts_the_whole_conversation(client: TestClient, vision: FakeEngineClient) -> None:
    two = [image(data_url(PNG_A)), image(data_url(PNG_A))]
    messages = [
        {"role": "user", "content": two},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": two},
    ]
    message = assert_400(chat(client, messages), "messages[2].content[1]", "too_many_images")
    assert "at most 3" in message
    assert vision.submitted == []


@pytest.mark.parametrize(
    ("content", "param"),
    [
        ("<ov_genai_image_0> what is this?", "messages[0].content"),
        ([text("see <ov_genai_image_12>")], "messages[0].content[0].text"),
        ([text("<ov_genai_video_0>")], "messages[0].content[0].text"),
        ([text("<|image_pad|>")], "messages[0].content[0].text"),
    ],
)
def test_image_tags_in_text_are_refused(client: TestClient, content, param: str) -> None:
    assert_400(chat(client, [{"role": "user", "content": content}]), param, "invalid_content")


def test_image_tags_in_other_roles_are_refused_too(client: TestClient) -> None:
    messages = [{"role": "system", "content": "<ov_genai_image_0>"}, {"role": "user", "content": "hi"}]
    assert_400(chat(client, messages), "messages[0].content", "invalid_content")


def test_image_tags_are_plain_text_for_text_models(client: TestClient) -> None:
    assert chat(client, [{"role": "user", "content": "<ov_genai_image_0>"}], model="text").status_code == 200


def test_completions_prompt_with_image_tag_is_refused(client: TestClient) -> None:
    response = client.post("/v1/completions", json={"model": "vision", "prompt": ["ok", "<ov_genai_image_0>"]})
    assert_400(response, "prompt[1]", "invalid_content")


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("data:text/plain;base64,aGk=", "invalid_image_format"),
        ("data:image/png;base64,!!!!", "invalid_image"),
        ("data:image/png;base64," + data_url(b"garbage").split(",")[1], "invalid_image_format"),
        (data_url(PNG_A[:60]), "invalid_image"),
        (data_url(png_header_only(101, 100)), "image_too_large"),
        ("ftp://127.0.0.1/a.png", "invalid_image_url"),
        ("http://localhost/a.png", "invalid_image_url"),
        ("relative.png", "invalid_image_url"),
        ("/etc/passwd", "invalid_image_url"),
    ],
)
def test_bad_images_are_400_naming_the_part(client: TestClient, url: str, code: str) -> None:
    response = chat(client, [{"role": "user", "content": [text("x"), image(url)]}])
    param = response.json()["error"]["param"]
    assert param.startswith("messages[0].content[1].image_url"), param
    assert_400(response, param, code)


def test_policy_refusals_happen_before_any_fetch(client: TestClient, http_images) -> None:
    good = f"http://127.0.0.1:{http_images.server_port}/a.png"
    response = chat(client, [{"role": "user", "content": [image(good), image("ftp://127.0.0.1/x.png")]}])
    assert_400(response, "messages[0].content[1].image_url.url", "invalid_image_url")
    assert http_images.hits == []


def test_refused_requests_fetch_nothing(vision: FakeEngineClient, client: TestClient, http_images) -> None:
    messages = [{"role": "user", "content": [image(f"http://127.0.0.1:{http_images.server_port}/a.png")]}]
    vision.state = "loading"
    assert chat(client, messages).status_code == 503
    vision.state = "ready"
    vision.graph = vision_graph(max_queued_requests=1)
    held = vision.reserve()  # the queue's one place is taken
    try:
        response = chat(client, messages)
        assert response.status_code == 503 and response.json()["error"]["code"] == "overloaded"
    finally:
        held.release()
    assert http_images.hits == []
    assert chat(client, messages).status_code == 200
    assert len(http_images.hits) == 1
    assert vision.in_flight == 0


def test_reservation_counts_in_flight_and_is_released() -> None:
    async def scenario() -> None:
        engine = FakeEngineClient(vision_graph(max_queued_requests=1))
        engine.hold = True
        engine.start()
        with engine.reserve() as reservation:
            assert engine.in_flight == 1
            with pytest.raises(Overloaded):
                engine.reserve()
            prompt = ChatPrompt(messages=[{"role": "user", "content": "a b"}])
            stream = await engine.submit(prompt, SamplingParams(max_new_tokens=2), reservation=reservation)
            assert engine.in_flight == 1  # the place passed from the reservation to the stream
        assert engine.in_flight == 1
        stream.cancel()
        assert engine.in_flight == 0
        with engine.reserve():
            pass  # released on exit without a submit
        assert engine.in_flight == 0

    asyncio.run(scenario())


def test_detail_low_scales_before_the_engine(client: TestClient, vision: FakeEngineClient) -> None:
    vision.graph = vision_graph(max_image_pixels=1_000_000)
    big = data_url(encode(Image.new("RGB", (1200, 600), (10, 200, 30))))
    assert chat(client, [{"role": "user", "content": [image(big, "low"), image(big, "high")]}]).status_code == 200
    images = vision.submitted[-1].prompt.images
    assert [(i.width, i.height) for i in images] == [(512, 256), (1200, 600)]


def test_pixels_travel_in_raw_frames_after_the_submit() -> None:
    from appliance.engine.messages import Cancel, ImageData, Submit, ToEngineDecoder, encode_to_engine

    pixels = [bytes(range(6)) * 2, bytes(3)]
    images = [ImageData(width=2, height=2, pixels=pixels[0]), ImageData(width=1, height=1, pixels=pixels[1])]
    submit = Submit(
        request_id=7, prompt=ChatPrompt(messages=[], images=images), params=SamplingParams(max_new_tokens=1)
    )
    frames = encode_to_engine(submit)
    assert len(frames) == 3 and frames[1] is pixels[0] and frames[2] is pixels[1]  # sent as they are
    assert b"\x00\x01\x02\x03\x04\x05" not in frames[0]  # no pixels in the message itself
    decoder = ToEngineDecoder()
    received = [decoder.feed(bytes(frame)) for frame in [*frames, *encode_to_engine(Cancel(request_id=7))]]
    assert received[:2] == [None, None]
    assert [(i.width, i.height, bytes(i.pixels)) for i in received[2].prompt.images] == [
        (2, 2, pixels[0]),
        (1, 1, pixels[1]),
    ]
    assert received[3] == Cancel(request_id=7)
    text_only = Submit(request_id=8, prompt=ChatPrompt(messages=[]), params=SamplingParams(max_new_tokens=1))
    assert decoder.feed(encode_to_engine(text_only)[0]) == text_only


def test_images_reach_the_engine_at_the_size_the_model_uses(client: TestClient, vision: FakeEngineClient) -> None:
    vision.graph = vision_graph(max_image_pixels=1_000_000)
    vision.image_fit = lambda height, width: (min(height, 28), min(width, 56))
    big = noise(300, 200, seed=3)
    content = [image(data_url(encode(big))), image(data_url(PNG_B))]
    assert chat(client, [{"role": "user", "content": content}]).status_code == 200
    images = vision.submitted[-1].prompt.images
    assert [(i.width, i.height) for i in images] == [(56, 28), (12, 16)]
    assert bytes(images[1].pixels) == noise(12, 16, seed=2).tobytes()  # within the model's size: as sent


def test_pixels_per_request_are_bounded_after_scaling(client: TestClient, vision: FakeEngineClient) -> None:
    # PNG_A is 30x20 = 600 pixels: two fit in 1,200, three do not.
    vision.graph = vision_graph(max_images_per_request=8, max_image_pixels_per_request=1_200)
    submitted = len(vision.submitted)
    two = [image(data_url(PNG_A))] * 2
    assert chat(client, [{"role": "user", "content": two}]).status_code == 200
    message = assert_400(
        chat(client, [{"role": "user", "content": [*two, image(data_url(PNG_A))]}]), "messages", "too_many_image_pixels"
    )
    assert "1200" in message and "max_image_pixels_per_request" in message
    assert len(vision.submitted) == submitted + 1  # the refused request never reached the engine
    assert vision.in_flight == 0
    # Counted after scaling: the same three images fit once the model uses fewer of their pixels.
    vision.image_fit = lambda height, width: (10, 10)
    assert chat(client, [{"role": "user", "content": [*two, image(data_url(PNG_A))]}]).status_code == 200
