"""Request sampling parameters -> the engine's SamplingParams, with the checks that need the graph.

Types and ranges were checked when the body was decoded; here: the floats as the engine reads them
(32 bits: `engine_floats`, a temperature below 1e-5 greedy), the graph's limits and the
combinations the engine cannot honour, each refused with a 400 naming the parameter.
"""

from __future__ import annotations

from appliance.engine import SamplingParams, TriggeredGrammar
from appliance.errors import InvalidRequest, unsupported
from appliance.graphfiles import Graph, Limits
from appliance.protocol.openai import ChatCompletionRequest, CompletionRequest
from appliance.service.engine_floats import decoding_temperature, engine_float
from appliance.service.speculative import assisted_decoding

__all__ = ["sampling_params"]

_SAMPLING_ONLY = ("temperature", "top_p", "top_k", "min_p", "seed")
_ENGINE_FLOATS = (
    "top_p",
    "min_p",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "length_penalty",
    "assistant_confidence_threshold",
)
"""The request's floats the engine reads as 32-bit floats, besides the temperature (`engine_floats`)."""


def sampling_params(
    graph: Graph,
    request: ChatCompletionRequest | CompletionRequest,
    *,
    max_tokens: int | None,
    max_tokens_param: str,
    logprobs: bool = False,
    logprob_values_optional: bool = False,
    grammar: str | TriggeredGrammar | None = None,
    skip_special_tokens: bool | None = None,
    stop_param: str = "stop",
) -> SamplingParams:
    """The engine parameters of a validated request (graph defaults filled in).

    `grammar`: the output's constraint (`constraints.constrained_output`).
    `stop_param`: the stop strings' field in the client's dialect, named in refusals.
    `logprob_values_optional`: the caller takes per-token entries whose log probability is NaN
    where the pipeline computes none (LMI token objects show null), instead of a refusal."""
    limits = graph.limits
    for name in _ENGINE_FLOATS:
        engine_float(getattr(request, name), name)
    if max_tokens is not None and max_tokens > limits.max_tokens_limit:
        raise InvalidRequest(
            f"{max_tokens_param} is {max_tokens}, above this model's limit of {limits.max_tokens_limit}.",
            param=max_tokens_param,
        )
    if max_tokens is None and graph.defaults.max_tokens is not None:
        max_tokens = min(graph.defaults.max_tokens, limits.max_tokens_limit)
    if max_tokens is not None and request.min_tokens > max_tokens:
        raise InvalidRequest(
            f"min_tokens ({request.min_tokens}) is above {max_tokens_param} ({max_tokens}).", param="min_tokens"
        )
    if request.logit_bias:
        raise unsupported(
            "logit_bias is not supported: OpenVINO GenAI's pipeline offers no way to bias logits.", "logit_bias"
        )
    stop = _stop_strings(request, limits, stop_param)
    include_stop = request.include_stop_str_in_output
    if include_stop is None:
        # OVMS's defaults: a stream shows the stop string, a whole answer leaves it out.
        include_stop = request.stream
    elif request.stream and not include_stop:
        raise InvalidRequest(
            "include_stop_str_in_output=false cannot be used with stream=true (as in OVMS): streamed "
            "text is sent before a stop string is recognised.",
            param="include_stop_str_in_output",
        )
    n, best_of = request.n, request.best_of or 1
    for name, value in (("n", n), ("best_of", best_of)):
        if value > limits.best_of_limit:
            raise InvalidRequest(
                f"{name} is {value}, above this model's best_of_limit of {limits.best_of_limit}.", param=name
            )
    temperature = decoding_temperature(
        graph.defaults.temperature if request.temperature is None else request.temperature
    )
    if best_of > 1:
        if best_of < n:
            raise InvalidRequest(f"best_of ({best_of}) must be at least n ({n}).", param="best_of")
        for name in _SAMPLING_ONLY:
            value = getattr(request, name)
            if value is not None and not (name == "temperature" and decoding_temperature(value) == 0):
                raise unsupported(
                    f"{name} cannot be combined with best_of > 1: best_of selects beam search, which does not sample.",
                    name,
                )
    else:
        if request.length_penalty is not None:
            raise unsupported("length_penalty applies to beam search only: set best_of > 1.", "length_penalty")
        if n > 1 and temperature == 0:
            raise unsupported(
                "n > 1 needs sampling (temperature > 0) or beam search (best_of >= n); greedy "
                "decoding would return n identical choices.",
                "n",
            )
    if grammar is not None and (n > 1 or best_of > 1):
        # Measured on openvino_genai 2026.4: with several sequences in one request the grammar
        # matcher is shared between them, and the outputs break the constraint.
        name = "n" if n > 1 else "best_of"
        raise unsupported(
            f"{name} > 1 cannot be combined with structured output (response_format, "
            "structured_outputs, a forced tool_choice) on this engine: send separate requests.",
            name,
        )
    if graph.stateful:
        _check_stateful(graph, n=n, best_of=best_of, logprobs=logprobs and not logprob_values_optional)
    top_k = request.top_k or 0
    assisted = assisted_decoding(graph, request, sampling=best_of == 1 and temperature > 0, n=n, best_of=best_of)
    return SamplingParams(
        max_new_tokens=max_tokens,
        min_new_tokens=request.min_tokens,
        temperature=temperature,
        top_p=graph.defaults.top_p if request.top_p is None else request.top_p,
        top_k=max(top_k, 0),
        min_p=request.min_p or 0.0,
        seed=request.seed,
        frequency_penalty=request.frequency_penalty or 0.0,
        presence_penalty=request.presence_penalty or 0.0,
        repetition_penalty=request.repetition_penalty or 1.0,
        stop=stop,
        stop_token_ids=tuple(request.stop_token_ids or ()),
        include_stop_str_in_output=include_stop,
        ignore_eos=request.ignore_eos,
        n=n,
        best_of=best_of,
        length_penalty=1.0 if request.length_penalty is None else request.length_penalty,
        logprobs=logprobs,
        skip_special_tokens=(request.skip_special_tokens is not False)
        if skip_special_tokens is None
        else skip_special_tokens,
        grammar=grammar if isinstance(grammar, str) else None,
        triggered=grammar if isinstance(grammar, TriggeredGrammar) else None,
        num_assistant_tokens=assisted.num_assistant_tokens,
        assistant_confidence_threshold=assisted.assistant_confidence_threshold,
        max_ngram_size=assisted.max_ngram_size,
    )


def _stop_strings(request: ChatCompletionRequest | CompletionRequest, limits: Limits, param: str) -> tuple[str, ...]:
    stop = (request.stop,) if isinstance(request.stop, str) else tuple(request.stop or ())
    if len(stop) > limits.max_stop_sequences:
        raise InvalidRequest(
            f"{param} has {len(stop)} sequences; this model accepts up to {limits.max_stop_sequences}.", param=param
        )
    longest = max(stop, key=len, default="")
    if len(longest) > limits.max_stop_sequence_chars:
        # Bounds the text held back from a stream and the engine's matching work per step.
        where = param if isinstance(request.stop, str) else f"{param}[{stop.index(longest)}]"
        raise InvalidRequest(
            f"{where} is {len(longest)} characters long; this model accepts stop strings of up to "
            f"{limits.max_stop_sequence_chars} characters (limits.max_stop_sequence_chars).",
            param=param,
        )
    return stop


def _check_stateful(graph: Graph, *, n: int, best_of: int, logprobs: bool) -> None:
    # Measured on openvino_genai 2026.4: the stateful pipeline streams one greedy or sampled
    # sequence only ("streaming is possible only with batch size=1 and only for greedy or
    # multinomial decoding"), and reports no per-token log probabilities.
    where = f"model '{graph.name}' runs the stateful pipeline ({graph.pipeline_kind}, one request at a time)"
    if n > 1 or best_of > 1:
        name = "n" if n > 1 else "best_of"
        raise unsupported(f"{name} > 1 is not supported: {where}, which returns one sequence per request.", name)
    if logprobs:
        raise unsupported(
            f"logprobs are not supported: {where}, which reports no per-token log probabilities.", "logprobs"
        )
