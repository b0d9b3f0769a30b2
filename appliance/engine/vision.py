"""Vision-language graphs: image tags in prompts and how many tokens an image becomes.

OpenVINO GenAI places the images of a request where the prompt holds `<ov_genai_image_N>` (N
counts the request's images from 0) and SILENTLY DROPS images that have no tag, so the chat service
writes exactly one tag per image part, numbered across the whole conversation, and the engine
checks the rendered prompt holds each tag once, in order, before the request reaches the pipeline.

A prompt's token count includes the tokens its images expand to, which the pipeline only reports
once a request has finished. For the Qwen2-VL family the count is computed here beforehand
(matching the pipeline's own resize rule, checked against its reported count on the tiny demo
model), so the context-length check stays exact; for other VLM families images count as 0 tokens
in that check and usage reports the pipeline's exact count. Pure Python: the service imports the
tag helpers from here.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "IMAGE_TAG_PATTERN",
    "PIPELINE_TAG_PATTERN",
    "ImageTokens",
    "check_image_tags",
    "image_tag",
    "image_tokens",
    "native_token_ids",
]

PIPELINE_TAG_PATTERN = re.compile(r"<ov_genai_(?:image|video)_\d+>")
"""Anything the pipeline would read as an image or video placement tag."""
IMAGE_TAG_PATTERN = re.compile(r"<ov_genai_image_(\d+)>")

ImageTokens = Callable[[int, int], int]
"""(height, width) -> tokens one image takes in the prompt, wrapper tokens included."""


def image_tag(index: int) -> str:
    """The tag that places the request's image number `index` (0-based) in a prompt."""
    return f"<ov_genai_image_{index}>"


def check_image_tags(prompt: str, images: int) -> None:
    """ValueError unless `prompt` holds the tags of images 0..images-1, each once and in order."""
    found = [int(number) for number in IMAGE_TAG_PATTERN.findall(prompt)]
    if found != list(range(images)):
        raise ValueError(
            f"the chat template placed image tags {found} for {images} image(s); every image must "
            "appear exactly once, in order (does the template drop or reorder messages?)"
        )


@dataclass(frozen=True)
class _QwenVLGrid:
    """Qwen2-VL / Qwen2.5-VL: images are resized to multiples of patch*merge pixels within
    [min_pixels, max_pixels], cut into patches, and every merge x merge patches become one token."""

    patch_size: int
    merge_size: int
    min_pixels: int
    max_pixels: int
    max_aspect_ratio: int = 200

    def __call__(self, height: int, width: int) -> int:
        factor = self.patch_size * self.merge_size
        if max(height, width) > self.max_aspect_ratio * min(height, width):
            raise ValueError(
                f"an image of {width}x{height} pixels is more elongated than this model accepts "
                f"(aspect ratio at most {self.max_aspect_ratio}:1)"
            )
        # The pipeline's resize rule (C++ rounding: halves away from zero), which differs from
        # transformers' current smart_resize on small and elongated images.
        resized_h = math.floor(height / factor + 0.5) * factor
        resized_w = math.floor(width / factor + 0.5) * factor
        if resized_h * resized_w > self.max_pixels:
            beta = math.sqrt(height * width / self.max_pixels)
            resized_h = math.floor(height / beta / factor) * factor
            resized_w = math.floor(width / beta / factor) * factor
        elif resized_h * resized_w < self.min_pixels:
            beta = math.sqrt(self.min_pixels / (height * width))
            resized_h = math.ceil(height * beta / factor) * factor
            resized_w = math.ceil(width * beta / factor) * factor
        if resized_h == 0 or resized_w == 0:
            # The pipeline's vision encoder fails on these with an internal reshape error.
            raise ValueError(
                f"an image of {width}x{height} pixels is too elongated for this model once scaled to "
                f"at most {self.max_pixels} pixels"
            )
        # <|vision_start|> + one <|image_pad|> per merged patch + <|vision_end|>
        return (resized_h // factor) * (resized_w // factor) + 2


def image_tokens(model_dir: Path) -> ImageTokens | None:
    """How many prompt tokens an image takes with this model; None for families not known here."""
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if config.get("model_type") not in ("qwen2_vl", "qwen2_5_vl"):
        return None
    try:
        processor = json.loads((model_dir / "preprocessor_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        processor = {}
    size = processor.get("size") or {}
    # Qwen2-VL's defaults, used by the pipeline when the folder has no preprocessor_config.json.
    return _QwenVLGrid(
        patch_size=int(processor.get("patch_size", 14)),
        merge_size=int(processor.get("merge_size", 2)),
        min_pixels=int(processor.get("min_pixels") or size.get("shortest_edge") or 56 * 56),
        max_pixels=int(processor.get("max_pixels") or size.get("longest_edge") or 28 * 28 * 1280),
    )


_NATIVE_TOKEN_KEY = re.compile(r"^(image|video|vision|boi|eoi)[a-z_]*_token_(id|index)$")


def native_token_ids(model_dir: Path) -> list[int]:
    """Ids of the model's own image/video marker tokens named in config.json (e.g. Qwen2-VL's
    <|vision_start|>, <|image_pad|>): user text spelling them could misplace or break images."""
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    ids = [value for key, value in config.items() if _NATIVE_TOKEN_KEY.match(key) and isinstance(value, int)]
    return sorted(set(ids))
