"""Ollama's API under /api, and `GET /` / `HEAD /` as Ollama's clients probe a server.

The routes live by concern: `ollama_chat_routes` (`/api/chat`, `/api/generate`, `keep_alive`),
`ollama_embed_routes` (`/api/embed`, `/api/embeddings`), `ollama_model_routes` (`/api/tags`,
`/api/show`, `/api/ps`, `/api/version`, `/api/pull`, and the refused model management), with
`ollama_lines` their NDJSON framing. This module gathers them into routers under one profile
(`PROFILE`), which gives every error on them, the gate's and Litestar's included, in Ollama's
shape (`{"error": "..."}`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from litestar import Request, Response, Router, get, head
from litestar.response import Redirect

from appliance.api import ollama_chat_routes, ollama_embed_routes, ollama_model_routes
from appliance.api.profiles import OPERATION, DialectProfile, Operation
from appliance.dialects.ollama.errors import error_body
from appliance.errors import ApplianceError
from appliance.protocol.ollama import OllamaError

__all__ = ["PROFILE", "routers"]

_PROBE = "Ollama is running"


def _root(page: str | None) -> list[Any]:
    @get(
        "/",
        cache=False,
        opt={
            OPERATION: Operation(
                summary="Ollama's probe: 'Ollama is running' (a browser is sent to the playground)",
                answer_media_type="text/plain",
                errors=(401,),
                statuses=((302, "a browser (Accept: text/html) is sent to the playground"),),
            )
        },
    )
    async def root(request: Request) -> Response:
        if page is not None and "text/html" in request.headers.get("accept", ""):
            return Redirect(path=page, status_code=302)
        return Response(_PROBE, media_type="text/plain")

    @head("/", cache=False)
    async def probe() -> None:
        """Ollama's heartbeat (`ollama` CLI): 200, no body."""

    return [root, probe]


def _error_body(exc: ApplianceError, _: Mapping[str, Any]) -> OllamaError:
    return error_body(exc)


PROFILE = DialectProfile(name="ollama", render_error=_error_body, error_bodies=(OllamaError,))
"""Ollama's API at the edge: its error shape; its clients send the key as `Authorization: Bearer`."""

_HANDLERS = [*ollama_chat_routes.HANDLERS, *ollama_embed_routes.HANDLERS, *ollama_model_routes.HANDLERS]


def routers(page: str | None) -> list[Router]:
    """Ollama's routes under /api, and `/` (a browser sent to the playground at `page`, if served)."""
    return [PROFILE.router("/api", _HANDLERS), PROFILE.router("/", _root(page))]
