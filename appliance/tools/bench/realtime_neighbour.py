"""The neighbour of `appliance bench --realtime`: a chat client streaming completions back to back
from the same server, whose largest gap between chunks says whether live voice sessions (their
audio decoding, voice-activity calls, transcriptions and speech) hold up the server's other
streams. Measured alone first (the control), then while the realtime turns run.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import httpx

__all__ = ["NEIGHBOUR_PROMPT", "gap_summary", "stream_gaps"]

NEIGHBOUR_PROMPT = "Count from one to one hundred, in words."
_TOKENS = 96


async def _largest_gap(client: httpx.AsyncClient, url: str, body: dict, headers: dict) -> float:
    """One stream's largest gap between consecutive chunks (the first chunk's wait is TTFT, not a gap)."""
    last, largest = None, 0.0
    async with client.stream("POST", f"{url}/v1/chat/completions", json=body, headers=headers) as response:
        if response.status_code != 200:
            raise RuntimeError(f"the neighbour's stream was answered {response.status_code}")
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            now = time.monotonic()
            if last is not None:
                largest = max(largest, now - last)
            last = now
    return largest


async def stream_gaps(
    url: str, model: str, api_key: str | None, *, streams: int | None = None, stop: asyncio.Event | None = None
) -> list[float]:
    """Each stream's largest gap (seconds), streams back to back: `streams` of them, or until `stop`."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": NEIGHBOUR_PROMPT}],
        "max_tokens": _TOKENS,
        "temperature": 0,
        "stream": True,
    }
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    gaps: list[float] = []
    async with httpx.AsyncClient(timeout=120) as client:
        while (streams is None or len(gaps) < streams) and not (stop is not None and stop.is_set()):
            gaps.append(await _largest_gap(client, url, body, headers))
    return gaps


def gap_summary(gaps: list[float]) -> dict[str, float | int]:
    """The streams' largest gaps: how many, their median and the largest, in ms."""
    if not gaps:
        return {"streams": 0}
    return {"streams": len(gaps), "median_ms": statistics.median(gaps) * 1000, "max_ms": max(gaps) * 1000}
