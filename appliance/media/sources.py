"""Where an `image_url` points: a data URL, an http(s) URL or a local file; the cheap checks.

`parse_source` runs before any fetch, file access or decoding: it refuses what the policy forbids
(schemes, hosts, paths outside the allowed directory, oversized data URLs) with a 400, so a request
the server will refuse costs nothing more than parsing. The checks that need the network or the
file system (DNS answers, symlinks) run again where the bytes are read (`fetch`, `local`).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import httpx

from appliance.errors import InvalidRequest
from appliance.media.addresses import parse_address, refusal_reason
from appliance.media.policy import MediaPolicy

__all__ = [
    "DataImage",
    "ImageSource",
    "LocalImage",
    "RemoteImage",
    "SUPPORTED_MEDIA_TYPES",
    "check_remote_url",
    "parse_source",
]

# Media types a data URL may declare. The bytes decide the actual format (clients often label a
# PNG as image/jpeg); these only keep out what is certainly not a supported image.
SUPPORTED_MEDIA_TYPES = frozenset(
    {
        "image/png",
        "image/jpeg",
        "image/jpg",
        "image/pjpeg",
        "image/webp",
        "image/gif",
        "image/bmp",
        "image/x-bmp",
        "image/x-ms-bmp",
        "image/tiff",
        "image/tif",
    }
)
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


@dataclass(frozen=True)
class DataImage:
    """A base64 `data:` URL; `payload` is still base64 text (decoded later, off the event loop)."""

    media_type: str
    payload: str


@dataclass(frozen=True)
class RemoteImage:
    """An http(s) URL whose scheme and host the policy allows."""

    url: str


@dataclass(frozen=True)
class LocalImage:
    """An absolute, normalised path lexically inside the allowed directory (symlinks unchecked)."""

    path: Path


ImageSource = DataImage | RemoteImage | LocalImage


def _refuse(message: str, code: str = "invalid_image_url") -> InvalidRequest:
    return InvalidRequest(message, code=code)


def parse_source(url: str, policy: MediaPolicy) -> ImageSource:
    """Classify `url` and apply every check that needs neither network nor file system."""
    head = url[:8].lower()
    if head.startswith("data:"):
        return _data_image(url, policy)
    if head.startswith(("http://", "https://")):
        if not policy.urls_enabled:
            raise _refuse(
                "Image URLs are not enabled on this server (see --allowed-media-domains); send the "
                "image as a base64 data URL instead."
            )
        return RemoteImage(url=str(check_remote_url(url, policy)))
    if head.startswith("file:"):
        return _local_image(_file_url_path(url), policy)
    if url.startswith("/"):
        return _local_image(url, policy)
    scheme = _SCHEME.match(url)
    if scheme:
        raise _refuse(
            f"Image URL scheme '{scheme.group(1)}:' is not supported; use a data URL, http(s) or a local path."
        )
    raise _refuse("Image URL is neither a data URL, an http(s) URL nor an absolute local path.")


# -- data URLs ----------------------------------------------------------------------------------


def _data_image(url: str, policy: MediaPolicy) -> DataImage:
    header, comma, payload = url[5:].partition(",")
    if not comma:
        raise _refuse("Image data URL has no ',' before its data.")
    media_type, *parameters = [part.strip().lower() for part in header.split(";")]
    if "base64" not in parameters:
        raise _refuse("Image data URL must be base64 encoded ('data:image/png;base64,...').")
    if media_type not in SUPPORTED_MEDIA_TYPES:
        kind = "is not a supported image type" if media_type.startswith("image/") else "is not an image type"
        raise _refuse(
            f"Image data URL type '{media_type or '(none)'}' {kind}; send PNG, JPEG, WebP, GIF, BMP or TIFF.",
            code="invalid_image_format",
        )
    # Refused before base64 decoding: the decoded size is ~3/4 of the text (some slack for the
    # line breaks MIME encoders insert); decoding checks the exact size.
    if len(payload) > math.ceil(policy.max_image_bytes / 3) * 4 * 1.05 + 16:
        raise _refuse(
            f"Image data URL is larger than this server accepts ({policy.max_image_bytes} bytes "
            "per image, see --max-image-bytes).",
            code="image_too_large",
        )
    return DataImage(media_type=media_type, payload=payload)


# -- http(s) URLs -------------------------------------------------------------------------------


def check_remote_url(url: str | httpx.URL, policy: MediaPolicy) -> httpx.URL:
    """The parsed URL if its scheme, form and host pass the policy (every redirect hop too).

    A host given as an IP literal is checked against the address rules here, before any
    connection; names are checked after resolution, in `fetch`.
    """
    try:
        parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as exc:
        raise _refuse(f"Image URL is not a valid URL: {exc}") from None
    if parsed.scheme not in ("http", "https"):
        raise _refuse(f"Image URL scheme '{parsed.scheme}:' is not allowed for downloads; use http or https.")
    if parsed.userinfo:
        raise _refuse("Image URLs with credentials (user:password@host) are not accepted.")
    host = host_of(parsed)
    if not host:
        raise _refuse("Image URL has no host.")
    if not policy.host_allowed(host):
        raise _refuse(f"Image URL host '{host}' is not in this server's allowed media domains.")
    address = parse_address(host)
    if address is not None:
        reason = refusal_reason(address, policy.allowed_networks)
        if reason is not None:
            raise _refuse(f"Image URL host {host} is {reason}; fetching from it is not allowed.")
    return parsed


def host_of(url: httpx.URL) -> str:
    """The URL's host in lower-case ASCII (IDNA for international names, no IPv6 brackets)."""
    return url.raw_host.decode("ascii").lower().rstrip(".")


# -- local files --------------------------------------------------------------------------------


def _file_url_path(url: str) -> str:
    rest = url[5:]
    if not rest.startswith("//"):
        raise _refuse("A file URL must look like file:///absolute/path.")
    authority, slash, path = rest[2:].partition("/")
    if authority not in ("", "localhost"):
        raise _refuse("A file URL may not name a host; use file:///absolute/path.")
    if "?" in path or "#" in path:
        raise _refuse("A file URL may not carry a query or fragment.")
    # Percent-decoded before the checks below, so %2e%2e is seen as the '..' it stands for.
    try:
        return unquote(slash + path, errors="strict")
    except UnicodeDecodeError:
        raise _refuse("A file URL's percent-escapes must encode UTF-8.") from None


def _local_image(path: str, policy: MediaPolicy) -> LocalImage:
    if policy.local_root is None or policy.local_root_real is None:
        raise _refuse(
            "Local image paths are not enabled on this server (see --allowed-local-media-path); "
            "send the image as a base64 data URL instead."
        )
    if "\x00" in path:
        raise _refuse("Image path contains a NUL byte.")
    if not path.startswith("/"):
        raise _refuse("Image path must be absolute.")
    if ".." in path.split("/"):
        raise _refuse("Image path may not contain '..'.")
    normalised = Path(os.path.normpath(path))
    # Path components, not string prefixes: /srv/media-evil is not inside /srv/media.
    if not (normalised.is_relative_to(policy.local_root) or normalised.is_relative_to(policy.local_root_real)):
        raise _refuse("Image path is not inside this server's allowed media directory.")
    return LocalImage(path=normalised)
