"""The engine process: one model's ContinuousBatchingPipeline driven by an add_request/step loop.

It runs in its own process because `step()`, `add_request()` and `Tokenizer.encode` hold the GIL
(see ENGINE-NOTES): in the server process they would stall the HTTP event loop for a whole step.
Commands arrive on a pipe (read by a thread, so the loop never blocks on it while requests run);
events go back as one `Batch` frame per step.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

from appliance.config import Graph
from appliance.engine.generation import generation_config
from appliance.engine.pipelines import load_pipeline
from appliance.engine.messages import (
    Accepted,
    Batch,
    Cancel,
    ChatPrompt,
    Delta,
    EngineEvent,
    Finished,
    LoadFailed,
    Ready,
    Rejected,
    Shutdown,
    Stats,
    Submit,
    decode_to_engine,
    encoder,
)

STATS_INTERVAL_S = 0.5


def main(graph: Graph, conn: Connection) -> None:
    """Entry point of the engine process (multiprocessing spawn target)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # Ctrl+C reaches the whole process group: the server decides when its engines stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    started = time.monotonic()
    try:
        engine = _Engine(graph)
    except Exception as exc:  # any load failure is reported, the process then exits
        conn.send_bytes(encoder.encode(LoadFailed(message=f"{type(exc).__name__}: {exc}")))
        return
    conn.send_bytes(
        encoder.encode(Ready(max_context=engine.max_context, load_seconds=time.monotonic() - started))
    )
    inbox: queue.SimpleQueue[object] = queue.SimpleQueue()
    threading.Thread(target=_read_commands, args=(conn, inbox), daemon=True).start()
    engine.run(conn, inbox)


def _read_commands(conn: Connection, inbox: queue.SimpleQueue[object]) -> None:
    # recv_bytes releases the GIL while it waits; EOF means the server is gone: stop.
    try:
        while True:
            inbox.put(decode_to_engine(conn.recv_bytes()))
    except (EOFError, OSError):
        inbox.put(Shutdown())


@dataclass
class _Active:
    handle: object
    prompt_tokens: int
    streamer: object
    chunks: list[str] = field(default_factory=list)
    generated: int = 0
    reported: int = 0
    cancelled: bool = False


class _Engine:
    def __init__(self, graph: Graph) -> None:
        import openvino_genai as genai

        self._genai = genai
        self.graph = graph
        self.pipe = load_pipeline(graph)
        self.tokenizer = self.pipe.get_tokenizer()
        self.max_context = graph.limits.max_context or _model_context(graph.model_dir)
        self.eos_token_id = self.tokenizer.get_eos_token_id()
        self.active: dict[int, _Active] = {}
        self.steps = 0

    # -- the loop ---------------------------------------------------------------------------

    def run(self, conn: Connection, inbox: queue.SimpleQueue[object]) -> None:
        last_stats = 0.0
        while True:
            events: list[EngineEvent] = []
            idle = not self.active
            try:
                command = inbox.get(timeout=STATS_INTERVAL_S) if idle else inbox.get_nowait()
                while True:
                    if isinstance(command, Shutdown):
                        return
                    self._handle(command, events)
                    command = inbox.get_nowait()
            except queue.Empty:
                pass
            if self.active:
                self.pipe.step()
                self.steps += 1
                self._collect(events)
                if not self.active:
                    # The scheduler frees finished and cancelled requests' KV blocks (and updates
                    # its metrics) at the start of a step: run one now, it costs nothing idle.
                    self.pipe.step()
            if events:
                conn.send_bytes(encoder.encode(Batch(events=events)))
            now = time.monotonic()
            if now - last_stats >= STATS_INTERVAL_S or (events and not self.active):
                last_stats = now
                conn.send_bytes(encoder.encode(self._stats()))

    def _handle(self, command: object, events: list[EngineEvent]) -> None:
        if isinstance(command, Submit):
            events.append(self._submit(command))
        elif isinstance(command, Cancel):
            active = self.active.get(command.request_id)
            if active is not None:
                active.cancelled = True
                active.handle.cancel()

    def _submit(self, submit: Submit) -> EngineEvent:
        try:
            if isinstance(submit.prompt, ChatPrompt):
                text = self.tokenizer.apply_chat_template(
                    submit.prompt.messages, add_generation_prompt=True
                )
            else:
                text = submit.prompt.text
            # The chat template already holds any BOS token: do not add special tokens again.
            input_ids = self.tokenizer.encode(text, add_special_tokens=False).input_ids
        except Exception as exc:
            return Rejected(
                request_id=submit.request_id,
                message=f"The prompt could not be prepared: {exc}",
                code="invalid_prompt",
                param="messages" if isinstance(submit.prompt, ChatPrompt) else "prompt",
            )
        prompt_tokens = int(input_ids.get_shape()[-1])
        params = submit.params
        room = self.max_context - prompt_tokens
        max_new_tokens = params.max_new_tokens
        if max_new_tokens is None:
            max_new_tokens = min(self.graph.limits.max_tokens_limit, room)
        if max_new_tokens < 1 or prompt_tokens + max_new_tokens > self.max_context:
            return Rejected(
                request_id=submit.request_id,
                message=(
                    f"This model's maximum context length is {self.max_context} tokens. However, "
                    f"you requested {prompt_tokens + max(max_new_tokens, 1)} tokens "
                    f"({prompt_tokens} in the messages, {max(max_new_tokens, 1)} in the "
                    "completion). Please reduce the length of the messages or completion."
                ),
                code="context_length_exceeded",
                param="messages" if isinstance(submit.prompt, ChatPrompt) else "prompt",
            )
        config = generation_config(params, max_new_tokens, eos_token_id=self.eos_token_id)
        handle = self.pipe.add_request(submit.request_id, input_ids, config)
        active = _Active(handle=handle, prompt_tokens=prompt_tokens, streamer=None)
        # TextStreamer holds back bytes of an incomplete UTF-8 sequence (per-token decode gives U+FFFD).
        active.streamer = self._genai.TextStreamer(
            self.tokenizer,
            lambda chunk, sink=active.chunks: sink.append(chunk) or self._genai.StreamingStatus.RUNNING,
        )
        self.active[submit.request_id] = active
        return Accepted(request_id=submit.request_id, prompt_tokens=prompt_tokens)

    def _collect(self, events: list[EngineEvent]) -> None:
        genai = self._genai
        finished_ids = []
        for request_id, active in self.active.items():
            handle = active.handle
            finish_reason = None
            if handle.can_read():
                for output in handle.read().values():
                    for token in output.generated_ids:
                        active.streamer.write(token)
                    active.generated += len(output.generated_ids)
                    if output.finish_reason == genai.GenerationFinishReason.LENGTH:
                        finish_reason = "length"
                    elif output.finish_reason == genai.GenerationFinishReason.STOP:
                        finish_reason = "stop"
            status = handle.get_status()
            if status == genai.GenerationStatus.RUNNING and finish_reason is None:
                # A Delta per step with new tokens, even when the detokenizer holds their text back
                # (incomplete UTF-8): token counts and timings stay exact.
                if active.chunks or active.generated > active.reported:
                    events.append(
                        Delta(request_id=request_id, text="".join(active.chunks), tokens=active.generated)
                    )
                    active.chunks.clear()
                    active.reported = active.generated
                continue
            # A cancelled request reads back as IGNORED in this release: trust our own flag first.
            if active.cancelled or status in (genai.GenerationStatus.CANCEL, genai.GenerationStatus.STOP):
                finish_reason = "cancelled"
            elif status == genai.GenerationStatus.IGNORED:
                finish_reason = "error"
            active.streamer.end()
            events.append(
                Finished(
                    request_id=request_id,
                    finish_reason=finish_reason or "stop",
                    prompt_tokens=active.prompt_tokens,
                    completion_tokens=active.generated,
                    text="".join(active.chunks),
                    error="the scheduler could not fit the request in the KV cache"
                    if finish_reason == "error"
                    else "",
                )
            )
            finished_ids.append(request_id)
        for request_id in finished_ids:
            # Dropping the handle releases the request's KV blocks.
            del self.active[request_id]

    def _stats(self) -> Stats:
        metrics = self.pipe.get_metrics()
        return Stats(
            running=len(self.active),
            kv_cache_usage=float(metrics.cache_usage) / 100.0,
            steps=self.steps,
            waiting=max(0, int(metrics.requests) - int(metrics.scheduled_requests)),
        )


def _model_context(model_dir: Path) -> int:
    try:
        config = json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError):
        return 4096
    text_config = config.get("text_config", config)
    return int(text_config.get("max_position_embeddings") or 4096)
