"""The events of engine steps on their way to the server: deltas merged per sequence for a few
milliseconds, everything else at once.

Every frame costs the server a wake-up, and every delta a response chunk (a JSON encode, an SSE
frame, a socket write), whatever the number of tokens in it. A model whose step takes under a
millisecond (the tiny demo models; a small model at low load on a fast CPU) would send hundreds of
one-token chunks per stream per second, more than any reader needs, at a cost taken from the
engine's CPU. So a step's deltas wait, merged with the same sequence's earlier ones, until
`stream_interval_ms` has passed since the last frame. A request's first delta (time to first
token), every other event (accepted, finished, rejected, tokenized...) and an idle engine send at
once; a model whose steps take longer than the interval (a real model under load) sends every step.
"""

from __future__ import annotations

from appliance.engine.messages import Delta, EngineEvent, Finished, merge_deltas

__all__ = ["Outbox"]


class Outbox:
    def __init__(self, interval_seconds: float) -> None:
        self._interval = interval_seconds
        self._events: list[EngineEvent] = []
        self._delta_at: dict[tuple[int, int], int] = {}
        """(request, sequence) -> where its waiting delta is in `_events`."""
        self._streaming: set[int] = set()
        """Requests whose first delta has been sent."""
        self._urgent = False
        self._last_sent = 0.0

    def add(self, events: list[EngineEvent]) -> None:
        for event in events:
            if isinstance(event, Delta):
                key = (event.request_id, event.index)
                at = self._delta_at.get(key)
                if at is not None:
                    self._events[at] = merge_deltas(self._events[at], event)
                    continue
                if event.request_id not in self._streaming:
                    self._streaming.add(event.request_id)
                    self._urgent = True
                self._delta_at[key] = len(self._events)
            else:
                self._urgent = True
                if isinstance(event, Finished):
                    self._streaming.discard(event.request_id)
                # A later delta of this request must not merge into one sent before this event.
                self._delta_at = {key: at for key, at in self._delta_at.items() if key[0] != event.request_id}
            self._events.append(event)

    def take(self, now: float, *, flush: bool = False) -> list[EngineEvent]:
        """The events to send now (empty: none are due); `flush` sends whatever waits."""
        if not self._events or not (flush or self._urgent or now - self._last_sent >= self._interval):
            return []
        events, self._events, self._delta_at, self._urgent = self._events, [], {}, False
        self._last_sent = now
        return events
