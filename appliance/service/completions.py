"""OpenAI completions on the engine: one engine request per prompt, all of them or none.

Validation that needs the graph (limits) happens here and in `sampling` and `constraints`;
validation that needs the tokenizer (context length) happens in the engine process. Responses are
built by `completion_output`. Chat completions are planned in `chat`.
"""

from __future__ import annotations

from appliance.engine import EngineClient, RequestStream, TextPrompt
from appliance.errors import InvalidRequest
from appliance.protocol.openai import CompletionRequest
from appliance.service.completion_output import completion, completion_chunks
from appliance.service.constraints import constrained_output
from appliance.service.field_policy import COMPLETIONS, STREAM_OPTIONS, check_fields
from appliance.service.images import check_prompt_text
from appliance.service.prompt_limits import check_prompt
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
    prompts = [request.prompt] if isinstance(request.prompt, str) else request.prompt
    for index, prompt in enumerate(prompts):
        param = "prompt" if isinstance(request.prompt, str) else f"prompt[{index}]"
        check_prompt(prompt, engine.graph, engine.max_context, param)
        if engine.graph.accepts_images:
            check_prompt_text(prompt, param)
    if request.logprobs:
        raise InvalidRequest(
            "logprobs above 0 is not supported: the engine reports only the chosen token's log "
            "probability, not alternatives (logprobs=0 gives those).",
            param="logprobs",
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
    opened: list[RequestStream] = []
    try:
        for prompt in prompts:
            opened.append(await engine.submit(TextPrompt(text=prompt), params))
    except BaseException:
        for stream in opened:
            stream.cancel()
        raise
    return opened
