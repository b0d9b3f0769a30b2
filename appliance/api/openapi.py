"""The OpenAPI document, generated from the app's routes.

Every route handler is an operation (but those left out with `include_in_schema=False`: the
playground's files): its path and path parameters from the route, its query parameters from the
handler's signature, what it takes and answers from the `profiles.Operation` it declares, its
errors in its dialect's shapes (`DialectProfile.error_bodies`), tagged with its dialect's name.
Handlers decode raw bodies with msgspec (strict, unknown fields refused), so Litestar cannot infer
their schemas; msgspec can: the structs are the schema. Served at `GET /openapi.json`; the test
suite checks that every route is in it and fuzzes the server against it with schemathesis.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec
from litestar import Request, get
from litestar.handlers import HTTPRouteHandler

from appliance import __version__
from appliance.api.profiles import DEFAULT_PROFILE, Dialects, Operation, RouteEntry, operation_of
from appliance.runtime.registry import ModelRegistry

__all__ = ["hosted_tools_accepted", "openapi_document", "routes"]

_REF = "#/components/schemas/{name}"
_ERRORS = {
    400: "invalid request",
    401: "missing or wrong API key",
    403: "not allowed from this client",
    404: "unknown model or resource",
    413: "body too large",
    503: "model not ready or overloaded",
}
# Handler parameters that are neither path nor query parameters (Litestar's reserved names).
_NOT_QUERY = frozenset({"request", "state", "scope", "headers", "cookies", "query", "body", "data", "socket"})


def _documented(handler: HTTPRouteHandler, method: str) -> bool:
    return handler.include_in_schema is not False and method not in ("OPTIONS", "HEAD")


def _operations(dialects: Dialects) -> list[tuple[RouteEntry, str, HTTPRouteHandler, Operation]]:
    return [
        (entry, method, handler, operation_of(handler, method))
        for entry in dialects.routes
        for method, handler in sorted(entry.handlers.items())
        if _documented(handler, method)
    ]


def _types(declared: Any) -> tuple[Any, ...]:
    """A declared body or answer type (a tuple for any of several) as a tuple of types."""
    return declared if isinstance(declared, tuple) else () if declared is None else (declared,)


def _answer(handler: HTTPRouteHandler, operation: Operation) -> Any:
    """The declared answer type, else the handler's return type when it is a struct."""
    if operation.answer is not None:
        return operation.answer
    returned = handler.parsed_fn_signature.return_type.annotation
    return returned if isinstance(returned, type) and issubclass(returned, msgspec.Struct) else None


class _Schemas:
    """The schemas of the types the operations name, as components referenced by name."""

    def __init__(self, types: list[Any]) -> None:
        unique = list(dict.fromkeys(types))
        schemas, self.components = msgspec.json.schema_components(unique, ref_template=_REF)
        self._of = dict(zip(unique, schemas, strict=True))

    def of(self, declared: Any) -> dict[str, Any]:
        """The schema of a declared type, or of any of a tuple of them."""
        options = [dict(self._of[kind]) for kind in _types(declared)]
        return options[0] if len(options) == 1 else {"anyOf": options}

    def body(self, operation: Operation) -> dict[str, Any]:
        """The schema of an operation's body: a struct's, or a copy with `operation.optional` not
        required (named `<Struct>-<field>-optional`)."""
        schema = self.of(operation.body)
        for option in schema.get("anyOf", [schema]):
            name = option.get("$ref", "").rpartition("/")[2]
            required = self.components.get(name, {}).get("required", [])
            if not set(operation.optional) & set(required):
                continue
            variant = "-".join([name, *operation.optional, "optional"])
            original = self.components[name]
            self.components[variant] = {
                **original,
                "title": variant,
                "properties": dict(original["properties"]),  # the served models' enum stays the struct's
                "required": [field for field in required if field not in operation.optional],
            }
            option["$ref"] = _REF.format(name=variant)
        return schema

    def name_models(self, body: Any, model_names: tuple[str, ...]) -> None:
        """A body's `model` field as the enum of the served models."""
        for kind in _types(body):
            properties = self.components.get(getattr(kind, "__name__", ""), {}).get("properties", {})
            if "model" in properties:
                properties["model"] = {"type": "string", "enum": list(model_names)}


def _parameters(entry: RouteEntry, handler: HTTPRouteHandler) -> list[dict[str, Any]]:
    """The route's path parameters, and the handler's other arguments that are no dependency: its
    query parameters."""
    path = entry.route.path_parameters
    found = [
        {"name": name, "in": "path", "required": True, "schema": msgspec.json.schema(_path_type(kind.type))}
        for name, kind in path.items()
    ]
    dependencies = handler.resolve_dependencies()
    for name, parameter in handler.parsed_fn_signature.parameters.items():
        if name in path or name in dependencies or name in _NOT_QUERY:
            continue
        schema = msgspec.json.schema(parameter.annotation)
        # A query string has no null: an optional parameter is one that may be left out.
        options = [option for option in schema.get("anyOf", [schema]) if option != {"type": "null"}]
        schema = options[0] if len(options) == 1 else {"anyOf": options}
        found.append({"name": name, "in": "query", "required": not parameter.has_default, "schema": schema})
    return found


def _path_type(kind: Any) -> Any:
    return str if kind is Path else kind  # a `:path` parameter spans segments: a string


def _stream(description: str) -> dict[str, Any]:
    """A streamed answer's events (or lines), as schemathesis reads them: each event's data a JSON
    value (the last maybe the literal [DONE])."""
    return {
        "type": "object",
        "description": description,
        "properties": {"data": {"type": "string", "contentMediaType": "application/json"}},
        "required": ["data"],
    }


def _operation(entry: RouteEntry, handler: HTTPRouteHandler, operation: Operation, schemas: _Schemas) -> dict[str, Any]:
    answer = _answer(handler, operation)
    content: dict[str, Any] = {}
    if answer is not None or operation.stream is None:
        content[operation.answer_media_type] = {"schema": schemas.of(answer)} if answer is not None else {}
    for media_type in operation.stream_media_types if operation.stream else ():
        content[media_type] = {"schema": _stream(operation.stream)}
    error = {"application/json": {"schema": schemas.of(entry.profile.error_bodies)}}
    document: dict[str, Any] = {
        "summary": operation.summary,
        "tags": [entry.profile.name],
        "responses": {
            "200": {
                "description": "the stream when `stream` is true" if operation.stream else "OK",
                "content": content,
            },
            **{str(status): {"description": _ERRORS[status], "content": error} for status in operation.errors},
            **{str(status): {"description": meaning} for status, meaning in operation.statuses},
        },
    }
    if parameters := _parameters(entry, handler):
        document["parameters"] = parameters
    if any(parameter["in"] == "query" for parameter in parameters) and 400 not in operation.errors:
        # A query parameter's value is checked: a wrong one is a 400.
        document["responses"]["400"] = {"description": _ERRORS[400], "content": error}
    if operation.body is not None:
        body = schemas.body(operation)
        document["requestBody"] = {
            "required": True,
            "content": {kind: {"schema": body} for kind in operation.media_types},
        }
    return document


@lru_cache(maxsize=4)
def hosted_tools_accepted(
    structs: tuple[str, ...], schema_types: tuple[str, ...]
) -> Callable[[dict[str, Any], dict[str, Any]], None]:
    """An `Operation.edit` for routes whose `tools` also take hosted tools (`dialects.hosted_tools`:
    taken out before decoding, so the structs do not declare them): each struct's `tools` items may
    also be an object whose `type` is none of `schema_types` (the types the structs declare)."""
    hosted = {
        "type": "object",
        "required": ["type"],
        "properties": {"type": {"type": "string", "not": {"enum": list(schema_types)}}},
        "description": "A hosted tool: not offered to the model; the x-dropped-tools header names it.",
    }

    def edit(components: dict[str, Any], _: dict[str, Any]) -> None:
        for name in structs:
            for variant in components[name]["properties"]["tools"].get("anyOf", []):
                items = variant.get("items")
                if items is not None and items.get("x-hosted") is None:  # once for every route
                    variant["items"] = {"anyOf": [items, hosted], "x-hosted": True}

    return edit


def openapi_document(dialects: Dialects, model_names: tuple[str, ...] = ()) -> dict[str, Any]:
    """The document of `dialects`' routes; with `model_names`, `model` fields of the request bodies
    list the served models as an enum."""
    operations = _operations(dialects)
    types = [
        kind
        for entry, _, handler, operation in operations
        for declared in (operation.body, _answer(handler, operation), entry.profile.error_bodies)
        for kind in _types(declared)
    ]
    schemas = _Schemas(types)
    paths: dict[str, Any] = {}
    for entry, method, handler, operation in operations:
        document = _operation(entry, handler, operation, schemas)
        if operation.edit is not None:
            operation.edit(schemas.components, document)
        paths.setdefault(entry.route.path_format, {})[method.lower()] = document
    if model_names:  # after the bodies' copies (`_Schemas.body`), which keep any model name
        for *_, operation in operations:
            schemas.name_models(operation.body, model_names)
    others = sorted({entry.profile.name for entry in dialects.routes if entry.handlers} - {DEFAULT_PROFILE.name})
    # OpenAPI 3 describes no websockets: they are named here (their events: docs/speech.md).
    sockets = sorted(entry.route.path_format for entry in dialects.routes if not entry.handlers)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "appliance",
            "version": __version__,
            "description": "OpenAI-compatible API of the OpenVINO GenAI appliance, and the other dialects "
            f"it serves (tags): {', '.join(others)}"
            + (f". Websocket routes (not described here): {', '.join(sockets)}" if sockets else ""),
        },
        "paths": dict(sorted(paths.items())),
        "components": {"schemas": schemas.components},
    }


@get("/openapi.json", cache=False)
async def openapi_json(request: Request, models: ModelRegistry) -> dict[str, Any]:
    """This OpenAPI document."""
    return openapi_document(Dialects.of(request.app), tuple(models.names()))


routes = [openapi_json]
