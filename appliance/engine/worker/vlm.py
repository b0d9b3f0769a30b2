"""Requests to a vision-language graph, in the engine process.

A VLM request goes to the pipeline as the rendered prompt STRING plus the image tensors
(`add_request(id, prompt, images, config)`; the token-ids overload cannot carry images), with
`apply_chat_template=False`: the prompt is already rendered, and that overload would otherwise
render it a second time. Text-only requests to a VLM graph take the same path with no images.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import openvino
import openvino_genai

from appliance.engine.messages import ImageData
from appliance.engine.vision import PIPELINE_TAG_PATTERN, check_image_tags
from appliance.graphfiles import Graph
from appliance.graphfiles.vision import image_tokens, native_token_ids

__all__ = ["PreparedRequest", "VisionInputError", "VisionRequests", "image_tensors"]

log = logging.getLogger("appliance.engine")


def image_tensors(images: list[ImageData]) -> list[openvino.Tensor]:
    """The images as the VLM pipelines take them: NHWC uint8 (NCHW broke Qwen2-VL for every later
    request). ov.Tensor copies the read-only frame buffer; the copy lives until the pipeline has
    encoded the image."""
    return [
        openvino.Tensor(np.frombuffer(image.pixels, dtype=np.uint8).reshape(1, image.height, image.width, 3))
        for image in images
    ]


class VisionInputError(ValueError):
    """The images of a request cannot be used with this model (a 400 for the client)."""


@dataclass
class PreparedRequest:
    prompt: str
    images: list[ImageData]
    prompt_tokens: int
    """Including image tokens when the model family's count is known (see `vision.py`)."""


class VisionRequests:
    """Counting, checking and submitting requests with images for one VLM graph."""

    def __init__(self, graph: Graph, tokenizer: openvino_genai.Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._image_tokens = image_tokens(graph.model_dir)
        self.exact_counts = self._image_tokens is not None
        self.native_tokens = [
            text
            for text in (
                tokenizer.decode([token], skip_special_tokens=False) for token in native_token_ids(graph.model_dir)
            )
            if text.strip()
        ]
        self._warned_count = False

    def prepare(self, prompt: str, images: list[ImageData]) -> PreparedRequest:
        """Check the tags of `prompt` against `images` and count its tokens; VisionInputError."""
        try:
            check_image_tags(prompt, len(images))
        except ValueError as exc:
            raise VisionInputError(str(exc)) from None
        # The service refuses these in message text; this also covers text it does not see as such
        # (tool calls and definitions, template variables) once the template has rendered it all.
        marker = next((token for token in self.native_tokens if token in prompt), None)
        if marker is not None:
            raise VisionInputError(f"the prompt spells '{marker}', which this model reserves for images")
        for image in images:
            if len(image.pixels) != image.width * image.height * 3:
                raise VisionInputError(f"image of {image.width}x{image.height} pixels has {len(image.pixels)} bytes")
        # Each tag becomes special tokens (Qwen2-VL: <|vision_start|> <|image_pad|>... <|vision_end|>),
        # so the text between tags is tokenized separately, as the pipeline does.
        segments = [segment for segment in PIPELINE_TAG_PATTERN.split(prompt) if segment]
        text_tokens = sum(
            int(self._tokenizer.encode(segment, add_special_tokens=False).input_ids.get_shape()[-1])
            for segment in segments
        )
        image_tokens = 0
        if self._image_tokens is not None:
            try:
                image_tokens = sum(self._image_tokens(image.height, image.width) for image in images)
            except ValueError as exc:
                raise VisionInputError(str(exc)) from None
        return PreparedRequest(prompt=prompt, images=images, prompt_tokens=text_tokens + image_tokens)

    def add_request(
        self,
        pipe: openvino_genai.ContinuousBatchingPipeline,
        request_id: int,
        request: PreparedRequest,
        config: openvino_genai.GenerationConfig,
    ) -> Any:
        """Submit to the pipeline (encodes the images here: tens of ms per large image). The
        config must not apply the chat template again (`RequestPreparer` sees to it)."""
        return pipe.add_request(request_id, request.prompt, image_tensors(request.images), config)

    def final_prompt_tokens(self, perf_metrics: Callable[[], Any], counted: int) -> int:
        """The pipeline's own prompt count once a request has finished (`counted` if unavailable)."""
        try:
            reported = int(perf_metrics().get_num_input_tokens())
        except Exception:  # no metrics for a request that never ran (e.g. cancelled while queued)
            return counted
        if reported != counted and self.exact_counts and not self._warned_count:
            self._warned_count = True
            log.warning("prompt token count with images: counted %d, the pipeline reports %d", counted, reported)
        return reported or counted
