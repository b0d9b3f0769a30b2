"""`ImageLoader`: the media package behind one object, for the service layer (its `audio`: the
audio decoder).

`source(url)` is synchronous and cheap (parsing and policy checks only): call it for every image of
a request before spending anything on any of them. `load(source, ...)` then reads the bytes
(download, file or base64) and decodes them, scaled down to the size the model uses, on the image
pool (`work_pool.WorkPool`, threads of its own), so the event loop keeps serving; a few images at a
time, as decoding is CPU-bound (and a 4096x4096 image takes 48 MB while it is decoded). Audio
uploads decode on a pool of their own (`audio`), speech answers encode on another (`encoding`).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import httpx

from appliance.media.decode import DecodedImage, Detail, Fit, decode_base64, decode_image
from appliance.media.fetch import Fetcher, Resolver, system_resolver
from appliance.media.local import read_local
from appliance.media.policy import MediaPolicy
from appliance.media.sources import DataImage, ImageSource, LocalImage, RemoteImage, parse_source
from appliance.media.work_pool import WorkPool

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
        self.images = WorkPool("image", decode_slots)
        """Reading local files, undoing a download's content coding, decoding and scaling images."""
        # No HTTP client at all when URLs are disabled (the default).
        self._fetcher = (
            Fetcher(self.policy, self.images, resolver=resolver, transport=transport)
            if self.policy.urls_enabled
            else None
        )

    @functools.cached_property
    def audio(self) -> AudioDecoder:
        """The decoder of audio uploads and of chat's `input_audio` parts (PyAV, imported on first
        use), a few files at a time."""
        from appliance.media.audio import AudioDecoder

        return AudioDecoder()

    @functools.cached_property
    def encoding(self) -> WorkPool:
        """Where speech answers are encoded (mp3, opus, aac, flac: tens of milliseconds a second of
        audio), one at a time per CPU."""
        return WorkPool("encode")

    def pools(self) -> tuple[WorkPool, ...]:
        """Every pool of blocking work the media take (for the metrics)."""
        return (self.images, self.audio.pool, self.encoding)

    async def aclose(self) -> None:
        """Close the HTTP client and let the pools' threads end with their work."""
        if self._fetcher is not None:
            await self._fetcher.aclose()
        self.images.close()
        if "audio" in self.__dict__:  # the cached properties, created on first use
            self.audio.pool.close()
        if "encoding" in self.__dict__:
            self.encoding.close()

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
            data = await self.images.call(read_local, source, self.policy)
        else:
            assert isinstance(source, DataImage)
            data = None
        return await self.images.call(self._decode, source, data, max_pixels, detail, fit)

    def _decode(
        self, source: ImageSource, data: bytes | None, max_pixels: int, detail: Detail, fit: Fit | None
    ) -> DecodedImage:
        if data is None:
            assert isinstance(source, DataImage)
            data = decode_base64(source.payload, self.policy.max_image_bytes)
        return decode_image(data, max_pixels=max_pixels, detail=detail, fit=fit)
