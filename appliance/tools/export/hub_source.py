"""Where `appliance export SOURCE` reads a model from: a local folder, or the Hugging Face hub.

Checked before optimum-cli runs, because on an edge box with no route to the hub optimum fails
after retries with a traceback that never says "offline". A hub id is exported when the hub
answers, or when the model is already in the local Hugging Face cache (then with HF_HUB_OFFLINE=1,
so nothing tries the network); otherwise the error says how to bring a local folder instead.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["SourceError", "hub_environment"]

_CONNECT_TIMEOUT = 5.0
_TRUE = ("1", "on", "yes", "true")


class SourceError(Exception):
    """SOURCE is neither a local folder nor a hub model this machine can reach or has cached."""


def hub_environment(source: str) -> dict[str, str]:
    """Extra environment for optimum-cli exporting `source`; SourceError when it cannot be read."""
    if Path(source).exists():
        return {}
    if source.startswith((".", "/", "~")) or source.count("/") > 1:
        raise SourceError(f"{source}: no such folder (a hub id is ORG/NAME, a local folder must exist)")
    offline = _offline_reason()
    if offline is None:
        return {}
    if _cached(source):
        return {"HF_HUB_OFFLINE": "1"}
    name = source.rsplit("/", 1)[-1]
    raise SourceError(
        f"{source}: this machine is offline ({offline}) and the model is not in the local Hugging Face "
        f"cache. Export from a local folder instead: on a connected machine run `hf download {source} "
        f"--local-dir {name}` (or `git clone https://huggingface.co/{source}`), copy the folder here, then "
        f"`appliance export ./{name} --name {name}`"
    )


def _offline_reason() -> str | None:
    """Why the hub cannot be reached (HF_HUB_OFFLINE set, or no connection), or None."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in _TRUE:
        return "HF_HUB_OFFLINE is set"
    endpoint = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT):
            return None
    except OSError as exc:
        return f"cannot connect to {host}:{port}: {exc.strerror or type(exc).__name__}"


def _cached(source: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # a serve-only install has no export tools at all
        return False
    return isinstance(try_to_load_from_cache(source, "config.json"), str)
