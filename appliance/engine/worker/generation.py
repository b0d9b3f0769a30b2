"""Request parameters -> openvino_genai.GenerationConfig (runs in the engine process)."""

from __future__ import annotations

import secrets

import openvino_genai

from appliance.engine.messages import SamplingParams, TriggeredGrammar

__all__ = ["generation_config"]


def generation_config(
    params: SamplingParams, max_new_tokens: int, *, eos_token_id: int
) -> openvino_genai.GenerationConfig:
    """The pipeline's config for one request. Always sets max_new_tokens (its default is 2^64-1).

    Raises (from `validate()`) on a combination the pipeline refuses, before the request is added.
    """
    config = openvino_genai.GenerationConfig()
    config.max_new_tokens = max_new_tokens
    config.min_new_tokens = min(params.min_new_tokens, max_new_tokens)
    config.ignore_eos = params.ignore_eos
    if params.stop:
        config.stop_strings = set(params.stop)
        # The engine then holds back text that may start a stop string and keeps the whole match
        # (to the end of the token holding its last character); `RequestOutputs` cuts the text
        # right before or right after the stop string (the engine's own exclusion works on whole
        # tokens and can leave part of it behind).
        config.include_stop_str_in_output = True
    if params.stop_token_ids:
        config.stop_token_ids = set(params.stop_token_ids)
    config.set_eos_token_id(eos_token_id)  # also makes it a stop token, as validate() expects
    config.repetition_penalty = params.repetition_penalty
    config.presence_penalty = params.presence_penalty
    config.frequency_penalty = params.frequency_penalty
    if params.logprobs:
        config.logprobs = 1  # the chosen token's: the only one this engine computes
    if params.best_of > 1:
        config.do_sample = False
        config.num_beams = params.best_of
        config.num_return_sequences = params.n
        config.length_penalty = params.length_penalty
    elif params.temperature > 0:
        config.do_sample = True
        config.temperature = params.temperature
        config.top_p = params.top_p
        if params.top_k > 0:
            config.top_k = params.top_k
        config.min_p = params.min_p
        config.num_return_sequences = params.n
        # Without a seed the pipeline would use rng_seed 0 for every request: the same "random"
        # answer each time. Only an explicit seed makes sampling reproducible, as in OpenAI's API.
        config.rng_seed = params.seed % 2**64 if params.seed is not None else secrets.randbits(63)
    else:
        config.do_sample = False
    if params.num_assistant_tokens:
        config.num_assistant_tokens = params.num_assistant_tokens
    if params.assistant_confidence_threshold:
        config.assistant_confidence_threshold = params.assistant_confidence_threshold
    if params.max_ngram_size:
        config.max_ngram_size = params.max_ngram_size
    if params.grammar is not None:
        config.structured_output_config = openvino_genai.StructuredOutputConfig(grammar=params.grammar)
    elif params.triggered is not None:
        config.structured_output_config = _structural_tags(params.triggered)
    config.validate()
    return config


def _structural_tags(triggered: TriggeredGrammar) -> openvino_genai.StructuredOutputConfig:
    """Free text until a trigger, each tag held to its grammar (xgrammar's triggered tags).

    Like a grammar, a structure xgrammar refuses fails inside `step()` and stops the pipeline
    (measured on 2026.4.1: empty triggers, a tag whose begin matches no trigger or two, an EBNF
    without `root`), so the service writes only structures that hold by construction
    (`service.tool_formats.base.CallBlock`: one trigger, the tag beginning with it exactly)."""
    config = openvino_genai.StructuredOutputConfig
    tags = [config.Tag(tag.begin, config.EBNF(tag.grammar), tag.end) for tag in triggered.tags]
    return config(
        structural_tags_config=config.TriggeredTags(
            list(triggered.triggers),
            tags,
            at_least_one=triggered.at_least_one,
            stop_after_first=triggered.stop_after_first,
        )
    )
