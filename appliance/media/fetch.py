"""Downloading an image over http(s) without becoming a proxy into the server's network (SSRF).

For every hop (the URL and each redirect, at most `MediaPolicy.max_redirects`):

1. the URL passes `check_remote_url` (scheme, no credentials, allowed host);
2. the host is resolved here, with an injectable resolver, and EVERY address it resolves to must
   be public (or inside `--allowed-media-networks`): a name resolving to both a public and a
   private address is refused;
3. the connection goes to the checked address itself, with the original name in the Host header
   and TLS SNI (and the certificate checked against that name), so a second DNS answer cannot
   redirect the connection elsewhere (DNS rebinding);
4. redirects are not followed by the HTTP client but handled here, hop by hop.

The whole download (DNS, connect, redirects, body) runs under one deadline, so a server trickling
bytes cannot hold a request forever, and the body is counted while it streams: a lying or missing
Content-Length cannot make the server read more than `max_image_bytes`. A compressed body
(`Content-Encoding: gzip` or `deflate`, sent although we ask for `identity`) is read as it came
and decompressed on a worker thread, producing at most `max_image_bytes` + 1 bytes: httpx's own
decoding ran on the event loop and stacked codings (`gzip, gzip`) turned 1.8 KB on the wire into
1 GiB before any count. Stacked and unknown codings are refused. No proxy settings from the
environment are used (a proxy would connect on our behalf to addresses we never checked), and
connections are not reused across requests (a pooled connection is keyed by address, not name).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import zlib
from collections.abc import Awaitable, Callable

import httpx

from appliance import __version__
from appliance.errors import InvalidRequest, client_text
from appliance.media.addresses import IPAddress, parse_address, refusal_reason
from appliance.media.policy import MediaPolicy
from appliance.media.sources import check_remote_url, host_of
from appliance.media.work_pool import WorkPool

__all__ = ["Fetcher", "Resolver", "system_resolver"]

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""(host, port) -> the IP addresses the host resolves to, as strings."""

log = logging.getLogger("appliance.media")

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
# zlib window bits per content coding: gzip framing; deflate is zlib-wrapped (RFC 9110), though
# some servers send it raw (tried second).
_CODINGS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


async def system_resolver(host: str, port: int) -> list[str]:
    """The operating system's answer (getaddrinfo in the loop's executor)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _refuse(message: str, code: str = "image_fetch_failed") -> InvalidRequest:
    return InvalidRequest(message, code=code)


class Fetcher:
    """Downloads images under a `MediaPolicy`; one per server, closed with `aclose()`."""

    def __init__(
        self,
        policy: MediaPolicy,
        pool: WorkPool,
        *,
        resolver: Resolver = system_resolver,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.policy = policy
        self._pool = pool
        """Where a compressed body is inflated (bounded by the byte cap, but CPU work)."""
        self._resolver = resolver
        connect = min(5.0, policy.fetch_timeout)
        self._client = httpx.AsyncClient(
            transport=transport,
            trust_env=False,
            follow_redirects=False,
            timeout=httpx.Timeout(policy.fetch_timeout, connect=connect),
            limits=httpx.Limits(max_keepalive_connections=0),
            headers={"User-Agent": f"appliance/{__version__}", "Accept": "image/*", "Accept-Encoding": "identity"},
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def fetch(self, url: str) -> bytes:
        """The body of `url` (following allowed redirects); InvalidRequest on any refusal or failure."""
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.policy.fetch_timeout):
                body = await self._follow(url)
            log.debug("fetched image %s: %d bytes in %.0f ms", url, len(body), (time.monotonic() - started) * 1000)
            return body
        except TimeoutError:
            raise _refuse(f"Fetching the image URL timed out after {self.policy.fetch_timeout:g} s.") from None

    async def _follow(self, url: str) -> bytes:
        current = httpx.URL(url)
        for _ in range(self.policy.max_redirects + 1):
            current = check_remote_url(current, self.policy)
            address = await self._checked_address(current)
            location = await self._get(current, address)
            if isinstance(location, bytes):
                return location
            try:
                current = current.join(location)
            except (httpx.InvalidURL, ValueError):
                raise _refuse("The image URL redirected to an invalid URL.") from None
        raise _refuse(f"The image URL redirected more than {self.policy.max_redirects} times.")

    async def _checked_address(self, url: httpx.URL) -> IPAddress:
        host = host_of(url)
        literal = parse_address(host)
        if literal is not None:
            return literal  # already checked by check_remote_url
        try:
            answers = await self._resolver(host, url.port or (443 if url.scheme == "https" else 80))
        except OSError as exc:
            raise _refuse(f"Image URL host '{host}' could not be resolved: {exc.strerror or exc}") from None
        addresses = [parse_address(answer) for answer in answers]
        if not addresses or None in addresses:
            raise _refuse(f"Image URL host '{host}' did not resolve to IP addresses.")
        for address in addresses:
            reason = refusal_reason(address, self.policy.allowed_networks)
            if reason is not None:
                raise _refuse(
                    f"Image URL host '{host}' resolves to {reason}; fetching from it is not allowed.",
                    code="invalid_image_url",
                )
        return addresses[0]  # type: ignore[return-value]  # None was refused above

    async def _get(self, url: httpx.URL, address: IPAddress) -> bytes | str:
        """The body, or the Location of a redirect."""
        pinned = url.copy_with(host=str(address))
        host_header = url.netloc.decode("ascii")
        extensions = {"sni_hostname": host_of(url)} if url.scheme == "https" else {}
        limit = self.policy.max_image_bytes
        try:
            async with self._client.stream(
                "GET", pinned, headers={"Host": host_header}, extensions=extensions
            ) as response:
                if response.status_code in _REDIRECTS:
                    location = response.headers.get("location")
                    if not location:
                        raise _refuse(f"The image URL answered {response.status_code} without a Location.")
                    return location
                if response.status_code != 200:
                    raise _refuse(f"The image URL answered HTTP {response.status_code}.")
                coding = _content_coding(response.headers.get_list("content-encoding", split_commas=True))
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > limit:
                    raise _too_large(limit)
                body = bytearray()
                async for chunk in response.aiter_raw():
                    body += chunk
                    if len(body) > limit:
                        raise _too_large(limit)
        except httpx.InvalidURL:
            # httpx builds a redirect's next request itself (even when not following it), and a
            # Location such as `data:image/png;base64,...` is no URL it can request.
            raise _refuse(
                "The image URL redirected to a location that is not an http(s) URL.", code="invalid_image_url"
            ) from None
        except httpx.HTTPError as exc:
            raise _refuse(f"Fetching the image URL failed: {type(exc).__name__}: {client_text(str(exc))}") from None
        if coding is None:
            return bytes(body)
        return await self._pool.call(_decompress, bytes(body), coding, limit)


def _content_coding(codings: list[str]) -> str | None:
    """The one content coding to undo (None: the body is as sent); stacked or unknown: refused."""
    applied = [coding.strip().lower() for coding in codings if coding.strip().lower() not in ("", "identity")]
    if len(applied) > 1:
        raise _refuse(
            f"The image URL answered with stacked content codings ({', '.join(applied)}); one gzip or "
            "deflate at most is accepted."
        )
    if applied and applied[0] not in _CODINGS:
        raise _refuse(
            f"The image URL answered with content coding '{applied[0][:40]}'; only gzip and deflate are accepted."
        )
    return applied[0] if applied else None


def _decompress(data: bytes, coding: str, limit: int) -> bytes:
    """`data` decompressed, refused as soon as it would exceed `limit` bytes (a worker thread's job)."""
    wbits = _CODINGS[coding]
    for attempt in (wbits, -zlib.MAX_WBITS) if coding == "deflate" else (wbits,):
        decompressor = zlib.decompressobj(attempt)
        try:
            body = decompressor.decompress(data, limit + 1)
        except zlib.error:
            continue
        if len(body) > limit or decompressor.unconsumed_tail:
            raise _too_large(limit)
        if not decompressor.eof:
            break
        return body
    raise _refuse(f"The image URL's {coding} body is damaged or truncated.")


def _too_large(limit: int) -> InvalidRequest:
    return _refuse(
        f"The image at the URL is larger than this server accepts ({limit} bytes, see --max-image-bytes).",
        code="image_too_large",
    )
