"""The HTTP layer (Litestar): routes, error envelopes and SSE framing. Handlers stay thin.

- `app`: the application (dependencies, lifespan); one router per dialect: `openai_routes`,
  `responses_routes` (OpenAI's Responses API, on the chat plan), `messages_routes` (Anthropic's),
  `lmi_routes`, `elastic_routes`, `ollama_routes` (gathering `ollama_chat_routes`, `ollama_embed_routes`,
  `ollama_model_routes`, with `ollama_lines`), each with its `profiles.DialectProfile`; plus `tokenize_routes`,
  `retrieval_routes`, `speech_routes` (speech to text), `tts_routes` (text to speech), `ops_routes`,
  `openapi` and `playground` (the chat page's files);
- `handling`: what the dialects' handlers share (client-disconnect watch, access-log record, the
  chat call); `decoding`: bodies into protocol structs; `sse`: stream framing;
- the edge, which reads the dialects' profiles (`profiles`) and names none: `errors` (every error
  in its dialect's shape), `gate` (outermost ASGI layer: keys, hosts, CORS, forgery checks in
  `csrf`, metrics, access log) with `route_labels`, and `openapi` (the document, generated from the
  routes); `loop_monitor`: the event loop's lag.
"""
