"""The real HTTP app in process on fake engines (`tests.fakes`), for fast API tests: `fake_app`,
`app_client` (Litestar's TestClient around it) and `chat` (one chat completion request)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from litestar import Litestar
from litestar.testing import TestClient

from appliance.api.app import create_app
from appliance.runtime.registry import ModelRegistry
from tests.fakes import FakeEngineClient

USER = [{"role": "user", "content": "one two three"}]


def fake_app(*engines: FakeEngineClient, on_start: Callable[[], None] | None = None, **options) -> Litestar:
    """`create_app` serving `engines`, started with the app; then `on_start` runs (to change what
    starting sets). `options` go to `create_app`."""
    app = create_app(ModelRegistry(list(engines)), **options)

    async def start_fakes(_app: Litestar) -> None:
        for engine in engines:
            engine.start()
        if on_start is not None:
            on_start()

    app.on_startup.append(start_fakes)
    return app


@contextmanager
def app_client(
    *engines: FakeEngineClient, on_start: Callable[[], None] | None = None, **options
) -> Iterator[TestClient]:
    """A TestClient on `fake_app(*engines, on_start=on_start, **options)`, the app started."""
    with TestClient(fake_app(*engines, on_start=on_start, **options)) as client:
        yield client


def chat(client: TestClient, messages: list[dict] | None = None, *, model: str = "fake", **fields):
    """POST /v1/chat/completions with `messages` (by default a user saying "one two three") and `fields`."""
    body = {"model": model, "messages": USER if messages is None else messages, **fields}
    return client.post("/v1/chat/completions", json=body)
