"""The channel between the server process and an engine process: msgspec-encoded messages.

Parent -> engine: `Submit`, `Cancel`, `Shutdown`. Engine -> parent: `Ready` or `LoadFailed` once,
then `Batch`es of per-request events (`Accepted`, `Rejected`, `Delta`, `Finished`) and engine
`Stats`. Each message is one `send_bytes` frame.
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = [
    "Accepted",
    "Batch",
    "Cancel",
    "ChatPrompt",
    "Delta",
    "EngineEvent",
    "Finished",
    "LoadFailed",
    "Ready",
    "Rejected",
    "SamplingParams",
    "Shutdown",
    "Stats",
    "Submit",
    "TextPrompt",
    "decode_from_engine",
    "decode_to_engine",
    "encoder",
]


class SamplingParams(msgspec.Struct, frozen=True, kw_only=True):
    """What the engine needs to build a GenerationConfig (validated by the service layer)."""

    max_new_tokens: int | None
    """None: as many as the context allows, up to max_tokens_limit."""
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False


class ChatPrompt(msgspec.Struct, frozen=True, tag="chat"):
    """Messages rendered with the model's chat template inside the engine."""

    messages: list[dict[str, str]]


class TextPrompt(msgspec.Struct, frozen=True, tag="text"):
    """A raw prompt (completions API), tokenized as is."""

    text: str


class Submit(msgspec.Struct, frozen=True, tag="submit"):
    request_id: int
    prompt: ChatPrompt | TextPrompt
    params: SamplingParams


class Cancel(msgspec.Struct, frozen=True, tag="cancel"):
    request_id: int


class Shutdown(msgspec.Struct, frozen=True, tag="shutdown"):
    pass


ToEngine = Submit | Cancel | Shutdown


class Accepted(msgspec.Struct, frozen=True, tag="accepted"):
    request_id: int
    prompt_tokens: int


class Rejected(msgspec.Struct, frozen=True, tag="rejected"):
    """The request never reached the pipeline (bad input found while preparing it)."""

    request_id: int
    message: str
    code: str
    param: str | None = None


class Delta(msgspec.Struct, frozen=True, tag="delta"):
    request_id: int
    text: str
    tokens: int
    """Tokens generated so far (the text may lag behind while a UTF-8 sequence is incomplete)."""


class Finished(msgspec.Struct, frozen=True, tag="finished"):
    request_id: int
    finish_reason: Literal["stop", "length", "cancelled", "error"]
    prompt_tokens: int
    completion_tokens: int
    text: str = ""
    """Text flushed at the end (held-back bytes of the detokenizer)."""
    error: str = ""


EngineEvent = Accepted | Rejected | Delta | Finished


class Batch(msgspec.Struct, frozen=True, tag="batch"):
    events: list[EngineEvent]


class Ready(msgspec.Struct, frozen=True, tag="ready"):
    max_context: int
    load_seconds: float


class LoadFailed(msgspec.Struct, frozen=True, tag="load_failed"):
    message: str


class Stats(msgspec.Struct, frozen=True, tag="stats"):
    running: int
    """Requests inside the pipeline (scheduled or waiting for KV blocks)."""
    kv_cache_usage: float
    """Fraction of the KV cache in use, 0..1."""
    steps: int
    waiting: int = 0
    """Of `running`, those the scheduler did not schedule in the last step."""


FromEngine = Batch | Ready | LoadFailed | Stats

encoder = msgspec.msgpack.Encoder()
_to_engine = msgspec.msgpack.Decoder(ToEngine)
_from_engine = msgspec.msgpack.Decoder(FromEngine)


def decode_to_engine(data: bytes) -> ToEngine:
    return _to_engine.decode(data)


def decode_from_engine(data: bytes) -> FromEngine:
    return _from_engine.decode(data)
