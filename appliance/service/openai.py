"""OpenAI completions and vLLM's tokenizer routes on top of the engine: requests -> engine requests.

Validation that needs the graph (limits) happens here and in `sampling` and `constraints`;
validation that needs the tokenizer (context length, the chat template) happens in the engine
process. Responses are built by `completion_output`. Chat completions are planned in `chat`.
"""

from __future__ import annotations

from appliance.engine import ChatPrompt, EngineClient, RequestStream, TextPrompt
from appliance.errors import InvalidRequest
from appliance.protocol.openai import CompletionRequest
from appliance.protocol.tokenize import DetokenizeRequest, DetokenizeResponse, TokenizeRequest, TokenizeResponse
from appliance.service.chat_prompt import chat_messages, template_options
from appliance.service.completion_output import completion, completion_chunks
from appliance.service.constraints import constrained_output
from appliance.service.field_policy import COMPLETIONS, STREAM_OPTIONS, check_fields
from appliance.service.images import ImageParts, check_prompt_text
from appliance.service.prompt_limits import check_messages
from appliance.service.sampling import sampling_params
from appliance.service.tool_plan import ToolPlan

__all__ = ["completion", "completion_chunks", "detokenize", "open_completion", "tokenize"]


async def open_completion(
    engine: EngineClient, request: CompletionRequest, *, logprob_values_optional: bool = False
) -> list[RequestStream]:
    """Submit one engine request per prompt; all of them or none (see `sampling_params` for
    `logprob_values_optional`)."""
    check_fields(request, COMPLETIONS)
    check_fields(request.stream_options, STREAM_OPTIONS, "stream_options")
    prompts = [request.prompt] if isinstance(request.prompt, str) else request.prompt
    if engine.graph.accepts_images:
        for index, prompt in enumerate(prompts):
            check_prompt_text(prompt, "prompt" if isinstance(request.prompt, str) else f"prompt[{index}]")
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


async def tokenize(engine: EngineClient, request: TokenizeRequest) -> TokenizeResponse:
    """The tokens of a prompt, or of messages as the chat template renders them for a chat request."""
    if (request.prompt is None) == (request.messages is None):
        raise InvalidRequest("Send either prompt or messages.", param="prompt" if request.prompt else "messages")
    if request.prompt is not None:
        prompt: ChatPrompt | TextPrompt = TextPrompt(text=request.prompt)
        add_special_tokens = True if request.add_special_tokens is None else request.add_special_tokens
    else:
        check_messages(request.messages, engine.graph, engine.max_context)
        images = ImageParts(engine.graph, engine.vision_tokens)
        messages = chat_messages(request.messages, images)
        if images:
            raise InvalidRequest("Messages with images cannot be tokenized here.", param="messages")
        options = template_options(request)
        prompt = ChatPrompt(messages=messages, tools=ToolPlan.shown(request.tools).template_tools(), **options)
        add_special_tokens = bool(request.add_special_tokens)
    answer = await engine.tokenize(prompt, add_special_tokens=add_special_tokens)
    return TokenizeResponse(
        count=len(answer.tokens),
        max_model_len=engine.max_context,
        tokens=answer.tokens,
        token_strs=answer.token_strs if request.return_token_strs else None,
    )


async def detokenize(engine: EngineClient, request: DetokenizeRequest) -> DetokenizeResponse:
    """The text of token ids, at most one context of them: no text the model read or wrote is
    longer, and the answer grows with the ids (24 MB of one 64-character token's id made a 300 MB
    answer, decoded for 38 s on the thread that steps the pipeline)."""
    if engine.max_context and len(request.tokens) > engine.max_context:
        raise InvalidRequest(
            f"Too many tokens: {len(request.tokens)}; this model's context holds {engine.max_context}.",
            param="tokens",
            code="array_above_max_length",
        )
    return DetokenizeResponse(prompt=await engine.detokenize(request.tokens))
