"""OpenAI completions on the engine: one engine request per prompt, all of them or none.

A prompt is text or token ids (`prompt: [1, 2, 3]`); a list of prompts may mix both. Validation
that needs the graph (limits) happens here and in `sampling` and `constraints`; validation that
needs the tokenizer (context length, token ids in the vocabulary) happens in the engine process.
Responses are built by `completion_output`. Chat completions are planned in `chat`.
"""

from __future__ import annotations

import msgspec

from appliance.engine import EngineClient, RequestStream, TextPrompt, TokenPrompt
from appliance.errors import InvalidRequest
from appliance.protocol.openai import CompletionRequest
from appliance.service.completion_output import completion, completion_chunks
from appliance.service.constraints import constrained_output
from appliance.service.field_policy import COMPLETIONS, STREAM_OPTIONS, check_fields
from appliance.service.images import check_prompt_text
from appliance.service.prompt_limits import MAX_PROMPTS, check_prompt, check_token_ids
from appliance.service.sampling import sampling_params

__all__ = ["completion", "completion_chunks", "open_completion"]


async def open_completion(
    engine: EngineClient,
    request: CompletionRequest,
    *,
    logprob_values_optional: bool = False,
    stop_param: str = "stop",
) -> list[RequestStream]:
    """Submit one engine request per prompt; all of them or none (see `sampling_params` for
    `logprob_values_optional` and `stop_param`)."""
    check_fields(request, COMPLETIONS)
    check_fields(request.stream_options, STREAM_OPTIONS, "stream_options")
    prompts = _prompts(request, engine)
    if request.logprobs:
        raise InvalidRequest(
            "logprobs above 0 is not supported: the engine reports only the chosen token's log "
            "probability, not alternatives (logprobs=0 gives those).",
            param="logprobs",
            code="unsupported_parameter",
        )
    if request.echo and request.logprobs is not None:
        raise InvalidRequest(
            "echo together with logprobs is not supported: the prompt's tokens would need log "
            "probabilities too. Send echo or logprobs.",
            param="echo",
            code="unsupported_parameter",
        )
    params = sampling_params(
        engine.graph,
        request,
        max_tokens=request.max_tokens,
        max_tokens_param="max_tokens",
        logprobs=request.logprobs is not None,
        logprob_values_optional=logprob_values_optional,
        grammar=await constrained_output(request, engine.graph),
        stop_param=stop_param,
    )
    if request.echo:
        params = msgspec.structs.replace(params, echo=True)
    opened: list[RequestStream] = []
    try:
        for param, prompt in prompts:
            try:
                opened.append(await engine.submit(prompt, params))
            except InvalidRequest as exc:
                # The engine names "prompt"; in a list, the element is the one to fix.
                if exc.param == "prompt":
                    exc.param = param
                raise
    except BaseException:
        for stream in opened:
            stream.cancel()
        raise
    return opened


def _prompts(request: CompletionRequest, engine: EngineClient) -> list[tuple[str, TextPrompt | TokenPrompt]]:
    """The request's prompts for the engine, each with the `param` that names it, checked against
    the bounds that need no tokenizer (`prompt_limits`)."""
    prompt = request.prompt
    if isinstance(prompt, str):
        return [("prompt", _prompt(prompt, engine, "prompt"))]
    token_ids = [item for item in prompt if isinstance(item, int)]
    if len(token_ids) == len(prompt):
        return [("prompt", _prompt(token_ids, engine, "prompt"))]
    if token_ids:
        raise InvalidRequest(
            "prompt mixes token ids with other prompts: send one prompt as a list of token ids, or a "
            "list of prompts, each a string or a list of token ids.",
            param="prompt",
        )
    if len(prompt) > MAX_PROMPTS:
        raise InvalidRequest(
            f"Too many prompts: {len(prompt)}; at most {MAX_PROMPTS} per request.",
            param="prompt",
            code="array_above_max_length",
        )
    items = [(f"prompt[{index}]", item) for index, item in enumerate(prompt) if not isinstance(item, int)]
    return [(param, _prompt(item, engine, param)) for param, item in items]


def _prompt(item: str | list[int], engine: EngineClient, param: str) -> TextPrompt | TokenPrompt:
    if isinstance(item, str):
        check_prompt(item, engine.graph, engine.max_context, param)
        if engine.graph.accepts_images:
            check_prompt_text(item, param)
        return TextPrompt(text=item)
    if not item:
        raise InvalidRequest("A prompt of token ids is empty: send at least one token id.", param=param)
    if engine.graph.accepts_images:
        # The vision pipelines tokenize a prompt string themselves (and place images by its tags).
        raise InvalidRequest(
            "This model's vision pipeline takes prompts as text: send the prompt as a string.",
            param=param,
            code="unsupported_parameter",
        )
    check_token_ids(item, engine.max_context, param)
    return TokenPrompt(ids=item)
