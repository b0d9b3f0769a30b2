"""`appliance bench`: what the HTTP layer costs over OpenVINO GenAI itself, and how it scales.

It drives an OpenAI-compatible server (the appliance, started for the graph, or any `--url`) with
streamed, fixed-length requests at several concurrency levels, then runs the identical workload
on the graph's own pipeline in process (ContinuousBatchingPipeline, or the stateful LLMPipeline of
LM graphs), and reports vLLM-style serving metrics for both, their ratios, and the appliance's
event-loop lag.

Modules: `command` (the subcommand's flags), `runner` (the order of it all), `workload` (prompts
of an exact token count), `client` (the SSE driver, over the small HTTP client in `http`), `raw`
(the pipeline baseline), `metrics` (TTFT/TPOT/ITL math), `report` (table, JSON), `plot` (PNG),
`local_server` (a private `appliance serve`), `speculative` (a separate script: speculative
decoding's speed-up, see docs/speculative.md).
"""

from appliance.tools.bench.command import register, run

__all__ = ["register", "run"]
