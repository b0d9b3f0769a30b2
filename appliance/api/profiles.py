"""Dialect profiles: what the HTTP edge knows of each API dialect, declared once beside its router.

The gate (`gate`), the exception handlers (`errors`) and the OpenAPI document (`openapi`) read
these declarations and name no dialect:

- `DialectProfile`: one dialect's error shape (`render_error`, and the structs of its error bodies
  for the document), the headers its clients send their API key in, the other headers they send
  (allowed by CORS), the headers its answers carry the request id in. A dialect attaches its
  profile to its routes with `profile.router(...)`; a route of no declared dialect answers as
  `DEFAULT_PROFILE`: the appliance's own envelope, which is OpenAI's.
- `Operation`: what one route handler takes and answers, declared in its `opt`
  (`opt={OPERATION: Operation(...)}`): the request body's struct and the media types the route
  accepts (the gate refuses any other, see `csrf`), the answer's struct or stream, its error
  statuses.
- `Dialects`: an app's routes indexed by path, giving the profile and the operation that serve a
  request, before routing (the gate) and after it (the error handlers, a 404 included).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import msgspec
from litestar import Router
from litestar.handlers import HTTPRouteHandler
from litestar.routes import BaseRoute, HTTPRoute, WebSocketRoute
from litestar.types import ControllerRouterHandler
from litestar.utils.path import normalize_path

from appliance.api.csrf import JSON
from appliance.api.route_labels import route_pattern
from appliance.errors import ApplianceError

__all__ = [
    "DEFAULT_PROFILE",
    "DIALECT",
    "JSON",
    "OPERATION",
    "DialectProfile",
    "Dialects",
    "EdgeError",
    "ErrorResponse",
    "Operation",
    "RouteEntry",
]

DIALECT = "dialect"
"""The `opt` key of a route's `DialectProfile` (set by `DialectProfile.router`)."""
OPERATION = "operation"
"""The `opt` key of a handler's `Operation`, or of a mapping from HTTP method to `Operation`."""

ErrorRenderer = Callable[[ApplianceError, Mapping[str, Any]], object]
"""An error's body in a dialect's shape, from the error and the request's state (what its handler
learned about the request, e.g. that an `/invocations` body is a chat request)."""


class ErrorObject(msgspec.Struct):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorResponse(msgspec.Struct):
    """The appliance's error envelope (OpenAI's), as `ApplianceError.to_dict` writes it."""

    error: ErrorObject


def _appliance_envelope(error: ApplianceError, _: Mapping[str, Any]) -> object:
    return error.to_dict()


@dataclass(frozen=True, kw_only=True)
class DialectProfile:
    """How one dialect's routes answer at the edge. `credential_headers`: headers that carry an
    API key as their whole value (the gate reads `Authorization: Bearer` on every route, and
    these on every route too: a key is the client's, whichever header brought it).
    `client_headers`: other request headers its clients send, which a CORS preflight allows.
    `request_id_headers`: answer headers, beside `x-request-id`, that carry the request id.
    `credential_subprotocols`: prefixes of websocket subprotocols that carry an API key after
    them (`openai-insecure-api-key.<key>`: a browser cannot set headers on a websocket)."""

    name: str
    render_error: ErrorRenderer = _appliance_envelope
    error_bodies: tuple[type, ...] = (ErrorResponse,)
    credential_headers: tuple[str, ...] = ()
    client_headers: tuple[str, ...] = ()
    request_id_headers: tuple[str, ...] = ()
    credential_subprotocols: tuple[str, ...] = ()

    def router(self, path: str, route_handlers: Sequence[ControllerRouterHandler]) -> Router:
        """A router at `path` whose routes answer as this dialect."""
        return Router(path=path, route_handlers=list(route_handlers), opt={DIALECT: self})


DEFAULT_PROFILE = DialectProfile(name="appliance")
"""The routes of no declared dialect (OpenAI's, the Responses API, tokenize, retrieval, operations)
and paths that match no route."""


class EdgeError(ApplianceError):
    """An error the edge answers itself (a gate refusal, Litestar's own 404, 405 or 413), with its
    status and type given rather than its class's."""

    def __init__(self, status: int, message: str, type_: str, code: str | None, param: str | None = None) -> None:
        super().__init__(message, code=code, param=param)
        self.status = status
        self.type = type_


@dataclass(frozen=True, kw_only=True)
class Operation:
    """What a route handler takes and answers. `body`: the type of its request body (a struct; a
    tuple of types for any of them), accepted as `media_types` (a form's fields for
    `multipart/form-data`); `answer`: the type of a 200 answer (default: the handler's return type
    when it is a struct), sent as `answer_media_type`; `stream`: what a streamed answer holds, sent
    as `stream_media_types`; `errors`: the statuses answered with the dialect's error body;
    `statuses`: other statuses and what they mean; `optional`: top-level body fields the route
    fills in when they are left out, though the struct requires them (documented as optional, and
    free of the served models' enum); `edit`: changes to the generated document for what a struct
    cannot say (called with the schema components and the operation's document)."""

    summary: str
    body: Any = None
    media_types: tuple[str, ...] = (JSON,)
    answer: Any = None
    answer_media_type: str = JSON
    stream: str | None = None
    stream_media_types: tuple[str, ...] = ("text/event-stream",)
    errors: tuple[int, ...] = (400, 401, 404, 413, 503)
    statuses: tuple[tuple[int, str], ...] = ()
    optional: tuple[str, ...] = ()
    edit: Callable[[dict[str, Any], dict[str, Any]], None] | None = None


def operation_of(handler: HTTPRouteHandler, method: str) -> Operation:
    """The operation `handler` declares for `method`; undeclared, one named by its docstring, with
    a JSON body if any and the errors of the gate."""
    declared = handler.opt.get(OPERATION)
    if isinstance(declared, Mapping):
        declared = declared.get(method)
    if isinstance(declared, Operation):
        return declared
    summary = " ".join((handler.fn.__doc__ or handler.handler_name).split()).split(". ")[0].rstrip(".")
    return Operation(summary=summary, errors=(401,))


@dataclass(frozen=True)
class RouteEntry:
    """One route of an app: its Litestar route, its dialect and its handlers by HTTP method (none
    for a websocket route, which the gate checks by its path and dialect alone)."""

    route: HTTPRoute | WebSocketRoute
    profile: DialectProfile
    handlers: Mapping[str, HTTPRouteHandler] = field(default_factory=dict)


_STATE_KEY = "appliance.dialects"


class Dialects:
    """An app's routes by path: which dialect answers a path and which operation serves a request.

    A path that matches no route belongs to the nearest route above it (`/v1/messages/batches` to
    `/v1/messages`), so a dialect's client reads even a 404 in its own shape."""

    def __init__(self, routes: Iterable[BaseRoute] = ()) -> None:
        self.routes: list[RouteEntry] = []
        for route in routes:
            if isinstance(route, WebSocketRoute):
                found = route.route_handler.opt.get(DIALECT)
                self.routes.append(RouteEntry(route, found if isinstance(found, DialectProfile) else DEFAULT_PROFILE))
                continue
            if not isinstance(route, HTTPRoute):
                continue
            handlers = {method: handler for handler in route.route_handlers for method in handler.http_methods}
            profiles = [handler.opt.get(DIALECT) for handler in route.route_handlers]
            profile = next((found for found in profiles if isinstance(found, DialectProfile)), DEFAULT_PROFILE)
            self.routes.append(RouteEntry(route, profile, handlers))
        self._static = {entry.route.path_format: entry for entry in self.routes if not entry.route.path_parameters}
        self._patterned = [(route_pattern(entry.route), entry) for entry in self.routes if entry.route.path_parameters]
        # Longest first: the nearest route above a path is the longest fixed prefix it starts with.
        prefixes = [(entry.route.path_format.split("{")[0].rstrip("/"), entry) for entry in self.routes]
        self._prefixes = sorted(((p, e) for p, e in prefixes if p), key=lambda item: -len(item[0]))

    @classmethod
    def of(cls, app: object) -> Dialects:
        """The index of `app`'s routes (a Litestar app's, kept in its state once built; none for
        another ASGI app)."""
        state = getattr(app, "state", None)
        if state is None:
            return cls(getattr(app, "routes", ()))
        found = state.get(_STATE_KEY)
        if found is None:
            found = state[_STATE_KEY] = cls(app.routes)  # type: ignore[attr-defined]
        return found

    def _route(self, path: str) -> RouteEntry | None:
        found = self._static.get(path)
        if found is None:
            found = next((entry for pattern, entry in self._patterned if pattern.fullmatch(path)), None)
        return found

    def profile(self, path: str) -> DialectProfile:
        """The dialect that answers requests for `path` (as the client sent it)."""
        path = normalize_path(path)
        found = self._route(path)
        if found is None:
            found = next((entry for prefix, entry in self._prefixes if path.startswith(prefix + "/")), None)
        return found.profile if found is not None else DEFAULT_PROFILE

    def media_types(self, path: str, method: str) -> tuple[str, ...]:
        """The request body types the route of `path` takes for `method` (JSON when no route does)."""
        found = self._route(normalize_path(path))
        handler = found.handlers.get(method) if found is not None else None
        return operation_of(handler, method).media_types if handler is not None else (JSON,)

    @cached_property
    def credential_headers(self) -> tuple[str, ...]:
        """Every header a dialect of the app reads an API key from, besides `Authorization`."""
        return _union(entry.profile.credential_headers for entry in self.routes)

    @cached_property
    def credential_subprotocols(self) -> tuple[str, ...]:
        """Every websocket subprotocol prefix a dialect of the app reads an API key from."""
        return tuple(dict.fromkeys(p for entry in self.routes for p in entry.profile.credential_subprotocols))

    @cached_property
    def client_headers(self) -> tuple[str, ...]:
        """Every other header the app's dialects' clients send."""
        return _union(entry.profile.client_headers for entry in self.routes)


def _union(groups: Iterable[tuple[str, ...]]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(name.lower() for group in groups for name in group))
