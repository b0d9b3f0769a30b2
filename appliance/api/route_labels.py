"""Metric route labels: the template of the route a request is for, never its raw path.

A request the router matched is labelled with the template Litestar records in the scope
(`/v1/models/{model_id}`, `/predictions/{model}`). Requests that never reach a handler (refused by
the gate for their API key or Host, a CORS preflight, a method the route does not allow) get the
template their path matches among the app's routes; a path no route matches is `other`, so a
scanner probing random paths cannot create unbounded label values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from litestar.routes import BaseRoute

__all__ = ["OTHER", "RouteLabels", "route_pattern"]

OTHER = "other"


class RouteLabels:
    """Labels requests (by their ASGI scope) with the template of their route."""

    def __init__(self, routes: Iterable[BaseRoute] = ()) -> None:
        self._patterns = [(route.path_format, route_pattern(route)) for route in routes]

    def __call__(self, scope: Mapping[str, Any]) -> str:
        template = scope.get("path_template")
        if template:
            return str(template)
        path = scope["path"]
        return next((template for template, pattern in self._patterns if pattern.fullmatch(path)), OTHER)


def route_pattern(route: BaseRoute) -> re.Pattern[str]:
    """The paths `route` matches, as a regular expression (for `fullmatch`)."""
    parts = []
    for component in route.path_components:
        if isinstance(component, str):
            parts.append(re.escape(component))
        else:
            # A `:path` parameter spans segments (`/v1/models/org/name`); the others, one segment.
            parts.append(".+" if component.type is Path else "[^/]+")
    return re.compile("/" + "/".join(parts))
