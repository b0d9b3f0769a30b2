"""Stored responses: kept in memory, bounded, per API key, for `GET /v1/responses/{id}` and for
`previous_response_id`.

A response created with `store` (OpenAI's default) is kept with the conversation it ends (the
messages it was generated from, instructions excluded, and its own output as the assistant's
turn), so a follow-up can send only what is new. The store lives in the server process: it is lost
on restart, and a server behind a load balancer only knows its own responses (send the whole input
with `store: false` there). Bounds: at most `max_responses` responses and `max_bytes` of their
JSON, each for at most `ttl_seconds`. When a bound is reached, the oldest response of the owner
holding the largest share goes first, so one API key storing a burst of responses evicts its own,
never those of a key within its fair share (the bounds divided by the keys storing). A response is
found only with the API key it was created with (by a hash of the key: the key itself is not kept),
so one client cannot read or continue another's.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from appliance.protocol.openai import Message
from appliance.protocol.responses import Response

__all__ = ["ResponseStore", "StoredResponse", "owner_of"]

MAX_RESPONSES = 1024
MAX_BYTES = 64 * 1024 * 1024
TTL_SECONDS = 3600.0

_encoder = msgspec.json.Encoder()


def owner_of(api_key: str | None) -> str:
    """Who a response belongs to: a hash of the API key the request carried ("" without one)."""
    return hashlib.sha256(api_key.encode()).hexdigest() if api_key else ""


@dataclass(frozen=True)
class StoredResponse:
    owner: str
    response: Response
    conversation: tuple[Message, ...]
    """The messages through this response's output, for a follow-up (instructions excluded)."""
    size: int
    expires_at: float


class ResponseStore:
    """Responses by id, oldest evicted first when a bound is reached."""

    def __init__(
        self,
        *,
        max_responses: int = MAX_RESPONSES,
        max_bytes: int = MAX_BYTES,
        ttl_seconds: float = TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_responses = max_responses
        self.max_bytes = max_bytes
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._entries: OrderedDict[str, StoredResponse] = OrderedDict()
        self._bytes = 0
        self._owned: dict[str, OrderedDict[str, int]] = {}
        """Per owner: their response ids, oldest first, with each one's size."""

    def __len__(self) -> int:
        self._expire()
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def put(self, owner: str, response: Response, conversation: list[Message]) -> bool:
        """Keep `response`; False when it alone is larger than the whole store."""
        size = len(_encoder.encode(response)) + len(_encoder.encode(conversation))
        if size > self.max_bytes or self.max_responses < 1:
            return False
        self._drop(response.id)
        self._entries[response.id] = StoredResponse(
            owner=owner,
            response=response,
            conversation=tuple(conversation),
            size=size,
            expires_at=self._clock() + self.ttl_seconds,
        )
        self._bytes += size
        self._owned.setdefault(owner, OrderedDict())[response.id] = size
        self._expire()
        while len(self._entries) > self.max_responses or self._bytes > self.max_bytes:
            self._drop(next(iter(self._owned[self._largest_owner()])))
        return True

    def get(self, owner: str, response_id: str) -> StoredResponse | None:
        """The response, if `owner` stored it and it has not expired or been evicted."""
        self._expire()
        entry = self._entries.get(response_id)
        return entry if entry is not None and entry.owner == owner else None

    def delete(self, owner: str, response_id: str) -> bool:
        if self.get(owner, response_id) is None:
            return False
        self._drop(response_id)
        return True

    def _largest_owner(self) -> str:
        """The owner holding the largest share of the store (of its count or of its bytes)."""

        def share(owner: str) -> float:
            owned = self._owned[owner]
            return max(len(owned) / self.max_responses, sum(owned.values()) / self.max_bytes)

        return max(self._owned, key=share)

    def _drop(self, response_id: str) -> None:
        entry = self._entries.pop(response_id, None)
        if entry is not None:
            self._bytes -= entry.size
            owned = self._owned[entry.owner]
            del owned[response_id]
            if not owned:
                del self._owned[entry.owner]

    def _expire(self) -> None:
        # Entries are in insertion order, and every entry lives equally long: the expired ones lead.
        now = self._clock()
        while self._entries:
            first = next(iter(self._entries.values()))
            if first.expires_at > now:
                break
            self._drop(first.response.id)
