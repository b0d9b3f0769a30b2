"""Downloads: only servers on 127.0.0.1 are ever contacted; other names resolve, through a fake
resolver, to addresses that must be refused before any connection."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import threading
import time
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote

import httpx
import pytest

from appliance.errors import InvalidRequest
from appliance.media.fetch import Fetcher
from appliance.media.policy import build_policy
from appliance.media.work_pool import WorkPool
from tests.images import encode, image_server, noise

PNG = encode(noise(20, 10))

FAKE_DNS = {
    "images.test": ["127.0.0.1"],
    "internal.test": ["10.0.0.5"],
    "metadata.test": ["169.254.169.254"],
    "cgnat.test": ["100.64.1.1"],
    "mapped.test": ["::ffff:127.0.0.1"],
    "mixed.test": ["93.184.216.34", "192.168.0.10"],
    "loopback6.test": ["::1"],
    "mapped-ok.test": ["127.0.0.1"],
}


async def fake_resolver(host: str, port: int) -> list[str]:
    try:
        return FAKE_DNS[host]
    except KeyError:
        raise OSError(f"unknown host {host}") from None


class NoNetwork(httpx.AsyncBaseTransport):
    """A transport that fails the test if anything tries to connect."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"connected to {request.url}")


@pytest.fixture(scope="module")
def server() -> Iterator:
    with image_server({"/a.png": PNG}) as running:
        yield running


def fetch(url: str, transport: httpx.AsyncBaseTransport | None = None, **settings) -> bytes:
    policy = build_policy(
        allowed_domains=settings.pop("domains", ["127.0.0.1", "*.test"]),
        allowed_networks=settings.pop("networks", ["127.0.0.1/32"]),
        max_image_bytes=settings.pop("max_bytes", 1_000_000),
        fetch_timeout=settings.pop("timeout", 5.0),
    )

    async def run() -> bytes:
        fetcher = Fetcher(policy, WorkPool("test-fetch", 1), resolver=fake_resolver, transport=transport)
        try:
            return await fetcher.fetch(url)
        finally:
            await fetcher.aclose()

    return asyncio.run(run())


def refused(url: str, code: str = "invalid_image_url", **settings) -> str:
    with pytest.raises(InvalidRequest) as info:
        fetch(url, **settings)
    assert info.value.status == 400
    assert info.value.code == code, info.value.message
    return info.value.message


def test_fetches_from_an_allowed_server(server) -> None:
    port = server.server_port
    assert fetch(f"http://127.0.0.1:{port}/a.png") == PNG
    # A name, resolved by our resolver and connected to at the checked address, Host kept.
    assert fetch(f"http://images.test:{port}/a.png") == PNG


@pytest.mark.parametrize(
    "host", ["internal.test", "metadata.test", "cgnat.test", "mapped.test", "mixed.test", "loopback6.test"]
)
def test_names_resolving_to_non_public_addresses_are_refused_before_connecting(host: str) -> None:
    message = refused(f"http://{host}/a.png", transport=NoNetwork())
    assert "resolves to" in message and "not allowed" in message


def test_loopback_needs_the_explicit_network(server) -> None:
    message = refused(f"http://127.0.0.1:{server.server_port}/a.png", networks=[], transport=NoNetwork())
    assert "loopback" in message


def test_redirects_are_followed_and_rechecked(server) -> None:
    port = server.server_port
    assert fetch(f"http://127.0.0.1:{port}/redirect?to=/a.png") == PNG
    assert fetch(f"http://127.0.0.1:{port}/redirect?status=307&to=http://images.test:{port}/a.png") == PNG
    for target in (
        "http://internal.test/a.png",
        "http://169.254.169.254/latest/meta-data/",
        "file:///etc/passwd",
        "http://not-allowed.example/a.png",
        f"http://user:pw@images.test:{port}/a.png",
    ):
        server.hits.clear()
        refused(f"http://127.0.0.1:{port}/redirect?to={target}")
        assert len(server.hits) == 1  # only the redirecting request reached a server


def test_redirect_to_a_data_url_is_refused(server) -> None:
    """Issue 21: httpx raised InvalidURL (no HTTPError) building the redirect: it was a 500."""
    url = f"http://127.0.0.1:{server.server_port}/redirect?to={quote('data:image/png;base64,iVBORw0KGgo=')}"
    assert "not an http(s) URL" in refused(url)


def test_at_most_three_redirects(server) -> None:
    def chain(hops: int) -> str:
        url = "/a.png"
        for _ in range(hops):
            url = f"/redirect?to={quote(url, safe='')}"
        return f"http://127.0.0.1:{server.server_port}{url}"

    assert fetch(chain(3)) == PNG
    assert "redirected more than 3 times" in refused(chain(4), code="image_fetch_failed")


def test_slow_body_hits_the_deadline(server) -> None:
    started = time.monotonic()
    message = refused(f"http://127.0.0.1:{server.server_port}/slow", code="image_fetch_failed", timeout=0.5)
    assert "timed out" in message
    assert time.monotonic() - started < 2.0


def test_byte_cap_on_declared_and_streamed_bodies(server) -> None:
    port = server.server_port
    assert refused(f"http://127.0.0.1:{port}/huge-declared", code="image_too_large")
    started = time.monotonic()
    assert refused(f"http://127.0.0.1:{port}/huge-chunked", code="image_too_large", max_bytes=200_000)
    assert time.monotonic() - started < 2.0
    assert refused(f"http://127.0.0.1:{port}/a.png", code="image_too_large", max_bytes=len(PNG) - 1)
    assert fetch(f"http://127.0.0.1:{port}/a.png", max_bytes=len(PNG)) == PNG


def test_http_errors_and_unknown_hosts(server) -> None:
    assert "HTTP 404" in refused(f"http://127.0.0.1:{server.server_port}/missing.png", code="image_fetch_failed")
    assert "could not be resolved" in refused("http://nowhere.test/a.png", code="image_fetch_failed")


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, ssl.SSLContext]]:
    """An HTTPS server on 127.0.0.1 with a certificate for images.test; echoes Host and SNI."""
    # Debian's openssl is on every machine of this project's kind: its absence is a failure, not a skip.
    assert shutil.which("openssl"), "openssl is needed to make a test certificate (apt-get install openssl)"
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=images.test",
            "-addext",
            "subjectAltName=DNS:images.test",
        ],
        check=True,
        capture_output=True,
    )

    class Echo(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            body = f"host={self.headers['Host']} sni={getattr(self.connection, 'sni', None)}".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda sock, name, _: setattr(sock, "sni", name)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_port, ssl.create_default_context(cafile=str(cert))
    finally:
        server.shutdown()
        server.server_close()


def test_https_connects_to_the_checked_address_with_the_name_in_sni_and_host(tls_server) -> None:
    port, trust = tls_server
    body = fetch(f"https://images.test:{port}/x", transport=httpx.AsyncHTTPTransport(verify=trust))
    assert body == f"host=images.test:{port} sni=images.test".encode()
    # The certificate is checked against the name asked for, not the pinned address.
    message = refused(
        f"https://mapped-ok.test:{port}/x",
        code="image_fetch_failed",
        transport=httpx.AsyncHTTPTransport(verify=trust),
    )
    assert "certificate" in message.lower()


def test_one_gzip_or_deflate_coding_is_undone(server) -> None:
    port = server.server_port
    assert fetch(f"http://127.0.0.1:{port}/encoded?codings=gzip") == PNG
    assert fetch(f"http://127.0.0.1:{port}/encoded?codings=deflate") == PNG
    assert fetch(f"http://127.0.0.1:{port}/encoded?codings=identity,gzip") == PNG


def test_stacked_and_unknown_codings_are_refused(server) -> None:
    """Issue 21: `gzip, gzip` turned 1.8 KB on the wire into 1 GiB, decoded on the event loop
    before the byte cap was checked."""
    port = server.server_port
    message = refused(f"http://127.0.0.1:{port}/encoded?codings=gzip,gzip&zeros={64 << 20}", code="image_fetch_failed")
    assert "stacked content codings (gzip, gzip)" in message
    assert "'br'" in refused(f"http://127.0.0.1:{port}/encoded?codings=br", code="image_fetch_failed")


def test_decompressed_bytes_are_capped_as_they_are_produced(server) -> None:
    port = server.server_port
    refused(f"http://127.0.0.1:{port}/encoded?codings=gzip&zeros={64 << 20}", code="image_too_large", max_bytes=100_000)
    assert fetch(f"http://127.0.0.1:{port}/encoded?codings=gzip&zeros=100000", max_bytes=100_000) == bytes(100_000)


def test_damaged_compressed_bodies_are_refused() -> None:
    from appliance.media.fetch import _decompress

    whole = zlib.compress(PNG, 9, wbits=31)
    for damaged in (b"not gzip at all", whole[: len(whole) // 2]):
        with pytest.raises(InvalidRequest) as info:
            _decompress(damaged, "gzip", 1_000_000)
        assert info.value.code == "image_fetch_failed" and "damaged or truncated" in info.value.message
    raw_deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    assert _decompress(raw_deflate.compress(PNG) + raw_deflate.flush(), "deflate", 1_000_000) == PNG
