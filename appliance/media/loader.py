"""`ImageLoader`: the media package behind one object, for the service layer (its `audio`: the
audio decoder).

`source(url)` is synchronous and cheap (parsing and policy checks only): call it for every image of
a request before spending anything on any of them. `load(source, ...)` then reads the bytes
(download, file or base64) and decodes them, scaled down to the size the model uses, in worker
threads, so the event loop keeps serving; decoding is limited to a few images at a time, as it is
CPU-bound (and a 4096x4096 image takes 48 MB while it is decoded).
"""

from __future__ import annotations

import asyncio
import functools
import os
from typing import TYPE_CHECKING

import httpx

from appliance.media.decode import DecodedImage, Detail, Fit, decode_base64, decode_image
from appliance.media.fetch import Fetcher, Resolver, system_resolver
from appliance.media.local import read_local
from appliance.media.policy import MediaPolicy
from appliance.media.sources import DataImage, ImageSource, LocalImage, RemoteImage, parse_source

if TYPE_CHECKING:
    from appliance.media.audio import AudioDecoder

__all__ = ["ImageLoader"]


class ImageLoader:
    """Turns `image_url` strings into decoded images under a `MediaPolicy`; close with `aclose()`."""

    def __init__(
        self,
        policy: MediaPolicy | None = None,
        *,
        resolver: Resolver = system_resolver,
        transport: httpx.AsyncBaseTransport | None = None,
        decode_slots: int | None = None,
    ) -> None:
        self.policy = policy or MediaPolicy()
        # No HTTP client at all when URLs are disabled (the default).
        self._fetcher = (
            Fetcher(self.policy, resolver=resolver, transport=transport) if self.policy.urls_enabled else None
        )
        self._decode_slots = asyncio.Semaphore(decode_slots or os.cpu_count() or 1)

    @functools.cached_property
    def audio(self) -> AudioDecoder:
        """The decoder of audio uploads and of chat's `input_audio` parts (PyAV, imported on first
        use), a few files at a time."""
        from appliance.media.audio import AudioDecoder

        return AudioDecoder()

    async def aclose(self) -> None:
        if self._fetcher is not None:
            await self._fetcher.aclose()

    def source(self, url: str) -> ImageSource:
        """Where `url` points, if the policy allows it; InvalidRequest otherwise. No I/O."""
        return parse_source(url, self.policy)

    async def load(
        self, source: ImageSource, *, max_pixels: int, detail: Detail = "auto", fit: Fit | None = None
    ) -> DecodedImage:
        """The decoded image, scaled down by `fit` (see `decode_image`); InvalidRequest if it cannot
        be read or is not a valid image in limits."""
        if isinstance(source, RemoteImage):
            assert self._fetcher is not None, "parse_source refuses URLs when they are disabled"
            data = await self._fetcher.fetch(source.url)
        elif isinstance(source, LocalImage):
            data = await asyncio.to_thread(read_local, source, self.policy)
        else:
            assert isinstance(source, DataImage)
            data = None
        async with self._decode_slots:
            return await asyncio.to_thread(self._decode, source, data, max_pixels, detail, fit)

    def _decode(
        self, source: ImageSource, data: bytes | None, max_pixels: int, detail: Detail, fit: Fit | None
    ) -> DecodedImage:
        if data is None:
            assert isinstance(source, DataImage)
            data = decode_base64(source.payload, self.policy.max_image_bytes)
        return decode_image(data, max_pixels=max_pixels, detail=detail, fit=fit)
