"""Server settings: a TOML file, environment variables and command-line flags.

Precedence, highest first: flags > `APPLIANCE_<NAME>` environment variables > the settings file
(`--config FILE`, or `/etc/appliance/appliance.toml` when it exists) > defaults. Unknown keys in
the file are errors naming the file and the key. See docs/commands.md ("Settings").
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from appliance.errors import ConfigError

__all__ = ["DEFAULT_CONFIG", "Settings", "load_settings"]

DEFAULT_CONFIG = Path("/etc/appliance/appliance.toml")
ENV_PREFIX = "APPLIANCE_"


class Settings(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Everything `appliance serve` can be told (field names = TOML keys = flag names with `_`)."""

    graphs: str = "graphs"
    """Directory of graph files."""
    host: str = "127.0.0.1"
    port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 8000
    max_body_size: Annotated[int, msgspec.Meta(ge=1024)] = 32 * 1024 * 1024
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    drain_seconds: Annotated[float, msgspec.Meta(ge=0)] = 30.0
    """On SIGTERM, how long in-flight requests may take to finish."""
    api_key_file: str = ""
    """File with API keys, one per line (# comments). Empty: $CREDENTIALS_DIRECTORY/api-keys when
    systemd provides it, else no authentication."""
    model_cache_dir: str = ""
    """OpenVINO's compiled-model cache (CACHE_DIR) for every graph that sets none: later starts skip
    the compile, which takes minutes for large models on GPU/NPU. Empty: no cache."""
    metrics_open: bool = False
    """Serve /metrics without an API key (for a Prometheus scraper on a trusted network)."""
    allowed_hosts: tuple[str, ...] = ()
    """Host header values accepted (`name` or `name:port`, `*.example.com`); others get 400, which
    stops DNS-rebinding attacks from browsers. Empty: any Host."""
    cors_allowed_origins: tuple[str, ...] = ()
    """Browser origins (e.g. `https://app.example.com`) allowed to call the API cross-origin. Empty:
    no CORS headers, so browsers block cross-origin calls."""
    allowed_media_domains: tuple[str, ...] = ()
    """Hosts chat images may be downloaded from: `example.com`, `*.example.com` (subdomains), an IP
    address, or `*` (any host). Empty: image URLs are refused (base64 data URLs always work)."""
    allowed_media_networks: tuple[str, ...] = ()
    """Non-public networks image downloads may still connect to, e.g. `10.0.0.0/8` for an intranet
    server (private, loopback, link-local, CGNAT, multicast and reserved addresses are refused)."""
    allowed_local_media_path: str = ""
    """Directory chat images may be read from as local paths or file:// URLs. Empty: refused."""
    max_image_bytes: Annotated[int, msgspec.Meta(ge=1)] = 20 * 1024 * 1024
    """Largest encoded image: a download, a file or a data URL's decoded payload."""
    media_fetch_timeout: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    """Seconds one image download may take, DNS to last byte, redirects included."""
    invocations_model: str = ""
    """The model `POST /invocations` (LMI/SageMaker) generates with. Empty: the only model served."""
    lmi_output_formatter: Literal["jsonlines", "sse"] = "jsonlines"
    """How `/invocations` streams: JSON Lines (LMI's default) or server-sent events."""
    tgi_compat: bool = False
    """TGI-compatible `/invocations`: answers are JSON arrays and streams are server-sent events."""


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in Settings.__struct_fields__:
        raw = environ.get(ENV_PREFIX + name.upper())
        if raw is None:
            continue
        default = getattr(Settings(), name)
        # Lists come comma-separated; scalars are converted leniently ("8000" -> 8000, "true" -> True).
        values[name] = [item.strip() for item in raw.split(",") if item.strip()] if isinstance(default, list | tuple) else raw
    return values


def load_settings(
    flags: Mapping[str, Any],
    *,
    config: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Merge defaults, the settings file, the environment and the flags given (None = not given)."""
    environ = os.environ if environ is None else environ
    path = config or (DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None)
    merged: dict[str, Any] = {}
    if path is not None:
        try:
            merged.update(tomllib.loads(path.read_text(encoding="utf-8")))
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read settings file: {exc.strerror}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
        _check(merged, str(path))
    env_values = _from_env(environ)
    _check({**merged, **env_values}, "environment", strict=False)
    merged.update(env_values)
    merged.update({name: value for name, value in flags.items() if value is not None})
    return _check(merged, "settings", strict=False)


def _check(values: dict[str, Any], where: str, *, strict: bool = True) -> Settings:
    try:
        return msgspec.convert(values, Settings, strict=strict)
    except msgspec.ValidationError as exc:
        text = str(exc).replace("Object contains unknown field", "unknown key").replace(" - at `$.", " (key `")
        if " (key `" in text:
            text += ")"
        raise ConfigError(f"{where}: {text}") from exc
