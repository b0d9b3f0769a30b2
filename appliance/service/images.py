"""Images in chat requests: image parts become pipeline tags, then decoded images, limits first.

While a request's messages are rendered, `ImageParts` turns each `image_url` part into the
pipeline's tag for the next image (numbered across the whole conversation, so images in earlier
turns keep their place) and refuses, before any work: images sent to a text-only graph, more images
than the graph allows, and text that spells an image tag (`<ov_genai_image_N>` or the model's own
marker tokens), which would move or break the real images. `sources()` then applies the media
policy to every URL, still without I/O; only after that, and after the engine has admitted the
request, does `load()` fetch and decode, each image scaled down to the size the model uses (its
`image_fit`, read from its folder with its graph, loaded or not), and the request's pixels summed against `max_image_pixels_per_request`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass

from appliance.engine.messages import ImageData
from appliance.engine.vision import PIPELINE_TAG_PATTERN, image_tag
from appliance.errors import InvalidRequest
from appliance.graphfiles import Graph
from appliance.media import DecodedImage, Fit, ImageLoader, ImageSource
from appliance.protocol.openai import ImageURLPart

__all__ = ["ImageParts", "check_prompt_text"]


@dataclass(frozen=True)
class _Part:
    param: str
    part: ImageURLPart


def check_prompt_text(text: str, param: str, native_tokens: tuple[str, ...] = ()) -> None:
    """Refuse text that a vision graph's pipeline would read as an image placement."""
    tag = PIPELINE_TAG_PATTERN.search(text)
    token = tag.group(0) if tag else next((token for token in native_tokens if token in text), None)
    if token is not None:
        raise InvalidRequest(
            f"Text may not contain '{token}': this model's pipeline reserves it to place images. "
            "Send images as image_url content parts.",
            param=param,
            code="invalid_content",
        )


class ImageParts:
    """The image parts of one chat request, in conversation order."""

    def __init__(self, graph: Graph, native_tokens: tuple[str, ...] = (), fit: Fit | None = None) -> None:
        """`native_tokens`: the model's own image marker tokens; `fit`: its image size rule."""
        self.graph = graph
        self.accepts_images = graph.accepts_images
        self._native_tokens = native_tokens
        self._fit = fit
        self._parts: list[_Part] = []

    def __len__(self) -> int:
        return len(self._parts)

    def check_text(self, text: str, param: str) -> str:
        """`text`, if it spells no image tag (see `check_prompt_text`)."""
        if self.accepts_images:
            check_prompt_text(text, param, self._native_tokens)
        return text

    def tag(self, part: ImageURLPart, param: str) -> str:
        """The tag standing for this image in the rendered message."""
        if not self.accepts_images:
            raise InvalidRequest(
                "This model does not accept images (it is served by a text-only graph).",
                param=param,
                code="unsupported_content",
            )
        limit = self.graph.max_images
        if len(self._parts) >= limit:
            why = " (its stateful pipeline takes one image per request)" if self.graph.stateful else ""
            raise InvalidRequest(
                f"Too many images: this model accepts at most {limit} per request{why}.",
                param=param,
                code="too_many_images",
            )
        self._parts.append(_Part(param=param, part=part))
        return image_tag(len(self._parts) - 1)

    def sources(self, media: ImageLoader) -> list[ImageSource]:
        """Every image's source under the media policy (no I/O yet); InvalidRequest naming the part."""
        sources = []
        for entry in self._parts:
            try:
                sources.append(media.source(entry.part.image_url.url))
            except InvalidRequest as exc:
                raise _located(exc, f"{entry.param}.image_url.url") from None
        return sources

    async def load(self, media: ImageLoader, sources: list[ImageSource]) -> list[ImageData]:
        """Fetch and decode every image concurrently; the first failure cancels the rest."""
        limits = self.graph.limits
        total = 0

        async def one(entry: _Part, source: ImageSource) -> DecodedImage:
            nonlocal total
            try:
                image = await media.load(
                    source, max_pixels=limits.max_image_pixels, detail=entry.part.image_url.detail, fit=self._fit
                )
            except InvalidRequest as exc:
                raise _located(exc, f"{entry.param}.image_url") from None
            # Counted as each image is ready (one event loop, no race): the first past the limit
            # cancels the others still waiting to decode.
            total += image.width * image.height
            if total > limits.max_image_pixels_per_request:
                raise InvalidRequest(
                    f"The images of this request come to more than {limits.max_image_pixels_per_request} "
                    "pixels (width x height, summed after scaling each to the size this model uses; "
                    "max_image_pixels_per_request). Send fewer or smaller images.",
                    param="messages",
                    code="too_many_image_pixels",
                )
            return image

        decoded = await _all_or_nothing([one(entry, source) for entry, source in zip(self._parts, sources)])
        return [ImageData(width=image.width, height=image.height, pixels=image.pixels) for image in decoded]


def _located(exc: InvalidRequest, param: str) -> InvalidRequest:
    exc.param = exc.param or param
    return exc


async def _all_or_nothing(work: list[Awaitable[DecodedImage]]) -> list[DecodedImage]:
    tasks = [asyncio.ensure_future(item) for item in work]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()
        # Collect the cancelled and failed ones, so none logs "exception was never retrieved".
        await asyncio.gather(*tasks, return_exceptions=True)
