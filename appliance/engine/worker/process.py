"""The engine process: one model's pipeline, driven for the server process over a pipe.

It runs in its own process because `step()`, `add_request()` and `Tokenizer.encode` hold the GIL
(see ENGINE-NOTES): in the server process they would stall the HTTP event loop for a whole step.
Commands arrive on a pipe (read by a thread, so the loop never blocks on it while requests run);
events go back in `Batch` frames.

Which engine serves a graph is its task's (`messages.TASKS`: a module whose `open_engine(graph)`
builds it, imported here only): continuous-batching graphs (LM_CB, VLM_CB) run in `batching.py`,
as an add_request/step loop with one `Batch` per step, and stateful graphs (LM, VLM: NPU) one
request at a time in `stateful.py`; embedding and rerank graphs in `retrieval.py`, texts of many
requests batched into each call; speech-to-text graphs in `speech.py`, one transcription at a time;
text-to-speech graphs in `tts.py` (SpeechT5) or `hibari_voice.py` (hibari voices), one text at a
time. Each engine says what its `Ready` reports.
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import threading
import time
from multiprocessing.connection import Connection

from appliance.cpu_affinity import restore_engine_cpus
from appliance.engine.messages import TASKS, LoadFailed, Shutdown, ToEngineDecoder, encoder
from appliance.engine.worker.inbox import Inbox
from appliance.graphfiles import Graph
from appliance.logs import LogFormat, configure_logging

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
        # Imported here, in the engine process: engines load OpenVINO GenAI, which the server
        # process (where `EngineClient` names this function as the spawn target) never needs.
        engine = importlib.import_module(TASKS[graph.task].engine).open_engine(graph)
    except Exception as exc:  # any load failure is reported, the process then exits
        conn.send_bytes(encoder.encode(LoadFailed(message=f"{type(exc).__name__}: {exc}")))
        return
    conn.send_bytes(encoder.encode(engine.ready(time.monotonic() - started)))
    inbox = Inbox()
    threading.Thread(target=_read_commands, args=(conn, inbox), daemon=True).start()
    try:
        engine.run(conn, inbox)
    except Exception:
        # Logged (one JSON object with log_format = "json"), rather than multiprocessing's bare
        # traceback on stderr; the server sees the exit code and restarts the engine.
        log.exception("engine %s: stopped by an error", graph.name)
        raise SystemExit(1) from None


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
