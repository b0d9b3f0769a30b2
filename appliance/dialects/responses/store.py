"""Stored responses: bounded, per API key, in the appliance's store (`appliance.store`), for
`GET /v1/responses/{id}` and for `previous_response_id`.

A response created with `store` (OpenAI's default) is kept with the conversation it ends (the
messages it was generated from, instructions excluded, and its own output as the assistant's
turn), so a follow-up can send only what is new. They live in the store's database (SQLite in the
state directory, or PostgreSQL): a restart keeps them, and servers sharing a PostgreSQL store
continue each other's. Bounds (`appliance.store.responses`): at most `max_stored_responses`
responses and 64 MiB of their JSON, each for an hour; when one is reached, the oldest response of
the API key holding the largest share goes first. A response is found only with the API key it was
created with (by a hash of the key: the key itself is not kept), so one client cannot read or
continue another's.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from appliance.protocol.openai import Message
from appliance.protocol.responses import Response
from appliance.store import ResponseRows, owner_of

__all__ = ["ResponseStore", "StoredResponse", "owner_of"]


class _Body(msgspec.Struct):
    """What a stored response's row holds."""

    response: Response
    conversation: list[Message]


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(_Body)


@dataclass(frozen=True)
class StoredResponse:
    response: Response
    conversation: tuple[Message, ...]
    """The messages through this response's output, for a follow-up (instructions excluded)."""


class ResponseStore:
    """Stored responses by id and owner, as typed values over the store's rows."""

    def __init__(self, rows: ResponseRows) -> None:
        self.rows = rows

    async def put(self, owner: str, response: Response, conversation: list[Message]) -> bool:
        """Keep `response`; False when it alone is larger than the whole store."""
        return await self.rows.put(owner, response.id, _encoder.encode(_Body(response, conversation)))

    async def get(self, owner: str, response_id: str) -> StoredResponse | None:
        """The response, if `owner` stored it and it has not expired or been evicted."""
        body = await self.rows.get(owner, response_id)
        if body is None:
            return None
        decoded = _decoder.decode(body)
        return StoredResponse(decoded.response, tuple(decoded.conversation))

    async def delete(self, owner: str, response_id: str) -> bool:
        return await self.rows.delete(owner, response_id)
