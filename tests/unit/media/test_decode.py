"""Decoding: every supported format, orientation, first frames, and 400s for anything damaged."""

from __future__ import annotations

import time

import pytest
from PIL import Image

from appliance.errors import InvalidRequest
from appliance.media.decode import LOW_DETAIL_SIZE, decode_base64, decode_image
from tests.images import animated_gif, encode, noise, png_header_only

MAX_PIXELS = 4096 * 4096


@pytest.mark.parametrize(
    ("fmt", "options"),
    [("PNG", {}), ("JPEG", {"quality": 95}), ("WEBP", {"lossless": True}), ("GIF", {}), ("BMP", {}), ("TIFF", {})],
)
def test_supported_formats_decode_to_rgb(fmt: str, options: dict) -> None:
    image = noise(40, 30, seed=1)
    decoded = decode_image(encode(image, fmt, **options), max_pixels=MAX_PIXELS)
    assert (decoded.width, decoded.height) == (40, 30)
    assert len(decoded.pixels) == 40 * 30 * 3
    if fmt in ("PNG", "WEBP", "BMP", "TIFF"):  # lossless: the very same pixels
        assert decoded.pixels == image.tobytes()


def test_exif_orientation_is_applied() -> None:
    image = noise(40, 20, seed=2)
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 CW to display": stored landscape, shown portrait
    decoded = decode_image(encode(image, "JPEG", exif=exif), max_pixels=MAX_PIXELS)
    assert (decoded.width, decoded.height) == (20, 40)


def test_transparency_is_composited_on_white() -> None:
    transparent = Image.new("RGBA", (4, 4), (255, 0, 0, 0))
    decoded = decode_image(encode(transparent), max_pixels=MAX_PIXELS)
    assert decoded.pixels[:3] == b"\xff\xff\xff"


def test_grayscale_and_sixteen_bit_become_rgb() -> None:
    assert decode_image(encode(noise(8, 8, mode="L")), max_pixels=MAX_PIXELS).pixels[:3] in {
        bytes([v, v, v]) for v in range(256)
    }
    import numpy as np

    sixteen = Image.fromarray(np.full((4, 4), 40000, np.uint16))
    assert decode_image(encode(sixteen), max_pixels=MAX_PIXELS).pixels[:3] == bytes([156] * 3)


def test_many_frame_gif_gives_its_first_frame_quickly() -> None:
    data = animated_gif(500)
    started = time.thread_time()
    decoded = decode_image(data, max_pixels=MAX_PIXELS)
    assert time.thread_time() - started < 1.0
    assert (decoded.width, decoded.height) == (32, 32)
    first = decode_image(animated_gif(1), max_pixels=MAX_PIXELS)
    assert decoded.pixels == first.pixels


def test_low_detail_scales_down() -> None:
    decoded = decode_image(encode(noise(1200, 600)), max_pixels=MAX_PIXELS, detail="low")
    assert (decoded.width, decoded.height) == (LOW_DETAIL_SIZE, LOW_DETAIL_SIZE // 2)


def _refused(data: bytes, code: str = "invalid_image", max_pixels: int = MAX_PIXELS) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        decode_image(data, max_pixels=max_pixels)
    assert info.value.status == 400
    assert info.value.code == code
    return info.value


def test_pixel_bomb_is_refused_from_the_header() -> None:
    started = time.thread_time()
    error = _refused(png_header_only(100_000, 100_000), code="image_too_large")
    assert time.thread_time() - started < 0.5
    assert str(MAX_PIXELS) in error.message
    error = _refused(png_header_only(5000, 5000), code="image_too_large")
    assert "5000x5000" in error.message


def test_pixel_limit_is_the_graphs() -> None:
    data = encode(noise(100, 100))
    assert decode_image(data, max_pixels=10_000).width == 100
    _refused(data, code="image_too_large", max_pixels=9_999)


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP", "BMP", "TIFF"])
def test_truncated_images_are_refused(fmt: str) -> None:
    data = encode(noise(64, 64, seed=3), fmt)
    _refused(data[: len(data) // 2])


def test_garbage_and_empty_and_other_formats_are_refused() -> None:
    assert _refused(b"definitely not an image" * 10, code="invalid_image_format")
    assert _refused(b"")
    assert _refused(encode(noise(8, 8), "ICO"), code="invalid_image_format")
    assert _refused(b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n", code="invalid_image_format")


def test_truncated_gif_struct_error_is_a_400() -> None:
    # Pillow raises struct.error (not OSError) for some truncated GIFs.
    data = animated_gif(3)
    for cut in (12, 20, 30, 40, len(data) - 5):
        with pytest.raises(InvalidRequest):
            decode_image(data[:cut], max_pixels=MAX_PIXELS)


def test_base64() -> None:
    assert decode_base64("aGVsbG8=", 10) == b"hello"
    assert decode_base64("aGVs\nbG8=", 10) == b"hello"  # MIME line breaks
    for bad in ("aGVsbG8", "a*b=", "!!!!"):
        with pytest.raises(InvalidRequest, match="base64"):
            decode_base64(bad, 10)
    with pytest.raises(InvalidRequest) as info:
        decode_base64("aGVsbG8=", 4)
    assert info.value.code == "image_too_large"


def test_base64_across_slices_with_line_breaks() -> None:
    import base64
    import os

    raw = os.urandom(3_000_001)
    text = base64.b64encode(raw).decode()
    assert decode_base64(text, len(raw)) == raw
    wrapped = "\r\n".join(text[i : i + 76] for i in range(0, len(text), 76))  # MIME style
    assert decode_base64(wrapped, len(raw)) == raw
    with pytest.raises(InvalidRequest) as info:
        decode_base64(text, len(raw) - 1)
    assert info.value.code == "image_too_large"
    with pytest.raises(InvalidRequest, match="base64"):
        decode_base64(text[:-1], len(raw))
    with pytest.raises(InvalidRequest, match="base64"):
        decode_base64(text[:1000] + "é" + text[1000:], len(raw))


def test_fit_scales_down_to_the_models_size_and_leaves_smaller_images_untouched() -> None:
    def fit(height: int, width: int) -> tuple[int, int]:
        return min(height, 56), min(width, 84)

    large = noise(300, 200, seed=5)
    decoded = decode_image(encode(large), max_pixels=MAX_PIXELS, fit=fit)
    assert (decoded.width, decoded.height) == (84, 56)
    expected = large.resize((84, 56), Image.Resampling.BICUBIC, reducing_gap=3.0)
    assert decoded.pixels == expected.tobytes()
    small = noise(80, 50, seed=6)
    assert decode_image(encode(small), max_pixels=MAX_PIXELS, fit=fit).pixels == small.tobytes()


def test_fit_sees_the_image_as_shown_after_low_detail() -> None:
    seen: list[tuple[int, int]] = []

    def fit(height: int, width: int) -> tuple[int, int]:
        seen.append((height, width))
        return height, width

    exif = Image.Exif()
    exif[0x0112] = 6
    decode_image(encode(noise(1200, 600), "JPEG", exif=exif), max_pixels=MAX_PIXELS, detail="low", fit=fit)
    assert seen == [(LOW_DETAIL_SIZE, LOW_DETAIL_SIZE // 2)]  # turned upright, then scaled for "low"


def test_an_image_the_model_cannot_take_is_a_400() -> None:
    def fit(height: int, width: int) -> tuple[int, int]:
        raise ValueError("an image of 3000x10 pixels is more elongated than this model accepts")

    with pytest.raises(InvalidRequest) as info:
        decode_image(encode(noise(3000, 10)), max_pixels=MAX_PIXELS, fit=fit)
    assert (info.value.status, info.value.code) == (400, "invalid_image")
    assert "elongated" in info.value.message
