"""Per-request speculative decoding and prompt-lookup parameters, checked against the graph.

`num_assistant_tokens`, `assistant_confidence_threshold` and `max_ngram_size` arrive at the top
level of a request (as the openai client's `extra_body` sends them). A graph without a draft model
or prompt lookup refuses them; a graph with one fills in its `[speculative]` defaults, because the
engine fails a request that sets neither `num_assistant_tokens` nor the threshold. The envelope
below keeps every request inside what OpenVINO GenAI 2026.4 was measured to survive (docs/speculative.md,
"Speculative decoding").
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.errors import InvalidRequest, unsupported
from appliance.graphfiles import Graph
from appliance.protocol.openai import ChatCompletionRequest, CompletionRequest

__all__ = ["AssistedDecoding", "MAX_SAMPLED_ASSISTANT_TOKENS", "assisted_decoding"]

MAX_SAMPLED_ASSISTANT_TOKENS = 16
"""Largest num_assistant_tokens with sampling (temperature > 0); see docs/speculative.md for the envelope."""

_PARAMS = ("num_assistant_tokens", "assistant_confidence_threshold", "max_ngram_size")


@dataclass(frozen=True)
class AssistedDecoding:
    """What the engine sets on the request's GenerationConfig (0: left unset)."""

    num_assistant_tokens: int = 0
    assistant_confidence_threshold: float = 0.0
    max_ngram_size: int = 0


def assisted_decoding(
    graph: Graph, request: ChatCompletionRequest | CompletionRequest, *, sampling: bool, n: int, best_of: int
) -> AssistedDecoding:
    """The request's assisted-decoding settings on `graph`; InvalidRequest (400) naming the
    parameter for a combination the graph or the engine does not support."""
    given = [name for name in _PARAMS if getattr(request, name) is not None]
    mode = graph.assisted
    if mode is None:
        if given:
            raise unsupported(
                f"{given[0]} needs a model served with speculative decoding (draft_model_path) or "
                f"prompt lookup (prompt_lookup = true); model '{graph.name}' has neither.",
                given[0],
            )
        return AssistedDecoding()
    label = "speculative decoding (a draft model)" if mode == "draft" else "prompt lookup"
    if n > 1 or best_of > 1:
        name = "n" if n > 1 else "best_of"
        raise unsupported(
            f"{name} > 1 cannot be used on model '{graph.name}': OpenVINO GenAI runs neither beam "
            f"search nor parallel sampling with {label}. Send separate requests.",
            name,
        )
    defaults = graph.speculative
    if mode == "lookup":
        if request.assistant_confidence_threshold is not None:
            raise unsupported(
                "assistant_confidence_threshold needs a draft model; prompt lookup proposes a fixed "
                "number of tokens (num_assistant_tokens).",
                "assistant_confidence_threshold",
            )
        tokens = request.num_assistant_tokens or defaults.num_assistant_tokens
        ngram = request.max_ngram_size or defaults.max_ngram_size
        _check_sampled(tokens, sampling)
        return AssistedDecoding(num_assistant_tokens=tokens, max_ngram_size=ngram)
    if request.max_ngram_size is not None:
        raise unsupported("max_ngram_size applies to prompt lookup, not to a draft model.", "max_ngram_size")
    if request.num_assistant_tokens is not None and request.assistant_confidence_threshold is not None:
        raise InvalidRequest(
            "num_assistant_tokens and assistant_confidence_threshold are mutually exclusive: the "
            "draft proposes either a fixed number of tokens or as many as it is confident about.",
            param="assistant_confidence_threshold",
        )
    if request.assistant_confidence_threshold is not None:
        return AssistedDecoding(assistant_confidence_threshold=request.assistant_confidence_threshold)
    if request.num_assistant_tokens is None and defaults.assistant_confidence_threshold is not None:
        return AssistedDecoding(assistant_confidence_threshold=defaults.assistant_confidence_threshold)
    tokens = request.num_assistant_tokens or defaults.num_assistant_tokens
    _check_sampled(tokens, sampling)
    return AssistedDecoding(num_assistant_tokens=tokens)


def _check_sampled(tokens: int, sampling: bool) -> None:
    if sampling and tokens > MAX_SAMPLED_ASSISTANT_TOKENS:
        raise InvalidRequest(
            f"num_assistant_tokens is {tokens}; with sampling (temperature > 0) this engine accepts "
            f"at most {MAX_SAMPLED_ASSISTANT_TOKENS}.",
            param="num_assistant_tokens",
        )
