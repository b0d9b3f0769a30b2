"""The HTTP layer (Litestar): routes, error envelopes and SSE framing. Handlers stay thin.

- `app`: the application (dependencies, lifespan); one router per dialect: `openai_routes`,
  `lmi_routes`, `elastic_routes` (each answers errors in its own shape), plus `responses_routes`
  (OpenAI's Responses API, on the chat plan), `tokenize_routes`, `ops_routes` and `openapi`;
- `handling`: what the dialects' handlers share (client-disconnect watch, access-log record, the
  chat call); `decoding`: bodies into protocol structs; `errors`: the OpenAI envelope and
  `error_response`; `sse`: stream framing;
- `gate` (outermost ASGI layer: keys, hosts, CORS, metrics, access log) with `route_labels`;
  `loop_monitor`: the event loop's lag.
"""
