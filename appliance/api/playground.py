"""The chat playground: the static page in `appliance/playground/` at `/playground` (setting
`playground = false` turns it off); a browser's visit to `/` is sent there (`ollama_routes`, whose
probe `/` is).

The files are read once from the installed package and served from memory with a strict
Content-Security-Policy: scripts, styles and requests only from this origin, images also from
`data:` and `blob:` URLs (attached pictures), no inline script or style, no framing. The page calls
the API like any client (same origin, so the gate's Origin check passes; a Bearer key when keys are
set), so the page itself is open (`PUBLIC_PATHS`): it holds nothing but these files.
"""

from __future__ import annotations

from importlib.resources import files

from litestar import Request, Response, get
from litestar.handlers import HTTPRouteHandler

__all__ = ["CONTENT_SECURITY_POLICY", "PAGE", "PUBLIC_PATHS", "routes"]

PAGE = "/playground"
# Litestar adds "; charset=utf-8" to text types.
_FILES = {
    PAGE: ("index.html", "text/html"),
    f"{PAGE}/app.js": ("app.js", "text/javascript"),
    f"{PAGE}/markdown.js": ("markdown.js", "text/javascript"),
    f"{PAGE}/style.css": ("style.css", "text/css"),
}
PUBLIC_PATHS = ("/", *_FILES)

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data: blob:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    # Revalidated on every load, so an upgraded appliance never runs an old app.js.
    "Cache-Control": "no-cache",
}


def routes() -> list[HTTPRouteHandler]:
    """The playground's route handlers, its files read now from the installed package."""
    package = files("appliance.playground")
    contents = {path: (package.joinpath(name).read_bytes(), media_type) for path, (name, media_type) in _FILES.items()}

    @get(list(contents), include_in_schema=False, cache=False)
    async def playground_file(request: Request) -> Response[bytes]:
        body, media_type = contents[request.scope["path"]]
        return Response(body, media_type=media_type, headers=_HEADERS)

    return [playground_file]
