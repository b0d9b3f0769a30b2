"""The gate's forgery checks (appliance/api/csrf.py): JSON bodies only, Origin checked on
state-changing requests, listed origins allowed."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from appliance.api.app import create_app
from appliance.api.csrf import json_media_type, same_origin
from appliance.api.gate import Gate
from appliance.runtime.registry import ModelRegistry


@pytest.mark.parametrize(
    ("content_type", "accepted"),
    [
        ("application/json", True),
        ("Application/JSON; charset=UTF-8", True),
        ('application/json;charset="utf-8"', True),
        ("application/vnd.elasticsearch+json; compatible-with=8", True),
        ("application/problem+json", True),
        ("application/json; charset=latin-1", False),
        ("text/plain", False),
        ("text/json", False),
        ("application/x-www-form-urlencoded", False),
        ("multipart/form-data; boundary=x", False),
        ("application/jsonp", False),
        ("", False),
    ],
)
def test_json_media_types(content_type: str, accepted: bool) -> None:
    assert json_media_type(content_type) is accepted


@pytest.mark.parametrize(
    ("origin", "host", "same"),
    [
        ("http://box:8000", "box:8000", True),
        ("http://BOX:8000", "box:8000", True),
        ("https://box.example", "box.example", True),
        ("https://box.example:443", "box.example", True),
        ("http://box.example", "box.example:80", True),
        ("http://[::1]:8000", "[::1]:8000", True),
        ("http://box:8001", "box:8000", False),
        ("http://box", "box:8000", False),
        ("https://box.example", "box.example:80", False),
        ("http://evil.example:8000", "box:8000", False),
        ("null", "box:8000", False),
        ("file://", "box:8000", False),
        ("http://box:99999", "box:8000", False),
        ("http://box:8000", "", False),
    ],
)
def test_same_origin(origin: str, host: str, same: bool) -> None:
    assert same_origin(origin, host) is same


def test_listed_origins_may_post_and_others_may_not() -> None:
    app = create_app(ModelRegistry([]), start_engines=False)
    # The test client is no loopback address: an admin key lets its reloads through the gate.
    with TestClient(Gate(app, cors_origins=["https://app.example.com"], admin_keys=["admin"])) as client:

        def reload(**headers: str) -> int:
            headers = {"Host": "box:8000", "Authorization": "Bearer admin", **headers}
            return client.post("/admin/reload", headers=headers).status_code

        # 404: no reloader in this app, so the request passed the gate.
        assert reload() == 404
        assert reload(Origin="https://app.example.com") == 404
        assert reload(Origin="http://box:8000") == 404
        assert reload(Origin="https://evil.example") == 403
        assert reload(**{"Content-Type": "text/plain"}) == 415
        # Reading is not forgery: CORS decides whether the page may see the answer.
        assert client.get("/health/live", headers={"Origin": "https://evil.example"}).status_code == 200
