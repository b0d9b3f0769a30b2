"""Request parameters -> openvino_genai.GenerationConfig (runs in the engine process)."""

from __future__ import annotations

import openvino_genai

from appliance.engine.messages import SamplingParams

__all__ = ["generation_config"]


def generation_config(params: SamplingParams, max_new_tokens: int, *, eos_token_id: int) -> openvino_genai.GenerationConfig:
    """The pipeline's config for one request. Always sets max_new_tokens (its default is 2^64-1)."""
    config = openvino_genai.GenerationConfig()
    config.max_new_tokens = max_new_tokens
    config.eos_token_id = eos_token_id
    config.ignore_eos = params.ignore_eos
    if params.stop:
        config.stop_strings = set(params.stop)
        config.include_stop_str_in_output = False
    if params.temperature > 0:
        config.do_sample = True
        config.temperature = params.temperature
        config.top_p = params.top_p
        if params.seed is not None:
            config.rng_seed = params.seed % 2**64
    else:
        config.do_sample = False
    return config
