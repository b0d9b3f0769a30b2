"""`appliance bench`: what the HTTP layer costs over OpenVINO GenAI itself, how it scales, and how
other servers on the same model compare.

It drives an OpenAI-compatible server (the appliance, started for the graph, or any `--url`) with
streamed, fixed-length requests at several concurrency levels (closed loop) or arrival rates (open
loop, seeded Poisson arrivals), then each peer server (`--peer`, `--peer-command`) with the same
workload, then the identical workload on the graph's own pipeline in process
(ContinuousBatchingPipeline, or the stateful LLMPipeline of LM graphs), and reports vLLM-style
serving metrics and goodput for every system, their ratios to the raw pipeline, and the
appliance's event-loop lag. `--multi-turn N` instead drives N-turn chat conversations, each turn
sending the history, against the appliance with prefix caching on and then off (TTFT per turn).

Modules: `command` (the subcommand's flags), `runner` (the order of it all), `workload` (levels,
the arrival schedule, prompts of an exact token count), `client` (the SSE driver, over the small
HTTP client in `http`), `peers` (other servers: by URL or a command started for their turn), `raw`
(the pipeline baseline), `metrics` (TTFT/TPOT/ITL/goodput math), `report` (table, JSON), `plot`
(PNG), `local_server` (a private `appliance serve`), `machine` (the CPU a run was measured on),
`embeddings` (an embedding graph: served against its raw TextEmbeddingPipeline), `speculative` (a
separate script: speculative decoding's speed-up, see docs/speculative.md).

A speech-to-text graph has a bench of its own: `speech_command` (its flags), `speech` (the order
of it all), `recording` (the audio sent, its upload, the word error rate), `speech_systems` (the
server, the raw WhisperPipeline, faster-whisper), `speech_figures` (real-time factor, latency
percentiles, the raw baseline's queueing), `speech_report` (tables, JSON); `data/` holds its
default clip.
"""

from appliance.tools.bench.command import register, run

__all__ = ["register", "run"]
