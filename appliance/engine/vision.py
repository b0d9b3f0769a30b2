"""Vision-language graphs: the image tags in prompts.

OpenVINO GenAI places the images of a request where the prompt holds `<ov_genai_image_N>` (N
counts the request's images from 0) and SILENTLY DROPS images that have no tag, so the chat service
writes exactly one tag per image part, numbered across the whole conversation, and the engine
checks the rendered prompt holds each tag once, in order, before the request reaches the pipeline.

A prompt's token count includes the tokens its images expand to, which the pipeline only reports
once a request has finished. For the Qwen2-VL family the count is computed beforehand
(`graphfiles.vision.image_tokens`), so the context-length check stays exact; for other VLM
families images count as 0 tokens in that check and usage reports the pipeline's exact count. How
far an image may be scaled down before it reaches the pipeline is the model's `image_fit`, read
from its folder with its other facts (`graphfiles.vision`). Pure Python: the service imports the
tag helpers from here.
"""

from __future__ import annotations

import re

__all__ = ["IMAGE_TAG_PATTERN", "PIPELINE_TAG_PATTERN", "check_image_tags", "image_tag"]

PIPELINE_TAG_PATTERN = re.compile(r"<ov_genai_(?:image|video)_\d+>")
"""Anything the pipeline would read as an image or video placement tag."""
IMAGE_TAG_PATTERN = re.compile(r"<ov_genai_image_(\d+)>")


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
