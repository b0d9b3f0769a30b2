"""The bench's HTTP client against servers that close connections: a kept-alive connection the
server closed after its last response (llama-server does) is opened anew; a server that answers
nothing at all is an error, not a retry loop."""

from __future__ import annotations

import asyncio

import pytest

from appliance.tools.bench.http import HTTPConnection, HTTPError

_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


async def _serve(handler) -> tuple[asyncio.AbstractServer, str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


async def _read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    await reader.readexactly(length)


def test_a_connection_closed_after_each_response_is_opened_again() -> None:
    connections = 0

    async def one_response_per_connection(reader, writer) -> None:
        nonlocal connections
        connections += 1
        await _read_request(reader)
        writer.write(_RESPONSE)  # no "Connection: close", and the connection closes
        await writer.drain()
        writer.close()

    async def scenario() -> list[bytes]:
        server, url = await _serve(one_response_per_connection)
        connection = HTTPConnection(url)
        bodies = []
        try:
            for _ in range(3):
                async with connection.post("/v1/completions", {"prompt": "x"}) as response:
                    assert response.status == 200
                    bodies.append(await response.read())
                await asyncio.sleep(0.05)  # the server's close arrives before the next request
        finally:
            await connection.close()
            server.close()
        return bodies

    assert asyncio.run(scenario()) == [b"ok"] * 3
    assert connections == 3


def test_a_server_that_answers_nothing_is_an_error() -> None:
    async def hang_up(reader, writer) -> None:
        await _read_request(reader)
        writer.close()

    async def scenario() -> None:
        server, url = await _serve(hang_up)
        connection = HTTPConnection(url)
        try:
            with pytest.raises(HTTPError, match="no response"):
                async with connection.post("/v1/completions", {"prompt": "x"}):
                    pass
        finally:
            await connection.close()
            server.close()

    asyncio.run(scenario())
