"""The engine process's side: one model's OpenVINO GenAI pipeline, driven over a pipe.

- `process`: the process's entry point (`main`, the spawn target): picks the engine for the
  graph, reports `Ready` or `LoadFailed`, reads commands into the `inbox`.
- `base`: what the generative engines share; `batching` (continuous batching:
  `add_request`/`step`) and `stateful` (one `generate()` at a time: NPU) build on it.
- `retrieval` (embedding and rerank), `speech` (speech to text, after the graph's
  voice-activity check, `voice_activity`; a long recording read in pieces cut at its quiet
  moments, `speech_pieces`; live streams' VAD, `live_voice`), `tts` (text to speech; hibari voices in `hibari_voice`): the
  other engines, the one-at-a-time ones on `fifo`'s queue.
- `pipelines`: building a graph's pipeline; `generation`: request parameters to a
  `GenerationConfig`.
- `preparer`: prompts rendered (`prompts`, with clients' control tokens kept as text,
  `control_tokens`), tokenized and checked; `vlm`: a vision graph's images and tags.
- `inbox` / `outbox`: commands in, events out (deltas merged per step).
- `outputs`: generated ids to `Delta`/`Finished` events, detokenized incrementally
  (`vocab_decoder`, `vocab_pieces`), stop strings matched in `stop_strings`.

Only this side loads OpenVINO GenAI, and only in the engine process. Nothing here imports the
server side (`appliance.engine.host`); both share the wire, `appliance.engine.messages`
(`tests/unit/test_layers.py` checks it).
"""
