"""A Realtime session opened as every request is: the model named on the access-log record, looked
up by `Entry.engine` (the one lookup: a 404 naming it, aliases found), and admitted on each engine
the session will call, as an HTTP request for the same work would be (400 for a model that cannot
serve the session, 503 with Retry-After for one not ready or with its queue full), all before the
route accepts the websocket's handshake.

Which session a model opens: a speech-to-text graph a `transcription` session it hears itself; a
chat graph a `realtime` (conversation) session, heard by its graph's `speech_model` and answered
by a `talk.TalkSession` on it (`intent="transcription"` makes it a transcription session on the
speech model).
"""

from __future__ import annotations

from collections.abc import Callable

from appliance.dialects.realtime.session import RealtimeLimits, RealtimeSession
from appliance.dialects.realtime.talk import TalkSession
from appliance.engine import EngineClient
from appliance.entry.record import named
from appliance.errors import InvalidRequest
from appliance.media import ImageLoader

__all__ = ["open_session"]


def open_session(
    engine_of: Callable[[str], EngineClient],
    media: ImageLoader,
    model: str | None,
    intent: str | None,
    limits: RealtimeLimits,
) -> RealtimeSession:
    """The session `?model=<model>&intent=<intent>` asks for, not yet started; ApplianceError when
    it cannot be served now (see the module's docstring). `engine_of`: `Entry.engine`; `media`: the
    server's loader (a conversation's voice encodes with it)."""
    if not model:
        raise InvalidRequest("Name the model in the URL: /v1/realtime?model=<model>.", param="model")
    named(model, None)
    engine = engine_of(model)
    task = engine.graph.task
    if task == "transcribe":
        engine.admit("transcribe")
        return RealtimeSession(kind="transcription", model=model, hearing=engine, limits=limits)
    if task != "generate":
        raise InvalidRequest(
            f"Model '{model}' is neither a speech-to-text nor a chat model: the Realtime API cannot use it.",
            param="model",
            code="model_not_supported",
        )
    hearing = engine_of(engine.graph.speech_model) if engine.graph.speech_model else None
    if intent == "transcription":
        if hearing is None:
            raise InvalidRequest(f"Model '{model}' names no speech_model to transcribe with.", param="model")
        hearing.admit("transcribe")
        return RealtimeSession(kind="transcription", model=model, hearing=hearing, limits=limits)
    engine.admit("generate")
    if hearing is not None:
        hearing.admit("transcribe")
    return RealtimeSession(
        kind="realtime",
        model=model,
        hearing=hearing,
        limits=limits,
        conversation=lambda session: TalkSession(session, engine, media),
    )
