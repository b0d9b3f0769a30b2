"""Cross-site request forgery: what a web page the user visits must not be able to make the
appliance do.

A browser lets any page send a "simple" cross-origin POST (Content-Type `text/plain`,
`application/x-www-form-urlencoded` or `multipart/form-data`, or none) without asking the server
first; CORS only stops the page from reading the answer. Without API keys such a POST could
generate on the user's behalf or call `/admin/reload`. So the gate refuses, on requests that
change state (every method but GET, HEAD and OPTIONS):

- a browser `Origin` that is neither the server's own (scheme-default ports filled in, compared
  with the Host header) nor listed in `cors_allowed_origins`: 403 (`null`, the Origin of sandboxed
  frames, `file:` pages and some redirects, is nobody's own);
- a body type the route does not take: 415. A route takes JSON (`application/json`,
  `application/*+json`, with or without a UTF-8 charset) unless its `profiles.Operation` lists
  other media types; no Content-Type at all is read as the route's own (as FastAPI does), since
  browsers send an Origin with every such request.

On a JSON route the 415 alone stops every forged POST: a page can send JSON cross-site only after
a CORS preflight, which an unlisted origin fails. A route that takes `multipart/form-data` (an
upload, as OpenAI's audio routes are) can be sent from any page by a plain `<form>`, so there the
Origin check is the whole defence: browsers in use send an Origin with every cross-origin POST,
forms included (Firefox since version 70, 2019; Chromium and Safari for longer: an older browser
that sends none passes, the residual risk), and a page cannot forge the header. Nor can a form set
`Authorization` or `x-api-key`, so with API keys set a forged form is refused whatever the
browser. `text/plain` and `application/x-www-form-urlencoded` stay 415 wherever a route does not
list them.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

__all__ = ["JSON", "SAFE_METHODS", "accepted_media_type", "json_media_type", "same_origin"]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
JSON = "application/json"
"""JSON bodies, as `json_media_type` reads them (`+json` types and a UTF-8 charset too)."""


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


def accepted_media_type(content_type: str, accepted: Sequence[str]) -> bool:
    """Whether a Content-Type header value names one of the `accepted` media types: JSON
    (`application/json`) as `json_media_type` reads it, any other by its type alone, whatever its
    parameters (`multipart/form-data; boundary=...`)."""
    media_type = content_type.split(";")[0].strip().lower()
    return any(json_media_type(content_type) if kind == JSON else media_type == kind for kind in accepted)


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
