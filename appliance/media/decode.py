"""Image bytes -> RGB pixels, within limits (blocking, CPU-bound: call it in a thread).

- Only PNG, JPEG, WebP, GIF, BMP and TIFF decoders are consulted (Pillow would otherwise try every
  plugin it has, some of which hand the data to external programs).
- The pixel count is read from the header and checked before any pixel is decoded, so a small file
  declaring a huge canvas (a pixel bomb) costs nothing; the decoded size is then at most
  `max_pixels * 3` bytes.
- Animated or multi-page images (GIF, WebP, TIFF, APNG) give their first frame; later frames are
  never decoded.
- EXIF orientation is applied (phone photos are stored sideways), transparency is composited on
  white, 16-bit images are scaled to 8 bits, and the result is RGB uint8, row-major (HWC), the
  layout OpenVINO GenAI's VLM pipelines take.
- `fit` (the model's rule, from `appliance.graphfiles.vision.image_fit`) scales an image down to the
  size the model uses, here on the decoding thread rather than in the engine, which would do it
  on the thread that steps every stream. An image already within it is left exactly as decoded.
- Pillow raises many kinds of exceptions on damaged files (OSError, SyntaxError, struct.error on a
  truncated GIF, ValueError, ...): every one becomes a 400 naming the problem.
"""

from __future__ import annotations

import binascii
import io
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from PIL import Image, ImageOps, UnidentifiedImageError

from appliance.errors import InvalidRequest, client_text

__all__ = ["FORMATS", "LOW_DETAIL_SIZE", "DecodedImage", "Fit", "decode_base64", "decode_image"]

FORMATS = ("PNG", "JPEG", "WEBP", "GIF", "BMP", "TIFF")
LOW_DETAIL_SIZE = 512
"""`detail: "low"`: the image is scaled down to fit in this many pixels per side."""

Detail = Literal["auto", "low", "high"]
Fit = Callable[[int, int], tuple[int, int]]
"""(height, width) -> the (height, width) to scale the image down to; ValueError if the model
cannot take the image at all."""
_BASE64_SLICE = 1 << 20
_ORIENTATION = 0x0112  # the EXIF tag


@dataclass(frozen=True)
class DecodedImage:
    """An RGB image, 8 bits per channel, rows top to bottom: `width * height * 3` bytes."""

    width: int
    height: int
    pixels: bytes


def _refuse(message: str, code: str = "invalid_image") -> InvalidRequest:
    return InvalidRequest(message, code=code)


def decode_base64(payload: str, max_bytes: int) -> bytes:
    """The bytes of a data URL's base64 payload (line breaks tolerated), at most `max_bytes`.

    Decoded a slice at a time: one call over a 20 MB payload would hold the GIL for a few hundred
    milliseconds, stalling the event loop even from a worker thread.
    """
    decoded = bytearray()
    carry = b""
    for start in range(0, len(payload), _BASE64_SLICE):
        try:
            text = carry + payload[start : start + _BASE64_SLICE].encode("ascii").translate(None, b" \t\r\n")
        except UnicodeEncodeError:
            raise _refuse("Image data URL is not valid base64.") from None
        whole = len(text) - len(text) % 4  # base64 decodes in groups of 4 characters
        carry = text[whole:]
        try:
            decoded += binascii.a2b_base64(text[:whole], strict_mode=True)
        except binascii.Error:
            raise _refuse("Image data URL is not valid base64.") from None
        if len(decoded) > max_bytes:
            raise _refuse(
                f"Image is larger than this server accepts ({max_bytes} bytes per image, see --max-image-bytes).",
                code="image_too_large",
            )
    if carry:
        raise _refuse("Image data URL is not valid base64.")
    return bytes(decoded)


def decode_image(data: bytes, *, max_pixels: int, detail: Detail = "auto", fit: Fit | None = None) -> DecodedImage:
    """Decode the first frame of `data` to RGB, scaled down by `fit`; InvalidRequest if it is not a
    supported, intact image of at most `max_pixels` pixels, or one `fit` refuses."""
    if not data:
        raise _refuse("Image is empty.")
    try:
        with warnings.catch_warnings():
            # Our own limit (below) decides; Pillow's global MAX_IMAGE_PIXELS would only warn.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=FORMATS) as image:
                width, height = image.size
                if width < 1 or height < 1:
                    raise _refuse("Image has no pixels.")
                if width * height > max_pixels:
                    raise _refuse(
                        f"Image is {width}x{height} = {width * height} pixels; this model accepts at most "
                        f"{max_pixels} pixels per image.",
                        code="image_too_large",
                    )
                image.load()
                # exif_transpose copies even an upright image: only call it when there is a turn.
                if image.getexif().get(_ORIENTATION, 1) != 1:
                    image = ImageOps.exif_transpose(image)
                rgb = _to_rgb(image)
                if detail == "low":
                    rgb.thumbnail((LOW_DETAIL_SIZE, LOW_DETAIL_SIZE), Image.Resampling.BICUBIC)
                if fit is not None:
                    rgb = _fitted(rgb, fit)
                return DecodedImage(width=rgb.width, height=rgb.height, pixels=rgb.tobytes())
    except InvalidRequest:
        raise
    except Image.DecompressionBombError:  # Pillow's own ceiling, far above any sane limit of ours
        raise _refuse(
            f"Image has more pixels than this model accepts (at most {max_pixels} per image).",
            code="image_too_large",
        ) from None
    except UnidentifiedImageError:
        raise _refuse("Image is not a PNG, JPEG, WebP, GIF, BMP or TIFF file.", code="invalid_image_format") from None
    except Exception as exc:  # Pillow's decoders raise many types on damaged input (see module doc)
        raise _refuse(
            f"Image could not be decoded (damaged or truncated file): {type(exc).__name__}: {client_text(str(exc))}"
        ) from None


def _fitted(image: Image.Image, fit: Fit) -> Image.Image:
    try:
        height, width = fit(image.height, image.width)
    except ValueError as exc:
        raise _refuse(f"Image cannot be used with this model: {exc}.") from None
    if (width, height) == image.size:
        return image
    # Bicubic, as the VLM processors resample. reducing_gap: a box reduction first, then bicubic
    # over the last factor of 3 or less: 4096x4096 -> 224x224 in 45 ms instead of 260 ms, with a
    # result Pillow documents as indistinguishable from a plain resize.
    return image.resize((width, height), Image.Resampling.BICUBIC, reducing_gap=3.0)


def _to_rgb(image: Image.Image) -> Image.Image:
    if image.mode == "RGB":
        return image
    if image.mode.startswith("I;16"):
        # Scale 16-bit samples to 8 bits (a plain convert would clip everything above 255 to white).
        image = image.point(lambda value: value / 256, "L") if image.mode == "I;16" else image.convert("I")
    if image.mode == "I":
        image = image.point(lambda value: value / 256).convert("L")
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")
