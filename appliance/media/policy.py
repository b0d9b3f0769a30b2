"""`MediaPolicy`: where images may come from and how much of them the server will take.

Built once at start-up from the server settings by `build_policy`, which fails with a
`ConfigError` naming the setting. Everything is off by default: without
`--allowed-media-domains` no URL is fetched, without `--allowed-local-media-path` no file is read;
base64 data URLs always work.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from appliance.errors import ConfigError
from appliance.media.addresses import IPNetwork, parse_address

__all__ = ["DEFAULT_FETCH_TIMEOUT_S", "DEFAULT_MAX_IMAGE_BYTES", "MAX_REDIRECTS", "MediaPolicy", "build_policy"]

DEFAULT_MAX_IMAGE_BYTES = 20 * 1024 * 1024
DEFAULT_FETCH_TIMEOUT_S = 10.0
MAX_REDIRECTS = 3


@dataclass(frozen=True)
class MediaPolicy:
    """The server's image-source settings, validated."""

    allowed_domains: tuple[str, ...] = ()
    """Lower-case ASCII host names or IP literals; `*.example.com` (any subdomain); `*` (any host)."""
    allowed_networks: tuple[IPNetwork, ...] = ()
    """Non-public networks fetches may still connect to (e.g. 10.0.0.0/8 for an intranet server)."""
    local_root: Path | None = None
    """The directory local image paths must lie in, as configured (absolute, normalised)."""
    local_root_real: Path | None = None
    """The same directory with symlinks resolved."""
    max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES
    """Largest encoded image: a download, a file, or a data URL's decoded payload."""
    fetch_timeout: float = DEFAULT_FETCH_TIMEOUT_S
    """Whole download, from DNS to the last byte, redirects included."""
    max_redirects: int = MAX_REDIRECTS

    @property
    def urls_enabled(self) -> bool:
        return bool(self.allowed_domains)

    def host_allowed(self, host: str) -> bool:
        """Whether the (lower-case ASCII) host matches `allowed_domains`; says nothing on addresses."""
        host = host.rstrip(".")
        for pattern in self.allowed_domains:
            if pattern == "*" or host == pattern:
                return True
            # `*.example.com` matches `a.example.com` and `a.b.example.com`, not `example.com`.
            if pattern.startswith("*.") and host.endswith(pattern[1:]) and parse_address(host) is None:
                return True
        return False


def build_policy(
    *,
    allowed_domains: Iterable[str] = (),
    allowed_networks: Iterable[str] = (),
    allowed_local_media_path: str = "",
    max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
    fetch_timeout: float = DEFAULT_FETCH_TIMEOUT_S,
) -> MediaPolicy:
    """Validate the media settings; raises ConfigError naming the setting and the bad value."""
    domains = tuple(_domain_pattern(entry) for entry in allowed_domains if entry.strip())
    networks = tuple(_network(entry) for entry in allowed_networks if entry.strip())
    root = root_real = None
    if allowed_local_media_path:
        root = Path(os.path.normpath(allowed_local_media_path))
        if not root.is_absolute():
            raise ConfigError(f"allowed_local_media_path: {allowed_local_media_path!r} must be an absolute path")
        if not root.is_dir():
            raise ConfigError(f"allowed_local_media_path: {allowed_local_media_path!r} is not a directory")
        root_real = Path(os.path.realpath(root))
    if max_image_bytes < 1:
        raise ConfigError(f"max_image_bytes: must be at least 1, not {max_image_bytes}")
    if not fetch_timeout > 0:
        raise ConfigError(f"media_fetch_timeout: must be above 0 seconds, not {fetch_timeout}")
    return MediaPolicy(
        allowed_domains=domains,
        allowed_networks=networks,
        local_root=root,
        local_root_real=root_real,
        max_image_bytes=max_image_bytes,
        fetch_timeout=fetch_timeout,
    )


def _domain_pattern(entry: str) -> str:
    text = entry.strip().lower().rstrip(".")
    if text == "*":
        return text
    address = parse_address(text)
    if address is not None:
        return str(address)
    name = text[2:] if text.startswith("*.") else text
    try:
        ascii_name = name.encode("idna").decode("ascii")
    except UnicodeError:
        ascii_name = ""
    labels = ascii_name.split(".")
    if not ascii_name or not all(label and all(c.isalnum() or c == "-" for c in label) for label in labels):
        raise ConfigError(
            f"allowed_media_domains: {entry!r} is not a host name, an IP address, '*.domain' or '*' "
            "(no scheme, port or path)"
        )
    return ("*." if text.startswith("*.") else "") + ascii_name


def _network(entry: str) -> IPNetwork:
    try:
        return ipaddress.ip_network(entry.strip(), strict=False)
    except ValueError:
        raise ConfigError(
            f"allowed_media_networks: {entry!r} is not an IP network (e.g. 10.0.0.0/8, 127.0.0.1/32, fd00::/8)"
        ) from None
