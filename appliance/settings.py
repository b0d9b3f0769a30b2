"""Server settings: a TOML file, environment variables and command-line flags.

Precedence, highest first: flags > `APPLIANCE_<NAME>` environment variables > the settings file
(`--config FILE`, or `/etc/appliance/appliance.toml` when it exists) > defaults. Unknown keys in
the file are errors naming the file and the key. See docs/commands.md ("Settings").
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Mapping
from difflib import get_close_matches
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from appliance.errors import ConfigError, validation_path
from appliance.memory_budget import parse_memory_budget

__all__ = [
    "DEFAULT_CONFIG",
    "ENV_PREFIX",
    "MAX_DRAIN_SECONDS",
    "Settings",
    "comma_list",
    "exposure_warning",
    "key_file",
    "load_settings",
    "resolve_settings",
    "state_directory",
]

DEFAULT_CONFIG = Path("/etc/appliance/appliance.toml")
ENV_PREFIX = "APPLIANCE_"
_GIB = 1 << 30
MAX_DRAIN_SECONDS = 3600.0
"""The longest drain (on SIGTERM, or `POST /admin/models/NAME/unload`): finite, so a drain ends."""


def _about(description: str, metavar: str | None = None, **constraints: Any) -> msgspec.Meta:
    """A field's description (the `serve --help` text) and the placeholder its flag shows."""
    return msgspec.Meta(description=description, extra={"metavar": metavar} if metavar else None, **constraints)


class Settings(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Everything `appliance serve` can be told (field names = TOML keys = flag names with `_`).

    The flags are generated from these fields (appliance/commands/serve.py): a description is the
    flag's help, its default is appended, and a description says what an empty default means.
    """

    graphs: Annotated[str, _about("directory of graph files, one *.toml per model (or a single graph file)", "DIR")] = (
        "graphs"
    )
    host: Annotated[str, _about("address to listen on, 0.0.0.0 for every interface")] = "127.0.0.1"
    port: Annotated[int, _about("port to listen on", ge=0, le=65535)] = 8000
    max_body_size: Annotated[
        int, _about("largest request body accepted; larger ones get 413", "BYTES", ge=1024, le=_GIB * 4)
    ] = 32 * 1024 * 1024
    log_level: Annotated[Literal["debug", "info", "warning", "error"], _about("how much the server logs")] = "info"
    log_format: Annotated[
        Literal["text", "json"],
        _about("text lines for a terminal, or one JSON object per line (journald, jq), uvicorn's included"),
    ] = "text"
    header_timeout: Annotated[
        float,
        _about(
            "seconds a client has to send a request's line and headers, counted from the connection "
            "(or the previous response); then 408 and the connection closes",
            "S",
            gt=0,
            le=86_400,
        ),
    ] = 10.0
    body_timeout: Annotated[
        float,
        _about(
            "seconds a request body may pause; the whole body must also arrive within this plus one "
            "second per 64 KiB, or the connection closes",
            "S",
            gt=0,
            le=86_400,
        ),
    ] = 30.0
    write_timeout: Annotated[
        float,
        _about(
            "seconds an answer may wait for a client that takes none of it (the server's write buffer "
            "full); it must also take all it was sent within this plus one second per 64 KiB, or the "
            "connection is dropped and its generation cancelled",
            "S",
            gt=0,
            le=86_400,
        ),
    ] = 30.0
    max_connections: Annotated[
        int,
        _about(
            "open client connections at most; more get 503 and are closed at once (lowered to fit "
            "the open-file limit, keeping 256 descriptors for the models)",
            ge=1,
            le=1_000_000,
        ),
    ] = 1000
    websocket_connections: Annotated[
        int,
        _about("websocket connections (Realtime API sessions) open at once, in all; more get 503", ge=1, le=100_000),
    ] = 32
    websocket_connections_per_key: Annotated[
        int,
        _about(
            "websocket connections open at once per API key (per client address without keys); more get 503",
            ge=1,
            le=100_000,
        ),
    ] = 8
    realtime_idle_seconds: Annotated[
        float,
        _about("a Realtime session with no client event for this long is closed", "S", gt=0, le=86_400),
    ] = 300.0
    realtime_buffer_seconds: Annotated[
        float,
        _about(
            "Realtime API: input audio a session may hold uncommitted (a longer turn is committed "
            "where it reaches this under server VAD; refused with manual commits)",
            "S",
            ge=1,
            le=3600,
        ),
    ] = 120.0
    max_stored_responses: Annotated[
        int,
        _about(
            "Responses API: stored responses kept at most (64 MiB of them, each for an hour); when "
            "full, the oldest of the API key holding the largest share goes first",
            ge=0,
            le=1_000_000,
        ),
    ] = 1024
    state_dir: Annotated[
        str,
        _about(
            "directory of the appliance's own state: its SQLite store (appliance.db, with its write-ahead "
            "log), created at the first start; default: $STATE_DIRECTORY when systemd provides it "
            "(StateDirectory=), else $XDG_STATE_HOME/appliance or ~/.local/state/appliance",
            "DIR",
        ),
    ] = ""
    store_url: Annotated[
        str,
        _about(
            "keep stored responses, files and batches in this PostgreSQL database instead of the SQLite "
            "file in state_dir (postgresql://user:password@host:5432/name); servers given one URL share "
            "them; default: SQLite",
            "URL",
        ),
    ] = ""
    max_file_bytes: Annotated[
        int,
        _about(
            "/v1/files: the largest file an upload may hold (its request is bounded by max_body_size too)",
            "BYTES",
            ge=1,
            le=_GIB * 4,
        ),
    ] = 32 * 1024 * 1024
    max_file_lines: Annotated[
        int, _about("/v1/files: lines of one uploaded file, at most (a batch's requests)", "N", ge=1, le=10_000_000)
    ] = 50_000
    max_stored_file_bytes: Annotated[
        int,
        _about(
            "/v1/files: the bytes one API key's uploaded files may hold together (a batch's output and "
            "error files not counted)",
            "BYTES",
            ge=1,
            le=_GIB * 1024,
        ),
    ] = _GIB
    max_loaded_models: Annotated[
        int,
        _about(
            "at most this many engines loaded at once (0: no limit), engines retiring after a reload "
            "counted until gone; a request for a model that does not fit waits in a fair queue while "
            "a loaded one is unloaded between its requests (load_queue_size, min_resident_seconds, "
            "the graph's load_timeout_seconds)",
            "N",
            ge=0,
            le=10_000,
        ),
    ] = 0
    load_queue_size: Annotated[
        int,
        _about(
            "under max_loaded_models, models that may wait for room to load, at most (the requests for "
            "one model share its place); a request for one more gets 503 with Retry-After at once",
            "N",
            ge=1,
            le=10_000,
        ),
    ] = 8
    min_resident_seconds: Annotated[
        float,
        _about(
            "under max_loaded_models, how long a model stays loaded before it may be unloaded to make "
            "room for a waiting one, so two models cannot take turns at every request",
            "S",
            ge=0,
            le=3600,
        ),
    ] = 10.0
    batch_lines_per_model: Annotated[
        int,
        _about(
            "/v1/batches: a batch's lines run at once on one model, at most, in the capacity live "
            "requests leave (each line is one more sequence in the engine's steps)",
            "N",
            ge=1,
            le=256,
        ),
    ] = 2
    batch_grace_seconds: Annotated[
        float,
        _about(
            "/v1/batches: how long a model must have had no live request in flight before batch lines "
            "start on it again (a person's next request close behind meets no batch prefill)",
            "S",
            ge=0,
            le=3600,
        ),
    ] = 0.5
    memory_budget: Annotated[
        str,
        _about(
            "memory the loaded models may hold together: a size (12GiB, 800MB, plain bytes) or a share "
            "of the box's memory (80%: of the cgroup limit under systemd or a container, else MemTotal); "
            "each engine counts the larger of its graph's estimated footprint and its measured RSS, and a "
            "load that would not fit waits in the same fair queue as for max_loaded_models while idle "
            "models are unloaded; a graph whose estimate alone exceeds it is refused; default: no budget",
            "SIZE",
        ),
    ] = ""
    server_cpus: Annotated[
        str,
        _about(
            "CPUs the server's own threads (HTTP, JSON, SSE) run on: auto, the last CPU it may use "
            "(when it may use two or more), so its work per token is not done in place of an engine's "
            "stepping thread; all: not pinned; or a list such as 3 or 6-7. Engines and image decoding "
            "always get every CPU",
            "CPUS",
        ),
    ] = "auto"
    drain_seconds: Annotated[
        float,
        _about("on SIGTERM, how long in-flight requests may take to finish", "S", ge=0, le=MAX_DRAIN_SECONDS),
    ] = 30.0
    shutdown_delay_seconds: Annotated[
        float,
        _about(
            "on SIGTERM, how long /health answers 503 (draining) while requests are still accepted, "
            "before the listener closes and the drain starts: time for a load balancer or Kubernetes "
            "to stop sending; 0: close at once",
            "S",
            ge=0,
            le=3600,
        ),
    ] = 0.0
    api_key_file: Annotated[
        str,
        _about(
            "require 'Authorization: Bearer <key>' with a key from FILE (one per line, # comments); "
            "default: $CREDENTIALS_DIRECTORY/api-keys when systemd provides it, else no keys",
            "FILE",
        ),
    ] = ""
    admin_key_file: Annotated[
        str,
        _about(
            "admin keys (one per line): /admin/* routes then need 'Authorization: Bearer <admin key>' from any "
            "client, and API keys no longer open them; default: $CREDENTIALS_DIRECTORY/admin-keys when systemd "
            "provides it, else no admin keys and /admin/* answers loopback clients only",
            "FILE",
        ),
    ] = ""
    model_cache_dir: Annotated[
        str,
        _about(
            "OpenVINO compiled-model cache (CACHE_DIR) for graphs that set none: later starts skip the "
            "compile, which takes minutes for large models on GPU/NPU; default: none",
            "DIR",
        ),
    ] = ""
    metrics_open: Annotated[
        bool, _about("serve /metrics without an API key (for a Prometheus scraper on a trusted network)")
    ] = False
    allowed_hosts: Annotated[
        tuple[str, ...],
        _about(
            "Host header values accepted (name, name:port, *.domain); others get 400, which stops "
            "DNS-rebinding attacks from browsers; default: any Host",
            "H,H",
        ),
    ] = ()
    cors_allowed_origins: Annotated[
        tuple[str, ...],
        _about(
            "browser origins allowed to call the API cross-origin (e.g. https://app.example.com); "
            "default: none, no CORS headers, so browsers block cross-origin calls, and a POST from "
            "a page of another origin gets 403",
            "ORIGIN,ORIGIN",
        ),
    ] = ()
    allowed_media_domains: Annotated[
        tuple[str, ...],
        _about(
            "hosts chat images may be downloaded from: example.com, *.example.com (subdomains), an IP "
            "address, or * (any host); default: none, image URLs refused (base64 data URLs always work)",
            "HOSTS",
        ),
    ] = ()
    allowed_media_networks: Annotated[
        tuple[str, ...],
        _about(
            "non-public networks image downloads may still connect to, e.g. 10.0.0.0/8 or 127.0.0.1/32 "
            "(private, loopback, link-local, CGNAT, multicast and reserved addresses are refused "
            "otherwise); default: none",
            "CIDRS",
        ),
    ] = ()
    allowed_local_media_path: Annotated[
        str,
        _about(
            "directory chat images may be read from as absolute paths or file:// URLs (symlinks must "
            "stay inside); default: none, local paths refused",
            "DIR",
        ),
    ] = ""
    max_image_bytes: Annotated[
        int, _about("largest encoded image: a download, a file or a data URL's decoded payload", "BYTES", ge=1, le=_GIB)
    ] = 20 * 1024 * 1024
    media_fetch_timeout: Annotated[
        float, _about("seconds one image download may take, DNS to last byte, redirects included", "S", gt=0, le=3600)
    ] = 10.0
    invocations_model: Annotated[
        str,
        _about("the model POST /invocations (LMI/SageMaker) generates with; default: the only model served", "NAME"),
    ] = ""
    lmi_output_formatter: Annotated[
        Literal["jsonlines", "sse"],
        _about("how /invocations streams: JSON Lines (LMI's default) or server-sent events"),
    ] = "jsonlines"
    tgi_compat: Annotated[
        bool, _about("TGI-compatible /invocations: answers are JSON arrays and streams are server-sent events")
    ] = False
    disable_playground: Annotated[
        bool, _about("do not serve the chat playground page at /playground (nor redirect / to it)")
    ] = False


def key_file(configured: str, credential: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The key file a setting names, else systemd's credential `credential` when it exists, else None."""
    if configured:
        return configured
    directory = (os.environ if environ is None else environ).get("CREDENTIALS_DIRECTORY")
    candidate = Path(directory) / credential if directory else None
    return str(candidate) if candidate is not None and candidate.is_file() else None


def state_directory(configured: str, environ: Mapping[str, str] | None = None) -> Path:
    """The state directory `state_dir` names, else systemd's $STATE_DIRECTORY (its first entry),
    else $XDG_STATE_HOME/appliance, else ~/.local/state/appliance."""
    environ = os.environ if environ is None else environ
    if configured:
        return Path(configured)
    if environ.get("STATE_DIRECTORY"):
        return Path(environ["STATE_DIRECTORY"].split(":")[0])
    base = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "appliance"


def exposure_warning(settings: Settings, *, has_api_keys: bool) -> str | None:
    """The start-up warning for a server any client on the network can use, or None."""
    if has_api_keys or _loopback_host(settings.host):
        return None
    return (
        f"listening on {settings.host}:{settings.port} WITHOUT API KEYS: anyone who can reach this port can "
        "generate on every model, read /stats and /metrics; set api_key_file (or the systemd credential "
        "api-keys), or listen on 127.0.0.1 behind a proxy (docs/operations.md, Security)"
    )


def _loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in Settings.__struct_fields__:
        raw = environ.get(ENV_PREFIX + name.upper())
        if raw is None:
            continue
        default = getattr(Settings(), name)
        # Lists come comma-separated; scalars are converted leniently ("8000" -> 8000, "true" -> True).
        values[name] = comma_list(raw) if isinstance(default, list | tuple) else raw
    return values


def comma_list(text: str) -> list[str]:
    """`a, b,,c` -> ["a", "b", "c"]: how list settings are written in flags and the environment."""
    return [item.strip() for item in text.split(",") if item.strip()]


def load_settings(
    flags: Mapping[str, Any],
    *,
    config: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Merge defaults, the settings file, the environment and the flags given (None = not given)."""
    return resolve_settings(flags, config=config, environ=environ)[0]


def resolve_settings(
    flags: Mapping[str, Any],
    *,
    config: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[Settings, dict[str, str]]:
    """`load_settings`, and where each value came from: `default`, `file PATH`,
    `environment APPLIANCE_NAME` or `flag --name`. An `APPLIANCE_*` variable that names no setting
    is a ConfigError (a misspelt one would otherwise be ignored without a word)."""
    environ = os.environ if environ is None else environ
    _check_env_names(environ)
    path = config or (DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None)
    merged: dict[str, Any] = {}
    sources = dict.fromkeys(Settings.__struct_fields__, "default")
    if path is not None:
        try:
            merged.update(tomllib.loads(path.read_text(encoding="utf-8")))
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read settings file: {exc.strerror}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
        _check(merged, str(path))
        sources.update(dict.fromkeys(merged, f"file {path}"))
    env_values = _from_env(environ)
    _check({**merged, **env_values}, "environment", strict=False)
    merged.update(env_values)
    sources.update({name: f"environment {ENV_PREFIX}{name.upper()}" for name in env_values})
    given = {name: value for name, value in flags.items() if value is not None}
    merged.update(given)
    sources.update({name: f"flag --{name.replace('_', '-')}" for name in given})
    return _check(merged, "settings", strict=False), sources


def _check_env_names(environ: Mapping[str, str]) -> None:
    known = {ENV_PREFIX + name.upper() for name in Settings.__struct_fields__}
    unknown = sorted(name for name in environ if name.startswith(ENV_PREFIX) and name not in known)
    if not unknown:
        return
    hints = [
        f"{name} (did you mean {close[0]}?)" if (close := get_close_matches(name, known, 1, 0.8)) else name
        for name in unknown
    ]
    raise ConfigError(
        f"environment: {', '.join(hints)}: no such setting; APPLIANCE_<KEY> variables name the settings "
        "of docs/commands.md (unset the variable, or fix its name)"
    )


def _check(values: dict[str, Any], where: str, *, strict: bool = True) -> Settings:
    try:
        settings = msgspec.convert(values, Settings, strict=strict)
    except msgspec.ValidationError as exc:
        reason, path = validation_path(str(exc))
        text = reason.replace("Object contains unknown field", "unknown key") + (f" (key `{path}`)" if path else "")
        raise ConfigError(f"{where}: {text}") from exc
    try:
        parse_memory_budget(settings.memory_budget)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return settings
