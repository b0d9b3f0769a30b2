"""Large images on demo-vision (issue 28, item 8): scaled down in the server to what the model
uses, off the event loop, before the engine sees them; a request's images bounded in total pixels.

Before: four requests of eight 4096x4096 PNGs (~70 KB each, as a flat picture compresses) sent
~400 MB of pixels to the engine, which resized them on the thread that steps every stream: its
neighbours stalled for 8 s and the engine grew to 1.5 GB (peak 1.9 GB).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from PIL import Image, ImageDraw

from tests.conftest import RunningServer, copy_demo_graphs, running_server
from tests.e2e.neighbour import Neighbour
from tests.images import data_url, encode, noise

MODEL = "demo-vision"
STRICT_MODEL = "demo-vision-strict"
STRICT_PIXELS = 120_000
"""demo-vision's processor uses at most 224 x 224 = 50,176 pixels an image: two fit, three do not."""


@pytest.fixture(scope="module")
def server(demo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """demo-vision, and the same model with a low `max_image_pixels_per_request`."""
    directory = tmp_path_factory.mktemp("large-images")
    graphs = copy_demo_graphs(demo_root, directory, [MODEL])
    strict = (graphs / f"{MODEL}.toml").read_text().replace(f'name = "{MODEL}"', f'name = "{STRICT_MODEL}"')
    strict = strict.replace("[limits]\n", f"[limits]\nmax_image_pixels_per_request = {STRICT_PIXELS}\n")
    (graphs / f"{STRICT_MODEL}.toml").write_text(strict)
    with running_server(graphs, directory / "server.log") as running:
        yield running


def flat_png(index: int, size: int = 4096) -> bytes:
    """A 4096x4096 picture of a few flat shapes: ~65 KB as PNG, 48 MB of pixels."""
    picture = Image.new("RGB", (size, size), (30 * index % 256, 120, 200))
    draw = ImageDraw.Draw(picture)
    draw.rectangle((size // 8, size // 8, size // 2 + 64 * index, size * 3 // 4), fill=(255, 200 - 10 * index, 0))
    draw.ellipse((size * 5 // 8, size // 16, size * 15 // 16, size * 7 // 16), fill=(0, 0, 255))
    buffer = io.BytesIO()
    picture.save(buffer, "PNG")
    return buffer.getvalue()


def memory_mb(pid: int) -> dict[str, float]:
    """The process's resident memory now (VmRSS) and at its peak (VmHWM), in MB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {name: int(fields[name].split()[0]) / 1024 for name in ("VmRSS", "VmHWM")}


def chat(images: list[str], prompt: str = "Describe the pictures.") -> dict:
    parts = [{"type": "image_url", "image_url": {"url": url}} for url in images]
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}, *parts]}],
        "max_tokens": 8,
        "temperature": 0,
    }


def test_four_requests_of_eight_huge_pngs_leave_the_neighbour_and_the_engine_alone(server: RunningServer) -> None:
    pngs = [flat_png(index) for index in range(8)]
    print(f"PNG sizes: {min(map(len, pngs))}-{max(map(len, pngs))} bytes, 4096x4096 each")
    body = chat([data_url(png) for png in pngs])
    pid = server.model_status(MODEL)["pid"]
    before = memory_mb(pid)
    with Neighbour(server.url, MODEL) as neighbour, ThreadPoolExecutor(4) as pool:
        responses = list(
            pool.map(lambda _: httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=300), range(4))
        )
    after = memory_mb(pid)
    print(
        f"engine RSS {before['VmRSS']:.0f} -> {after['VmRSS']:.0f} MB, peak {before['VmHWM']:.0f} -> "
        f"{after['VmHWM']:.0f} MB; neighbour's largest gap {neighbour.largest_gap:.3f} s (shared machine)"
    )
    for response in responses:
        assert response.status_code == 200, response.text
        assert response.json()["usage"]["prompt_tokens"] > 8 * 64  # the eight images reached the model
    neighbour.assert_unharmed()
    # The engine sees at most 224 x 224 pixels an image (150 KB), not 48 MB: its peak stays put.
    # Memory, not time, so asserted; the margin is wide (it grew by ~1.4 GB before).
    assert after["VmHWM"] - before["VmHWM"] < 200, (before, after)


def test_a_large_image_reaches_the_model_as_the_server_scaled_it(server: RunningServer) -> None:
    """Scaled in the server to the size the pipeline's own rule gives (so the same prompt tokens),
    with Pillow's bicubic: the model answers as to that image scaled by the client; before, the
    pipeline's own resize gave a different answer."""

    def reply(png: bytes) -> tuple[str, int]:
        response = httpx.post(f"{server.url}/v1/chat/completions", json=chat([data_url(png)]), timeout=60)
        assert response.status_code == 200, response.text
        answer = response.json()
        return answer["choices"][0]["message"]["content"], answer["usage"]["prompt_tokens"]

    large = noise(1200, 900, seed=3)
    # The pipeline's rule for 1200x900 within 50,176 pixels: 252x168 (9 x 6 patches of 28 pixels).
    scaled = large.resize((252, 168), Image.Resampling.BICUBIC, reducing_gap=3.0)
    assert reply(encode(large)) == reply(encode(scaled))
    assert reply(encode(scaled))[1] == reply(encode(noise(252, 168, seed=4)))[1]


def test_too_many_pixels_in_one_request_is_a_400_naming_messages(server: RunningServer) -> None:
    two = {**chat([data_url(flat_png(index, 1024)) for index in range(2)]), "model": STRICT_MODEL}
    ok = httpx.post(f"{server.url}/v1/chat/completions", json=two, timeout=60)
    assert ok.status_code == 200, ok.text
    three = {**chat([data_url(flat_png(index, 1024)) for index in range(3)]), "model": STRICT_MODEL}
    response = httpx.post(f"{server.url}/v1/chat/completions", json=three, timeout=60)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["param"], error["code"]) == ("messages", "too_many_image_pixels"), error
    assert "max_image_pixels_per_request" in error["message"] and str(STRICT_PIXELS) in error["message"]
    assert server.model_status(STRICT_MODEL)["in_flight"] == 0
