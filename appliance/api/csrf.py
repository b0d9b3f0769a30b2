"""Cross-site request forgery: what a web page the user visits must not be able to make the
appliance do.

A browser lets any page send a "simple" cross-origin POST (Content-Type `text/plain`,
`application/x-www-form-urlencoded` or `multipart/form-data`, or none) without asking the server
first; CORS only stops the page from reading the answer. Without API keys such a POST could
generate on the user's behalf or call `/admin/reload`. So the gate refuses, on requests that
change state (every method but GET, HEAD and OPTIONS):

- a browser `Origin` that is neither the server's own (scheme-default ports filled in, compared
  with the Host header) nor listed in `cors_allowed_origins`: 403;
- a body type other than JSON (`application/json`, `application/*+json`, with or without a
  UTF-8 charset; no Content-Type at all is read as JSON, as FastAPI does, since browsers send an
  Origin with every such request): 415.
"""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["SAFE_METHODS", "json_media_type", "same_origin"]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def json_media_type(content_type: str) -> bool:
    """Whether a Content-Type header value names JSON in UTF-8 (`application/json`,
    `application/vnd.elasticsearch+json; compatible-with=8`, `application/json; charset=UTF-8`)."""
    media_type, *parameters = (part.strip().lower() for part in content_type.split(";"))
    kind, _, subtype = media_type.partition("/")
    if kind != "application" or not (subtype == "json" or subtype.endswith("+json")):
        return False
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip() == "charset" and value.strip().strip('"') not in ("utf-8", "utf8"):
            return False
    return True


def same_origin(origin: str, host: str) -> bool:
    """Whether `origin` (scheme://host[:port]) is the server's own, as the Host header names it."""
    try:
        parts = urlsplit(origin)
        origin_port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
        own = urlsplit(f"{parts.scheme}://{host}")
        own_port = own.port or _DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return False
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname or not own.hostname:
        return False
    return parts.hostname == own.hostname and origin_port == own_port
