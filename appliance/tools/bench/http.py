"""A minimal HTTP/1.1 client for streamed POSTs (JSON, or any body such as a multipart form): one keep-alive connection per benchmark worker.

The load generator shares the machine with the server it measures. httpx costs ~60 us of Python
per SSE chunk (anyio timeouts, h11 events, several async layers): at 16 streams on a 2-core box
that is most of a core taken from the server, so served numbers would partly measure the client.
This reads the socket with asyncio streams and undoes chunked transfer encoding by hand, a few
microseconds per chunk. It speaks just enough HTTP for JSON requests to a local or LAN server.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

__all__ = ["HTTPConnection", "HTTPError"]

_LIMIT = 1 << 20  # longest line or header block accepted


class HTTPError(Exception):
    """The connection broke or the server spoke something this client does not understand."""


class HTTPConnection:
    """`async with conn.post(path, body) as response:` then iterate `response.chunks()`."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"{url}: only http:// URLs are supported")
        self._host, self._port = parts.hostname, parts.port or 80
        self._prefix = parts.path.rstrip("/")
        self._headers = {"Host": parts.netloc, "Accept": "text/event-stream", **(headers or {})}
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    def post(self, path: str, payload: object) -> Response:
        """Send `payload` as JSON; the response is read as it arrives."""
        return Response(self, path, json.dumps(payload).encode())

    def post_body(self, path: str, body: bytes, content_type: str) -> Response:
        """Send `body` as it is (e.g. a multipart form), declared as `content_type`."""
        return Response(self, path, body, content_type)

    async def _send(self, path: str, body: bytes, content_type: str) -> tuple[asyncio.StreamReader, bytes]:
        """Send the request and read the response's head; a kept-alive connection the server
        closed meanwhile (llama-server closes it after each streamed response without saying so)
        is opened anew and the request sent once more, as HTTP clients do when no byte of a
        response came back."""
        reused = self._writer is not None and not self._writer.is_closing()
        try:
            return await self._exchange(path, body, content_type)
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            nothing_read = not isinstance(exc, asyncio.IncompleteReadError) or not exc.partial
            if not (reused and nothing_read):
                raise
            await self.close()
            return await self._exchange(path, body, content_type)

    async def _exchange(self, path: str, body: bytes, content_type: str) -> tuple[asyncio.StreamReader, bytes]:
        if self._writer is None or self._writer.is_closing():
            self._reader, self._writer = await asyncio.open_connection(self._host, self._port, limit=_LIMIT)
        head = [f"POST {self._prefix}{path} HTTP/1.1", f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]
        head += [f"{name}: {value}" for name, value in self._headers.items()]
        self._writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        await self._writer.drain()
        return self._reader, await self._reader.readuntil(b"\r\n\r\n")

    async def close(self) -> None:
        """Close the socket (the next request opens a new one)."""
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except OSError:
                pass
            self._writer = None


class Response:
    """A response whose body is read piece by piece, each piece stamped with its arrival time."""

    def __init__(
        self, connection: HTTPConnection, path: str, body: bytes, content_type: str = "application/json"
    ) -> None:
        self._connection, self._path, self._body, self._content_type = connection, path, body, content_type
        self.status = 0
        self.headers: dict[str, str] = {}
        self._reader: asyncio.StreamReader | None = None
        self._complete = False

    async def __aenter__(self) -> Response:
        try:
            self._reader, block = await self._connection._send(self._path, self._body, self._content_type)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            await self._connection.close()
            raise HTTPError(f"no response: {exc!r}") from exc
        status_line, *lines = block.decode("latin-1").split("\r\n")
        try:
            self.status = int(status_line.split(" ", 2)[1])
        except (IndexError, ValueError):
            await self._connection.close()
            raise HTTPError(f"not an HTTP response: {status_line[:80]!r}") from None
        for line in lines:
            name, _, value = line.partition(":")
            if name:
                self.headers[name.strip().lower()] = value.strip()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        # A body not read to its end (or a server that closes) leaves the socket unusable.
        if not self._complete or self.headers.get("connection", "").lower() == "close":
            await self._connection.close()

    async def chunks(self) -> AsyncIterator[tuple[float, bytes]]:
        """(perf_counter at arrival, bytes) for each piece of the body, until it ends."""
        reader = self._reader
        try:
            if self.headers.get("transfer-encoding", "").lower() == "chunked":
                while True:
                    size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                    data = await reader.readexactly(size + 2)  # the chunk and its CRLF
                    if size == 0:
                        break
                    yield time.perf_counter(), data[:-2]
            elif "content-length" in self.headers:
                yield time.perf_counter(), await reader.readexactly(int(self.headers["content-length"]))
            else:  # the body runs until the server closes the connection
                while data := await reader.read(65536):
                    yield time.perf_counter(), data
                self.headers["connection"] = "close"
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            raise HTTPError(f"the response broke off: {exc!r}") from exc
        self._complete = True

    async def read(self) -> bytes:
        """The whole body."""
        return b"".join([data async for _, data in self.chunks()])
