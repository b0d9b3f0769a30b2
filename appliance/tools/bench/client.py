"""Drive an OpenAI-compatible server: streamed /v1/completions at a fixed concurrency (closed
loop), or sent on a fixed schedule whatever the server does with them (open loop), or multi-turn
conversations over streamed /v1/chat/completions (closed loop, `run_conversations`).

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
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import httpx
import msgspec

from appliance.tools.bench.http import HTTPConnection, HTTPError
from appliance.tools.bench.metrics import RequestResult
from appliance.tools.bench.workload import Prompt, chat_messages

__all__ = ["loop_lag", "run_conversations", "run_level"]

_decode = msgspec.json.Decoder(dict)
_REQUEST_TIMEOUT_S = 900.0
_COMPLETIONS, _CHAT = "/v1/completions", "/v1/chat/completions"
_Item = TypeVar("_Item")


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _request(model: str, output_tokens: int, **prompt: object) -> dict[str, object]:
    """The request body every system gets: `prompt` (`prompt=` or `messages=`), greedy, exactly
    `output_tokens` tokens, streamed with usage."""
    return {
        "model": model,
        **prompt,
        "max_tokens": output_tokens,
        "temperature": 0.0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def _closed_loop(
    url: str,
    api_key: str | None,
    items: Sequence[_Item],
    concurrency: int | None,
    handle: Callable[[HTTPConnection, int, _Item], Awaitable[None]],
) -> float:
    """`concurrency` clients, each on its own keep-alive connection, taking the next item (and its
    index) as soon as the last one is handled; returns the wall time."""
    pending = iter(enumerate(items))  # a shared iterator: each worker takes the next item

    async def worker() -> None:
        connection = HTTPConnection(url, _headers(api_key))
        try:
            for index, item in pending:
                await handle(connection, index, item)
        finally:
            await connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(concurrency or 1, len(items)))))
    return time.perf_counter() - started


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
    results: list[RequestResult] = []

    async def send(connection: HTTPConnection, _: int, prompt: Prompt) -> None:
        body = _request(model, output_tokens, prompt=prompt.text)
        results.append(await _one_request(connection, _COMPLETIONS, body, output_tokens))

    return results, await _closed_loop(url, api_key, prompts, concurrency, send)


async def run_conversations(
    url: str,
    model: str,
    conversations: Sequence[Sequence[Prompt]],
    *,
    concurrency: int | None,
    output_tokens: int,
    api_key: str | None = None,
    systems: Sequence[Prompt] | None = None,
) -> tuple[list[list[RequestResult]], float]:
    """Each of `concurrency` clients takes the next conversation (its user messages, one per turn)
    and sends its turns one after the other, each with the whole history so far (the answers it got
    back) after the conversation's system message in `systems` (one per conversation; None: no
    system message); returns a result per turn of each conversation, and the wall time. After a
    failed turn the rest of its conversation is not sent and counts as failed."""
    results: list[list[RequestResult]] = [[] for _ in conversations]
    if systems is not None and len(systems) != len(conversations):
        raise ValueError(f"{len(systems)} system messages for {len(conversations)} conversations")

    async def converse(connection: HTTPConnection, index: int, users: Sequence[Prompt]) -> None:
        answers: list[str] = []
        system = systems[index].text if systems is not None else None
        for turn in range(len(users)):
            if answers and not results[index][-1].ok:
                results[index].append(RequestResult(ok=False, error=f"not sent: turn {turn} failed"))
                continue
            messages = chat_messages([user.text for user in users[: turn + 1]], answers, system)
            body = _request(model, output_tokens, messages=messages)
            results[index].append(await _one_request(connection, _CHAT, body, output_tokens))
            answers.append(results[index][-1].text)

    return results, await _closed_loop(url, api_key, conversations, concurrency, converse)


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
            body = _request(model, output_tokens, prompt=prompt.text)
            return await _one_request(connection, _COMPLETIONS, body, output_tokens, origin=due)
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
    connection: HTTPConnection,
    path: str,
    payload: dict[str, object],
    output_tokens: int,
    *,
    origin: float | None = None,
) -> RequestResult:
    """One streamed completion or chat completion; times count from `origin` (a perf_counter
    value), default now."""
    started = time.perf_counter() if origin is None else origin
    send_delay = time.perf_counter() - started
    chunk_times: list[float] = []
    pieces: list[str] = []
    usage: dict[str, int] | None = None
    done_at: float | None = None
    try:
        async with asyncio.timeout(_REQUEST_TIMEOUT_S), connection.post(path, payload) as response:
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
                    texts = [text for choice in chunk.get("choices") or () if (text := _choice_text(choice))]
                    if texts:
                        chunk_times.append(now)
                        pieces += texts
    except (HTTPError, TimeoutError, msgspec.DecodeError) as exc:
        return RequestResult(ok=False, error=f"{type(exc).__name__}: {exc}", send_delay=send_delay)
    result = RequestResult(
        ok=True,
        prompt_tokens=(usage or {}).get("prompt_tokens", 0),
        cached_tokens=_cached_tokens(usage),
        output_tokens=(usage or {}).get("completion_tokens", 0),
        chunk_times=chunk_times,
        latency=time.perf_counter() - started if done_at is None else done_at,
        send_delay=send_delay,
        text="".join(pieces),
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


def _cached_tokens(usage: dict[str, object] | None) -> int | None:
    """Prompt tokens the server says it took from its cache (`usage.prompt_tokens_details.
    cached_tokens`, OpenAI's field; llama-server fills it); None when it does not say."""
    details = (usage or {}).get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return cached if isinstance(cached, int) and not isinstance(cached, bool) else None


def _choice_text(choice: dict[str, object]) -> str | None:
    """A chunk choice's text: `text` (completions) or `delta.content` (chat completions)."""
    delta = choice.get("delta")
    text = choice.get("text") or (delta.get("content") if isinstance(delta, dict) else None)
    return text if isinstance(text, str) else None


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
