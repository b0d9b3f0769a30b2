"""Vision-language graphs: image tags in prompts, how many tokens an image becomes, and how far
it may be scaled down before it reaches the pipeline.

OpenVINO GenAI places the images of a request where the prompt holds `<ov_genai_image_N>` (N
counts the request's images from 0) and SILENTLY DROPS images that have no tag, so the chat service
writes exactly one tag per image part, numbered across the whole conversation, and the engine
checks the rendered prompt holds each tag once, in order, before the request reaches the pipeline.

A prompt's token count includes the tokens its images expand to, which the pipeline only reports
once a request has finished. For the Qwen2-VL family the count is computed here beforehand
(matching the pipeline's own resize rule, checked against its reported count on the tiny demo
model), so the context-length check stays exact; for other VLM families images count as 0 tokens
in that check and usage reports the pipeline's exact count.

Every pipeline scales an image to its processor's size in `add_request`, on the thread that steps
every stream, from pixels that crossed the pipe raw (a 4096x4096 image: 48 MB, for a 224x224 input
on the demo model). `image_fit` gives the size the model actually uses (Qwen2-VL: the pipeline's own
rule; LLaVA: the shorter side; Gemma 3: its fixed size), so the server scales the image there,
on a worker thread, and the pipeline's resize becomes a no-op. Pure Python: the service imports
the tag helpers and `image_fit` from here.
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
    "ImageFit",
    "ImageTokens",
    "check_image_tags",
    "image_fit",
    "image_tag",
    "image_tokens",
    "native_token_ids",
]

PIPELINE_TAG_PATTERN = re.compile(r"<ov_genai_(?:image|video)_\d+>")
"""Anything the pipeline would read as an image or video placement tag."""
IMAGE_TAG_PATTERN = re.compile(r"<ov_genai_image_(\d+)>")

ImageTokens = Callable[[int, int], int]
"""(height, width) -> tokens one image takes in the prompt, wrapper tokens included."""
ImageFit = Callable[[int, int], tuple[int, int]]
"""(height, width) -> the (height, width) to scale an image down to before it reaches the
pipeline: the image's own size when the model uses all of it. ValueError for an image the model
cannot take at all."""


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

    def resized(self, height: int, width: int) -> tuple[int, int]:
        """The (height, width) the pipeline scales an image to; ValueError if it cannot take it."""
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
        return resized_h, resized_w

    def __call__(self, height: int, width: int) -> int:
        resized_h, resized_w = self.resized(height, width)
        factor = self.patch_size * self.merge_size
        # <|vision_start|> + one <|image_pad|> per merged patch + <|vision_end|>
        return (resized_h // factor) * (resized_w // factor) + 2

    def fit(self, height: int, width: int) -> tuple[int, int]:
        """The pipeline's own size when it scales the image down, else the image's size.

        Only a size the pipeline keeps as it is (a fixed point of its rule) is used: the same
        tokens then reach the model. Some elongated images are not one (the rule's product can
        exceed max_pixels, and a second pass would shrink a side to 0): those go as they are.
        """
        target = self.resized(height, width)
        if target[0] <= height and target[1] <= width and self.resized(*target) == target:
            return target
        return height, width


@dataclass(frozen=True)
class _ShortestEdge:
    """LLaVA (1.5): the shorter side is scaled to `edge`, then a centre square is cropped."""

    edge: int

    def fit(self, height: int, width: int) -> tuple[int, int]:
        short = min(height, width)
        if short <= self.edge:
            return height, width
        return max(self.edge, round(height * self.edge / short)), max(self.edge, round(width * self.edge / short))


@dataclass(frozen=True)
class _FixedSize:
    """Gemma 3: every image is stretched to `height` x `width`, whatever its aspect ratio."""

    height: int
    width: int

    def fit(self, height: int, width: int) -> tuple[int, int]:
        # Each side on its own: the pipeline stretches it to its size anyway, so no detail it
        # would see is lost, and an elongated image is not blurred along its short side.
        return min(height, self.height), min(width, self.width)


def image_tokens(model_dir: Path) -> ImageTokens | None:
    """How many prompt tokens an image takes with this model; None for families not known here."""
    family, processor = _processor(model_dir)
    return _qwen_grid(processor) if family in _QWEN_VL else None


def image_fit(model_dir: Path) -> ImageFit | None:
    """How far an image may be scaled down before it reaches this model's pipeline, without
    changing what the model sees beyond the pipeline's own resampling; None for families not
    known here (their images go as they are)."""
    family, processor = _processor(model_dir)
    size = processor.get("size")
    if family in _QWEN_VL:
        return _qwen_grid(processor).fit
    if family == "llava":
        # OpenVINO GenAI's defaults (ProcessorConfig) when the folder does not say.
        edge = size.get("shortest_edge", 336) if isinstance(size, dict) else size or 336
        return _ShortestEdge(edge=int(edge)).fit
    if family == "gemma3" and not processor.get("do_pan_and_scan"):
        height, width = (size.get("height", 896), size.get("width", 896)) if isinstance(size, dict) else (896, 896)
        return _FixedSize(height=int(height), width=int(width)).fit
    return None


_QWEN_VL = ("qwen2_vl", "qwen2_5_vl")


def _processor(model_dir: Path) -> tuple[str | None, dict]:
    """The model's family (config.json `model_type`) and its image processor's settings."""
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, {}
    try:
        processor = json.loads((model_dir / "preprocessor_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        processor = {}
    return config.get("model_type"), processor if isinstance(processor, dict) else {}


def _qwen_grid(processor: dict) -> _QwenVLGrid:
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
