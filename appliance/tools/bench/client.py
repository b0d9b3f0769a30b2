"""Drive an OpenAI-compatible server: streamed /v1/completions at a fixed concurrency (closed
loop), or sent on a fixed schedule whatever the server does with them (open loop).

The SSE stream is parsed here rather than by an SDK so each chunk is timestamped the moment its
bytes arrive. `stream_options.include_usage` gives the server's own token counts; a request
counts as failed on a non-200 status, an error event, a missing `data: [DONE]`, or a completion
token count other than the one asked for.

In an open loop, a request's times (TTFT, latency) count from its scheduled arrival, not from when
the client got around to sending it: a late send is queueing the user sees (and the raw baseline
counts from the same schedule).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import httpx
import msgspec

from appliance.tools.bench.http import HTTPConnection, HTTPError
from appliance.tools.bench.metrics import RequestResult
from appliance.tools.bench.workload import Prompt

__all__ = ["loop_lag", "run_level"]

_decode = msgspec.json.Decoder(dict)
_REQUEST_TIMEOUT_S = 900.0


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


async def run_level(
    url: str,
    model: str,
    prompts: Sequence[Prompt],
    *,
    concurrency: int | None,
    output_tokens: int,
    arrivals: Sequence[float] | None = None,
    api_key: str | None = None,
) -> tuple[list[RequestResult], float]:
    """Send every prompt, keeping `concurrency` requests in flight, or (with `arrivals`, offsets in
    seconds) each at its offset from the start; returns results and wall time."""
    if arrivals is not None:
        return await _open_loop(url, model, prompts, arrivals, output_tokens, api_key)
    pending = iter(prompts)
    results: list[RequestResult] = []

    async def worker() -> None:
        connection = HTTPConnection(url, _headers(api_key))  # one keep-alive connection per worker
        try:
            for prompt in pending:  # a shared iterator: each worker takes the next prompt
                results.append(await _one_request(connection, model, prompt, output_tokens))
        finally:
            await connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(concurrency or 1, len(prompts)))))
    return results, time.perf_counter() - started


async def _open_loop(
    url: str,
    model: str,
    prompts: Sequence[Prompt],
    arrivals: Sequence[float],
    output_tokens: int,
    api_key: str | None,
) -> tuple[list[RequestResult], float]:
    idle: list[HTTPConnection] = []  # keep-alive connections between requests, opened as needed
    opened: list[HTTPConnection] = []

    async def send(prompt: Prompt, due: float) -> RequestResult:
        connection = idle.pop() if idle else HTTPConnection(url, _headers(api_key))
        if connection not in opened:
            opened.append(connection)
        try:
            return await _one_request(connection, model, prompt, output_tokens, origin=due)
        finally:
            idle.append(connection)

    started = time.perf_counter()
    tasks = []
    for prompt, offset in zip(prompts, arrivals):
        delay = started + offset - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(send(prompt, started + offset)))
    try:
        results = list(await asyncio.gather(*tasks))
    finally:
        for connection in opened:
            await connection.close()
    return results, time.perf_counter() - started


async def _one_request(
    connection: HTTPConnection, model: str, prompt: Prompt, output_tokens: int, *, origin: float | None = None
) -> RequestResult:
    """One streamed completion; times count from `origin` (a perf_counter value), default now."""
    payload = {
        "model": model,
        "prompt": prompt.text,
        "max_tokens": output_tokens,
        "temperature": 0.0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    started = time.perf_counter() if origin is None else origin
    send_delay = time.perf_counter() - started
    chunk_times: list[float] = []
    usage: dict[str, int] | None = None
    done_at: float | None = None
    try:
        async with asyncio.timeout(_REQUEST_TIMEOUT_S), connection.post("/v1/completions", payload) as response:
            if response.status != 200:
                body = (await response.read()).decode("utf-8", "replace")
                return RequestResult(ok=False, error=f"HTTP {response.status}: {body[:200]}", send_delay=send_delay)
            buffer = b""
            async for arrived, data in response.chunks():
                now = arrived - started
                buffer += data.replace(b"\r\n", b"\n")
                *events, buffer = buffer.split(b"\n\n")
                for event in events:
                    payload_bytes = _event_data(event)
                    if payload_bytes is None:
                        continue
                    if payload_bytes == b"[DONE]":
                        done_at = now
                        continue
                    chunk = _decode.decode(payload_bytes)
                    if "error" in chunk:
                        return RequestResult(ok=False, error=f"error event: {chunk['error']}", send_delay=send_delay)
                    if chunk.get("usage"):
                        usage = chunk["usage"]
                    if any(choice.get("text") for choice in chunk.get("choices") or ()):
                        chunk_times.append(now)
    except (HTTPError, TimeoutError, msgspec.DecodeError) as exc:
        return RequestResult(ok=False, error=f"{type(exc).__name__}: {exc}", send_delay=send_delay)
    result = RequestResult(
        ok=True,
        prompt_tokens=(usage or {}).get("prompt_tokens", 0),
        output_tokens=(usage or {}).get("completion_tokens", 0),
        chunk_times=chunk_times,
        latency=time.perf_counter() - started if done_at is None else done_at,
        send_delay=send_delay,
    )
    if done_at is None:
        result.ok, result.error = False, "the stream ended without data: [DONE]"
    elif usage is None:
        result.ok, result.error = False, "no usage chunk (stream_options.include_usage unsupported?)"
    elif result.output_tokens != output_tokens:
        result.ok, result.error = False, f"{result.output_tokens} completion tokens instead of {output_tokens}"
    elif not chunk_times:
        result.ok, result.error = False, "no output text in the stream"
    return result


def _event_data(event: bytes) -> bytes | None:
    # An SSE event may hold comments and several `data:` lines (joined by newlines per the spec).
    lines = [line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
    return b"\n".join(lines) if lines else None


def loop_lag(url: str, since: float, *, api_key: str | None = None) -> dict[str, float] | None:
    """The appliance's event-loop lag (ms) since `since` (Unix seconds); None from other servers."""
    try:
        response = httpx.get(f"{url}/stats", params={"since": since}, headers=_headers(api_key), timeout=10.0)
        return response.json()["event_loop_lag_ms"] if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None
