"""The soak's traffic: minutes of mixed requests against a running server, then a verdict.

Traffic: streaming and non-streaming chat, text and (when a vision model is served) image
requests, some clients hanging up early, and periodic bursts above a model's queue limit. Every
answer is checked: a 200 must be well formed (a stream: one id, role first, finish_reason, usage,
[DONE], no error event), a 503 must be the OpenAI envelope with Retry-After and is only "intended"
during a burst. Anything else counts as lost or malformed. RSS and open file descriptors of the
server and engine processes are read from /proc at the start (after warm-up) and at the end.

Bounded in count and time, and it only talks to the URL it is given (use 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

__all__ = ["SoakConfig", "SoakError", "run_soak"]


class SoakError(RuntimeError):
    """The soak cannot start: the server does not answer, or does not serve the model asked for."""


@dataclass(frozen=True)
class SoakConfig:
    url: str
    minutes: float = 5.0
    concurrency: int = 8
    text_model: str = "demo-chat"
    vision_model: str | None = None
    max_tokens: int = 48
    disconnect_fraction: float = 0.15
    burst_every_s: float = 60.0
    api_key: str | None = None
    seed: int = 0
    max_requests: int = 1_000_000


@dataclass
class Tally:
    outcomes: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    bursting: bool = False
    """While a burst runs, any request may meet a full queue: its 503 is intended."""

    def bad(self, kind: str, detail: str) -> None:
        self.outcomes[kind] += 1
        if len(self.problems) < 50:
            self.problems.append(f"{kind}: {detail}")


def _image_data_url(seed: int) -> str:
    from PIL import Image

    rng = random.Random(seed)
    image = Image.new("RGB", (64, 48), tuple(rng.randrange(256) for _ in range(3)))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _body(config: SoakConfig, rng: random.Random, *, stream: bool, image: bool) -> dict[str, Any]:
    text = f"soak request {rng.randrange(10**6)}: " + " ".join(
        rng.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(rng.randrange(3, 40))
    )
    content: Any = text
    model = config.text_model
    if image and config.vision_model:
        model = config.vision_model
        content = [
            {"type": "text", "text": text},
            {"type": "image_url", "image_url": {"url": _image_data_url(rng.randrange(1000))}},
        ]
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": rng.randrange(1, config.max_tokens + 1),
        "temperature": rng.choice([0, 0.7]),
        "seed": rng.randrange(1000),
    }
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _check_503(response: httpx.Response, tally: Tally, *, intended: bool) -> None:
    try:
        error = response.json()["error"]
        shaped = set(error) == {"message", "type", "param", "code"}
    except (ValueError, KeyError, TypeError):
        shaped = False
    if not shaped or "retry-after" not in response.headers:
        tally.bad("malformed_503", response.text[:200])
    elif intended:
        tally.outcomes["503_intended"] += 1
    else:
        tally.bad("503_unintended", response.text[:200])


async def _non_stream(client: httpx.AsyncClient, body: dict[str, Any], tally: Tally, disconnect: bool) -> None:
    try:
        response = await client.post("/v1/chat/completions", json=body, timeout=0.05 if disconnect else 120)
    except httpx.TimeoutException:
        tally.outcomes["disconnected_early" if disconnect else "timeout"] += 1
        if not disconnect:
            tally.problems.append("timeout on a non-stream request")
        return
    if response.status_code == 503:
        _check_503(response, tally, intended=tally.bursting)
        return
    if response.status_code != 200:
        tally.bad(f"status_{response.status_code}", response.text[:200])
        return
    try:
        data = response.json()
        choice = data["choices"][0]
        assert data["id"].startswith("chatcmpl-") and choice["finish_reason"] in ("stop", "length")
        assert isinstance(choice["message"]["content"], str)
        usage = data["usage"]
        assert usage["completion_tokens"] <= body["max_tokens"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    except (AssertionError, KeyError, ValueError, TypeError) as exc:
        tally.bad("malformed_response", f"{exc!r}: {response.text[:200]}")
        return
    tally.outcomes["ok_non_stream"] += 1


async def _stream(client: httpx.AsyncClient, body: dict[str, Any], tally: Tally, disconnect: bool) -> None:
    events: list[str] = []
    try:
        async with client.stream("POST", "/v1/chat/completions", json=body, timeout=120) as response:
            if response.status_code == 503:
                await response.aread()
                _check_503(response, tally, intended=tally.bursting)
                return
            if response.status_code != 200:
                await response.aread()
                tally.bad(f"status_{response.status_code}", response.text[:200])
                return
            async for line in response.aiter_lines():
                if line:
                    events.append(line)
                    if disconnect:
                        tally.outcomes["disconnected_early"] += 1
                        return
    except httpx.HTTPError as exc:
        tally.bad("transport_error", repr(exc))
        return
    problem = _stream_problem(events, body["max_tokens"])
    if problem:
        tally.bad("malformed_stream", problem)
    else:
        tally.outcomes["ok_stream"] += 1


def _stream_problem(events: list[str], max_tokens: int) -> str | None:
    if not events or events[-1] != "data: [DONE]":
        return f"no [DONE] at the end ({events[-1:]})"
    chunks = []
    for event in events[:-1]:
        if not event.startswith("data: "):
            return f"not a data event: {event[:80]}"
        chunk = json.loads(event[6:])
        if "error" in chunk:
            return f"error event: {event[:200]}"
        chunks.append(chunk)
    if len({chunk["id"] for chunk in chunks}) != 1:
        return "chunk ids differ"
    if chunks[0]["choices"][0]["delta"].get("role") != "assistant":
        return "first delta has no role"
    finish = [c for c in chunks if c["choices"] and c["choices"][0].get("finish_reason")]
    if len(finish) != 1:
        return f"{len(finish)} chunks with finish_reason"
    usage = chunks[-1].get("usage")
    if not usage or chunks[-1]["choices"] or usage["completion_tokens"] > max_tokens:
        return f"bad usage chunk: {chunks[-1]}"
    return None


async def _burst(client: httpx.AsyncClient, config: SoakConfig, rng: random.Random, tally: Tally, size: int) -> None:
    """`size` requests at once, above the queue limit: the overflow must get an immediate 503."""

    async def one() -> None:
        body = _body(config, rng, stream=False, image=False)
        body["max_tokens"] = config.max_tokens
        response = await client.post("/v1/chat/completions", json=body, timeout=120)
        if response.status_code == 503:
            _check_503(response, tally, intended=True)
        elif response.status_code == 200:
            tally.outcomes["ok_burst"] += 1
        else:
            tally.bad(f"burst_status_{response.status_code}", response.text[:200])

    tally.bursting = True
    try:
        await asyncio.gather(*(one() for _ in range(size)))
    finally:
        tally.bursting = False


def process_usage(pids: list[int]) -> dict[str, dict[str, int]]:
    """RSS (KiB) and open file descriptors of each pid, read from /proc."""
    usage = {}
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            rss = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))
            fds = len(list(Path(f"/proc/{pid}/fd").iterdir()))
        except (OSError, StopIteration):
            continue
        usage[str(pid)] = {"rss_kib": rss, "open_fds": fds}
    return usage


async def _server_pids(client: httpx.AsyncClient) -> tuple[list[int], dict[str, Any]]:
    """The server's and its engines' pids, and its /stats. Raises SoakError when the server does
    not answer /stats with its JSON (not running, wrong URL, a key needed)."""
    try:
        response = await client.get("/stats", timeout=10)
    except httpx.HTTPError as exc:
        raise SoakError(f"cannot reach {client.base_url}: {exc or type(exc).__name__}") from exc
    if response.status_code != 200:
        raise SoakError(f"{client.base_url}/stats answered {response.status_code}: {response.text[:200]}")
    stats = response.json()
    pids = [stats["pid"]] + [model["pid"] for model in stats["models"].values() if model.get("pid")]
    return pids, stats


async def run_soak(config: SoakConfig, log=print) -> dict[str, Any]:
    """Run the soak; returns the report (also the verdict under "passed")."""
    rng = random.Random(config.seed)
    tally = Tally()
    headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
    limits = httpx.Limits(max_connections=4096, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=config.url, headers=headers, limits=limits) as client:
        pids, stats = await _server_pids(client)
        for model in filter(None, (config.text_model, config.vision_model)):
            if model not in stats["models"]:
                raise SoakError(
                    f"{config.url} does not serve {model!r} (it serves {', '.join(sorted(stats['models']))})"
                )
        queue_limit = stats["models"][config.text_model]["max_queued_requests"]
        log(f"warming up ({config.concurrency} clients) ...")
        await asyncio.gather(
            *(
                _non_stream(client, _body(config, rng, stream=False, image=False), Tally(), False)
                for _ in range(config.concurrency)
            )
        )
        start_usage = process_usage(pids)
        started = time.monotonic()
        deadline = started + config.minutes * 60
        sent = 0

        async def client_loop(index: int) -> None:
            nonlocal sent
            local = random.Random(config.seed * 1000 + index)
            while time.monotonic() < deadline and sent < config.max_requests:
                sent += 1
                stream = local.random() < 0.5
                image = config.vision_model is not None and local.random() < 0.3
                disconnect = local.random() < config.disconnect_fraction
                body = _body(config, local, stream=stream, image=image)
                await (_stream if stream else _non_stream)(client, body, tally, disconnect)

        async def bursts() -> None:
            while True:
                await asyncio.sleep(config.burst_every_s)
                if time.monotonic() >= deadline:
                    return
                log(
                    f"burst of {queue_limit + 16} requests (queue limit {queue_limit}) at {time.monotonic() - started:.0f} s"
                )
                await _burst(client, config, rng, tally, queue_limit + 16)

        burst_task = asyncio.ensure_future(bursts())
        await asyncio.gather(*(client_loop(i) for i in range(config.concurrency)))
        burst_task.cancel()
        elapsed = time.monotonic() - started
        await asyncio.sleep(2.0)  # let cancellations settle before reading counters
        try:
            pids, stats = await _server_pids(client)
        except SoakError as exc:  # the server stopped answering during the soak: that is the verdict
            tally.bad("server_gone", str(exc))
            stats = {"models": {}, "event_loop_lag_ms": None}
        end_usage = process_usage(pids)
    idle = bool(stats["models"]) and all(
        model["in_flight"] == 0 and model["running"] == 0 for model in stats["models"].values()
    )
    failures = {
        kind: n
        for kind, n in tally.outcomes.items()
        if not (kind.startswith("ok") or kind in ("503_intended", "disconnected_early"))
    }
    report = {
        "minutes": round(elapsed / 60, 2),
        "requests": sum(tally.outcomes.values()),
        "outcomes": dict(sorted(tally.outcomes.items())),
        "lost_or_malformed": sum(failures.values()),
        "problems": tally.problems,
        "counters_back_to_zero": idle,
        "process_usage_start": start_usage,
        "process_usage_end": end_usage,
        "event_loop_lag_ms": stats["event_loop_lag_ms"],
    }
    report["passed"] = (
        report["lost_or_malformed"] == 0 and idle and tally.outcomes["503_intended"] + tally.outcomes["ok_burst"] > 0
    )
    return report


def format_report(report: dict[str, Any]) -> str:
    lines = [
        f"soak: {report['requests']} requests in {report['minutes']} min -> {'PASSED' if report['passed'] else 'FAILED'}"
    ]
    for kind, count in report["outcomes"].items():
        lines.append(f"  {kind:<22} {count}")
    lines.append(f"  lost or malformed      {report['lost_or_malformed']}")
    lines.append(f"  counters back to zero  {report['counters_back_to_zero']}")
    lines.append("  process            rss start -> end (MiB)   open fds start -> end")
    start, end = report["process_usage_start"], report["process_usage_end"]
    for pid in sorted(set(start) | set(end)):
        a, b = start.get(pid, {}), end.get(pid, {})
        lines.append(
            f"  {pid:<10} {a.get('rss_kib', 0) / 1024:>12.1f} -> {b.get('rss_kib', 0) / 1024:<10.1f}"
            f" {a.get('open_fds', 0):>10} -> {b.get('open_fds', 0)}"
        )
    lag = report["event_loop_lag_ms"]
    if lag:  # none when the server stopped answering
        lines.append(f"  event loop lag ms      p50 {lag['p50']}  p99 {lag['p99']}  max {lag['max']}")
    lines += [f"  ! {problem}" for problem in report["problems"][:20]]
    return "\n".join(lines)
