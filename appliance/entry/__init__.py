"""The house's one way in, free of any transport: `calls.Entry` takes a request struct (chat,
completions, embeddings, rerank, score, responses) and gives its answer or the call streaming it,
or opens a Realtime session, with the model looked up in one place, the engine's admission and
limits, and the access-log record (`record`: one per request, whether an HTTP route, a websocket or
a batch line carried it in).

- `calls`: `Entry`.
- `realtime`: a Realtime session's engines found and admitted (`Entry.realtime_session`).
- `record`: `RequestRecord`, the current one (`current_record`), `named` (the record told the
  model and user) and its access-log line.
- `decoding`: request bodies decoded strictly into protocol structs, errors naming the field (every
  route's body, and every line of a batch).
"""

from appliance.entry.calls import Entry
from appliance.entry.record import RequestRecord, current_record, log_line, named

__all__ = ["Entry", "RequestRecord", "current_record", "log_line", "named"]
