"""The engine process: one model's pipeline, driven for the server process over a pipe.

It runs in its own process because `step()`, `add_request()` and `Tokenizer.encode` hold the GIL
(see ENGINE-NOTES): in the server process they would stall the HTTP event loop for a whole step.
Commands arrive on a pipe (read by a thread, so the loop never blocks on it while requests run);
events go back in `Batch` frames.

Continuous-batching graphs (LM_CB, VLM_CB) run in `batching.py`, as an add_request/step loop with
one `Batch` per step; stateful graphs (LM, VLM: NPU) run one request at a time in `stateful.py`;
embedding and rerank graphs in `retrieval.py`, texts of many requests batched into each call;
speech-to-text graphs in `speech.py`, one transcription at a time; text-to-speech graphs in
`tts.py`, one text at a time.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from appliance.cpu_affinity import restore_engine_cpus
from appliance.engine.messages import LoadFailed, Ready, Shutdown, ToEngineDecoder, encoder
from appliance.engine.worker.inbox import Inbox
from appliance.graphfiles import Graph
from appliance.graphfiles.chat_template import template_tools
from appliance.graphfiles.model_formats import special_tokens
from appliance.logs import LogFormat, configure_logging

if TYPE_CHECKING:
    from appliance.engine.worker.base import Engine
    from appliance.engine.worker.retrieval import RetrievalEngine
    from appliance.engine.worker.speech import SpeechEngine
    from appliance.engine.worker.tts import TtsEngine

__all__ = ["main"]

log = logging.getLogger("appliance.engine")


def main(
    graph: Graph,
    conn: Connection,
    logging_setup: tuple[str, LogFormat] = ("info", "text"),
    cpus: frozenset[int] | None = None,
) -> None:
    """Entry point of the engine process (multiprocessing spawn target); it logs as the server
    does (`logging_setup`: level and format), so `log_format = "json"` covers its lines too.
    `cpus`: the CPUs to run on when the server pinned itself to fewer (`cpu_affinity`)."""
    restore_engine_cpus(cpus)
    configure_logging(*logging_setup)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # Ctrl+C reaches the whole process group: the server decides when its engines stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    started = time.monotonic()
    try:
        if graph.retrieval is not None:
            from appliance.engine.worker.retrieval import RetrievalEngine

            engine: Engine | RetrievalEngine | SpeechEngine | TtsEngine = RetrievalEngine(graph)
        elif graph.task == "transcribe":
            from appliance.engine.worker.speech import SpeechEngine

            engine = SpeechEngine(graph)
        elif graph.task == "synthesize":
            from appliance.engine.worker.tts import TtsEngine

            engine = TtsEngine(graph)
        else:
            # Imported here, in the engine process: they load OpenVINO GenAI, which the server
            # process (where `EngineClient` names this function as the spawn target) never needs.
            from appliance.engine.worker.batching import BatchingEngine
            from appliance.engine.worker.stateful import StatefulEngine

            engine = StatefulEngine(graph) if graph.stateful else BatchingEngine(graph)
    except Exception as exc:  # any load failure is reported, the process then exits
        conn.send_bytes(encoder.encode(LoadFailed(message=f"{type(exc).__name__}: {exc}")))
        return
    conn.send_bytes(encoder.encode(_ready(graph, engine, time.monotonic() - started)))
    inbox = Inbox()
    threading.Thread(target=_read_commands, args=(conn, inbox), daemon=True).start()
    try:
        engine.run(conn, inbox)
    except Exception:
        # Logged (one JSON object with log_format = "json"), rather than multiprocessing's bare
        # traceback on stderr; the server sees the exit code and restarts the engine.
        log.exception("engine %s: stopped by an error", graph.name)
        raise SystemExit(1) from None


def _ready(graph: Graph, engine: Engine | RetrievalEngine | SpeechEngine | TtsEngine, load_seconds: float) -> Ready:
    if graph.retrieval is not None:
        return Ready(max_context=engine.max_context, load_seconds=load_seconds, embedding_size=engine.embedding_size)
    if graph.task in ("transcribe", "synthesize"):
        return Ready(max_context=engine.max_context, load_seconds=load_seconds)
    vision = engine.requests.vision
    tools = template_tools(
        engine.tokenizer.chat_template or "", frozenset() if graph.gguf else special_tokens(graph.model_dir)
    )
    return Ready(
        max_context=engine.max_context,
        load_seconds=load_seconds,
        vision_tokens=vision.native_tokens if vision is not None else [],
        gguf_reader=os.environ.get("GGUF_READER", "") if graph.gguf else "",
        template_renders_tools=tools.renders_tools,
        template_renders_tool_calls=tools.renders_tool_calls,
        template_tool_parser=tools.tool_parser or "",
        template_tool_reason=tools.tool_reason,
        template_reasoning_parser=tools.reasoning_parser or "",
        template_reasoning_reason=tools.reasoning_reason,
    )


def _read_commands(conn: Connection, inbox: Inbox) -> None:
    # recv_bytes releases the GIL while it waits; EOF means the server is gone: stop.
    decoder = ToEngineDecoder()
    try:
        while True:
            message = decoder.feed(conn.recv_bytes())
            if message is not None:
                inbox.put(message)
    except (EOFError, OSError):
        inbox.put(Shutdown())
