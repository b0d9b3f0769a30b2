"""The chat playground's routes (issue 17): the page and its files under a strict CSP, a browser's
visit to / sent to it, the off switch, the files shipped in the wheel, and nothing in them that reaches another
origin. The page itself is driven in a real browser in tests/e2e/test_playground.py."""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest
from litestar.testing import TestClient

from appliance.api import playground
from appliance.api.app import create_app
from appliance.api.gate import Gate
from appliance.runtime.registry import ModelRegistry
from tests.fakes import FakeEngineClient

REPO = Path(__file__).resolve().parents[2]
STATIC = REPO / "appliance" / "playground"
BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
FILES = {
    "/playground": "text/html; charset=utf-8",
    "/playground/app.js": "text/javascript; charset=utf-8",
    "/playground/markdown.js": "text/javascript; charset=utf-8",
    "/playground/style.css": "text/css; charset=utf-8",
}


def client(serve_playground: bool = True, api_keys: tuple[str, ...] = ()) -> TestClient:
    app = create_app(ModelRegistry([FakeEngineClient()]), start_engines=False, serve_playground=serve_playground)
    open_paths = ("/health", "/health/live", *(playground.PUBLIC_PATHS if serve_playground else ()))
    return TestClient(Gate(app, api_keys=api_keys, open_paths=open_paths))  # type: ignore[arg-type]


@pytest.mark.parametrize("path", FILES)
def test_page_and_files_are_served_with_a_strict_policy(path: str) -> None:
    with client() as http:
        response = http.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"] == FILES[path]
    assert response.content == (STATIC / (Path(path).name if path != "/playground" else "index.html")).read_bytes()
    policy = dict(part.strip().split(" ", 1) for part in response.headers["content-security-policy"].split(";"))
    assert policy["default-src"] == "'self'"
    assert policy["script-src"] == "'self'" and policy["style-src"] == "'self'"  # no inline script or style
    assert policy["connect-src"] == "'self'"
    assert policy["img-src"] == "'self' data: blob:"
    assert policy["frame-ancestors"] == "'none'" and policy["object-src"] == "'none'"
    assert response.headers["x-content-type-options"] == "nosniff"


def test_root_sends_a_browser_to_the_page() -> None:
    with client() as http:
        response = http.get("/", headers=BROWSER, follow_redirects=False)
        probe = http.get("/", follow_redirects=False)  # Ollama's clients probe / for this text
    assert response.status_code == 302 and response.headers["location"] == "/playground"
    assert probe.status_code == 200 and probe.text == "Ollama is running"


def test_the_page_loads_without_a_key_and_the_api_still_wants_one() -> None:
    with client(api_keys=("secret",)) as http:
        assert http.get("/playground").status_code == 200
        assert http.get("/playground/app.js").status_code == 200
        assert http.get("/", headers=BROWSER, follow_redirects=False).status_code == 302
        assert http.get("/v1/models").status_code == 401
        assert http.get("/v1/models", headers={"Authorization": "Bearer secret"}).status_code == 200
        assert http.get("/playground/other.js").status_code == 401  # only the page's own files are open


def test_unknown_files_are_404() -> None:
    with client() as http:
        for path in ("/playground/other.js", "/playground/../settings.py", "/playground/__init__.py"):
            assert http.get(path).status_code == 404, path


def test_switched_off() -> None:
    with client(serve_playground=False) as http:
        for path in FILES:
            response = http.get(path, follow_redirects=False)
            assert response.status_code == 404, path
            assert response.json()["error"]["code"] == "not_found"
        # / stays Ollama's probe, for a browser too.
        assert http.get("/", headers=BROWSER, follow_redirects=False).text == "Ollama is running"
        assert http.get("/v1/models").status_code == 200


def test_no_file_reaches_another_origin() -> None:
    for file in STATIC.iterdir():
        if file.suffix not in (".html", ".js", ".css"):
            continue
        text = file.read_text(encoding="utf-8")
        assert not re.search(r"(?i)\b(?:https?|wss?|ftp)://|(?:src|href|action)\s*=\s*[\"']?//|@import", text), file
        assert not re.search(r"\burl\(", text), file  # CSS url(): fonts, images
        # Model output reaches the page only as text nodes: no HTML parsing from strings at all.
        assert not re.search(r"\.(?:inner|outer)HTML\b|insertAdjacentHTML|createContextualFragment|DOMParser", text), (
            file
        )
        assert not re.search(r"\beval\(|new Function\(|document\.write", text), file
        if file.suffix == ".html":
            assert not re.search(r"<script(?![^>]*\bsrc=)", text), "inline script"
            assert not re.search(r"<style|\sstyle=|\son\w+=", text), "inline style or handler"


def test_the_wheel_ships_every_file() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["appliance.playground"]
    shipped = [file.name for file in STATIC.iterdir() if file.is_file() and file.suffix != ".py"]
    assert {"index.html", "app.js", "markdown.js", "style.css"} <= set(shipped)
    for name in shipped:
        assert any(fnmatch(name, pattern) for pattern in patterns), name
