"""Test images made on the fly, and a small HTTP server on 127.0.0.1 that serves them (and misbehaves
on request: redirects, slow bodies, lying or missing lengths)."""

from __future__ import annotations

import base64
import io
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import numpy as np
from PIL import Image


def noise(width: int, height: int, seed: int = 0, mode: str = "RGB") -> Image.Image:
    """A random image (random content makes different images give different model outputs)."""
    rng = np.random.default_rng(seed)
    channels = {"RGB": 3, "RGBA": 4, "L": 1}[mode]
    array = (rng.random((height, width, channels)) * 255).astype(np.uint8)
    return Image.fromarray(array[..., 0] if channels == 1 else array, mode)


def encode(image: Image.Image, fmt: str = "PNG", **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def png_header_only(width: int, height: int) -> bytes:
    """A PNG that declares `width` x `height` pixels but holds almost no data (a pixel bomb)."""

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 16))
        + chunk(b"IEND", b"")
    )


def animated_gif(frames: int, size: int = 32) -> bytes:
    images = [Image.new("P", (size, size), color=index % 256) for index in range(frames)]
    return encode(images[0], "GIF", save_all=True, append_images=images[1:], duration=10)


def compressed(data: bytes | int, codings: list[str]) -> bytes:
    """`data` (or that many zero bytes, compressed as they stream) with `codings` applied in
    order, as a server sends `Content-Encoding: <codings joined by ', '>`: gzip and deflate are
    applied, other names leave the bytes as they are."""
    bits = {"gzip": 31, "deflate": 15}
    for coding in codings:
        if coding not in bits:
            continue
        compressor = zlib.compressobj(9, zlib.DEFLATED, bits[coding])
        if isinstance(data, int):
            block, size = bytes(1 << 20), data
            parts = [compressor.compress(block) for _ in range(size >> 20)]
            data = b"".join([*parts, compressor.compress(bytes(size % len(block))), compressor.flush()])
        else:
            data = compressor.compress(data) + compressor.flush()
    return data if isinstance(data, bytes) else bytes(data)


class _Handler(BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}

    def log_message(self, *args: object) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        url = urlsplit(self.path)
        query = {key: values[0] for key, values in parse_qs(url.query).items()}
        self.server.hits.append(self.path)  # type: ignore[attr-defined]
        if url.path == "/redirect":
            self.send_response(int(query.get("status", "302")))
            self.send_header("Location", query["to"])
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif url.path == "/slow":
            body = self.files["/a.png"]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                for byte in body:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:
                pass  # the client gave up, as it should
        elif url.path == "/huge-declared":
            self.send_response(200)
            self.send_header("Content-Length", str(10**9))
            self.end_headers()
            self.wfile.write(b"x" * 1024)
        elif url.path == "/huge-chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for _ in range(10_000):
                    block = b"x" * 65536
                    self.wfile.write(f"{len(block):x}\r\n".encode() + block + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass  # the client hung up once it had enough, as it should
        elif url.path == "/encoded":
            # ?codings=gzip,gzip&zeros=N: N zero bytes (else /a.png) with those content codings.
            codings = query["codings"].split(",")
            source: bytes | int = int(query["zeros"]) if "zeros" in query else self.files["/a.png"]
            body = compressed(source, codings)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Encoding", ", ".join(codings))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif url.path in self.files:
            body = self.files[url.path]
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()


@contextmanager
def image_server(files: dict[str, bytes]) -> Iterator[ThreadingHTTPServer]:
    """Serve `files` (path -> bytes) plus /redirect?to=..., /slow, /huge-declared, /huge-chunked,
    /encoded?codings=...[&zeros=N] on 127.0.0.1; `server.hits` lists the paths requested, `server.server_port` the port."""
    handler = type("Handler", (_Handler,), {"files": dict(files)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.hits = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
