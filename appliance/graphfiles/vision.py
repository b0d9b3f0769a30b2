"""A vision-language model's images as its own files describe them: how far an image may be scaled
down before it reaches the pipeline, how many prompt tokens it becomes, and the marker tokens that
place it. Standard library only: read when the graph is validated (`graphfiles.facts`), so the
server knows them before the model's engine loads.

Every pipeline scales an image to its processor's size in `add_request`, on the thread that steps
every stream, from pixels that crossed the pipe raw (a 4096x4096 image: 48 MB, for a 224x224 input
on the demo model). `image_fit` gives the size the model actually uses (Qwen2-VL: the pipeline's own
rule; LLaVA: the shorter side; Gemma 3: its fixed size), so the server scales the image there, on
a worker thread, and the pipeline's resize becomes a no-op. For the Qwen2-VL family
`image_tokens` counts an image's prompt tokens beforehand (matching the pipeline's resize rule,
checked against its reported count on the tiny demo model).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from appliance.graphfiles.model_json import json_object

__all__ = [
    "ImageFit",
    "ImageRule",
    "ImageTokens",
    "image_fit",
    "image_rule",
    "image_tokens",
    "native_token_ids",
    "native_tokens",
]

ImageTokens = Callable[[int, int], int]
"""(height, width) -> tokens one image takes in the prompt, wrapper tokens included."""
ImageFit = Callable[[int, int], tuple[int, int]]
"""(height, width) -> the (height, width) to scale an image down to before it reaches the
pipeline: the image's own size when the model uses all of it. ValueError for an image the model
cannot take at all."""


class ImageRule(Protocol):
    """A model family's image size rule (`fit` is an `ImageFit`); `str()` says it in words."""

    def fit(self, height: int, width: int) -> tuple[int, int]: ...


@dataclass(frozen=True)
class _QwenVLGrid:
    """Qwen2-VL / Qwen2.5-VL: images are resized to multiples of patch*merge pixels within
    [min_pixels, max_pixels], cut into patches, and every merge x merge patches become one token."""

    patch_size: int
    merge_size: int
    min_pixels: int
    max_pixels: int
    max_aspect_ratio: int = 200

    def __str__(self) -> str:
        return (
            f"Qwen2-VL grid of {self.patch_size * self.merge_size} pixels, "
            f"{self.min_pixels}-{self.max_pixels} pixels an image"
        )

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

    def __str__(self) -> str:
        return f"shorter side {self.edge} pixels"

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

    def __str__(self) -> str:
        return f"{self.width}x{self.height} pixels"

    def fit(self, height: int, width: int) -> tuple[int, int]:
        # Each side on its own: the pipeline stretches it to its size anyway, so no detail it
        # would see is lost, and an elongated image is not blurred along its short side.
        return min(height, self.height), min(width, self.width)


def image_tokens(model_dir: Path) -> ImageTokens | None:
    """How many prompt tokens an image takes with this model; None for families not known here."""
    family, processor = _processor(model_dir)
    try:
        return _qwen_grid(processor) if family in _QWEN_VL else None
    except (AttributeError, TypeError, ValueError):  # settings that are not numbers
        return None


def image_rule(model_dir: Path) -> ImageRule | None:
    """The size this model uses of an image (its `fit`), read from its folder; None for families
    not known here, and for settings that are not numbers (their images go as they are)."""
    try:
        return _image_rule(*_processor(model_dir))
    except (AttributeError, TypeError, ValueError):
        return None


def _image_rule(family: str | None, processor: dict) -> ImageRule | None:
    size = processor.get("size")
    if family in _QWEN_VL:
        return _qwen_grid(processor)
    if family == "llava":
        # OpenVINO GenAI's defaults (ProcessorConfig) when the folder does not say.
        edge = size.get("shortest_edge", 336) if isinstance(size, dict) else size or 336
        return _ShortestEdge(edge=int(edge))
    if family == "gemma3" and not processor.get("do_pan_and_scan"):
        height, width = (size.get("height", 896), size.get("width", 896)) if isinstance(size, dict) else (896, 896)
        return _FixedSize(height=int(height), width=int(width))
    return None


def image_fit(model_dir: Path) -> ImageFit | None:
    """How far an image may be scaled down before it reaches this model's pipeline, without
    changing what the model sees beyond the pipeline's own resampling; None for families not
    known here (their images go as they are)."""
    rule = image_rule(model_dir)
    return rule.fit if rule is not None else None


_QWEN_VL = ("qwen2_vl", "qwen2_5_vl")


def _processor(model_dir: Path) -> tuple[str | None, dict]:
    """The model's family (config.json `model_type`) and its image processor's settings."""
    family = json_object(model_dir / "config.json").get("model_type")
    return family if isinstance(family, str) else None, json_object(model_dir / "preprocessor_config.json")


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
    config = json_object(model_dir / "config.json")
    ids = [value for key, value in config.items() if _NATIVE_TOKEN_KEY.match(key) and isinstance(value, int)]
    return sorted(set(ids))


def native_tokens(model_dir: Path) -> tuple[str, ...] | None:
    """The text of the model's own image/video marker tokens (`native_token_ids`), as its
    tokenizer's files spell them (`tokenizer.json` added tokens, or `tokenizer_config.json`'s
    `added_tokens_decoder`); None when an id is in neither (the engine's tokenizer then decodes
    it once loaded)."""
    ids = native_token_ids(model_dir)
    if not ids:
        return ()
    spelled: dict[int, str] = {}
    added = json_object(model_dir / "tokenizer.json").get("added_tokens")
    for token in added if isinstance(added, list) else ():
        if isinstance(token, dict) and isinstance(token.get("id"), int) and isinstance(token.get("content"), str):
            spelled[token["id"]] = token["content"]
    decoder = json_object(model_dir / "tokenizer_config.json").get("added_tokens_decoder")
    for key, token in decoder.items() if isinstance(decoder, dict) else ():
        if key.isdigit() and isinstance(token, dict) and isinstance(token.get("content"), str):
            spelled.setdefault(int(key), token["content"])
    if any(token not in spelled for token in ids):
        return None
    # As the engine does: a marker that decodes to blank text is no marker a client could type.
    return tuple(text for text in (spelled[token] for token in ids) if text.strip())
