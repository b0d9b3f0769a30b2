"""OpenAI chat completions and completions on top of the engine: requests -> engine requests.

Validation that needs the graph (limits, tool parser) happens here and in the modules this one
calls (sampling, constraints); validation that needs the tokenizer (context length, the chat
template) happens in the engine process before the request reaches the pipeline. Responses are
built by `chat_output` and `completion_output`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from appliance.engine import ChatPrompt, EngineClient, RequestStream, SamplingParams, TextPrompt
from appliance.errors import InvalidRequest
from appliance.media import ImageLoader
from appliance.protocol.openai import (
    AssistantMessage,
    ChatCompletionRequest,
    CompletionRequest,
    DeveloperMessage,
    ImageURLPart,
    Message,
    TextPart,
    ToolMessage,
)
from appliance.service.chat_output import chat_completion, chat_completion_chunks, parses_tool_calls
from appliance.service.completion_output import completion, completion_chunks
from appliance.service.constraints import check_tools, constrained_output
from appliance.service.images import ImageParts, check_prompt_text
from appliance.service.prompt_limits import check_messages
from appliance.service.sampling import sampling_params
from appliance.protocol.tokenize import DetokenizeRequest, DetokenizeResponse, TokenizeRequest, TokenizeResponse
from appliance.service.tools import template_tool, template_tool_calls

__all__ = [
    "chat_completion",
    "chat_completion_chunks",
    "completion",
    "completion_chunks",
    "detokenize",
    "open_chat",
    "open_completion",
    "tokenize",
]


# -- requests -> engine ---------------------------------------------------------------------


def _text(content: str | list, where: str, images: ImageParts) -> str:
    if isinstance(content, str):
        return images.check_text(content, f"{where}.content")
    text = ""
    previous = None
    for index, part in enumerate(content):
        if isinstance(part, ImageURLPart):
            text += images.tag(part, f"{where}.content[{index}]")
        else:
            assert isinstance(part, TextPart)
            # Text parts are joined by newlines; an image tag sits right where its part was.
            text += ("\n" if isinstance(previous, TextPart) else "") + images.check_text(
                part.text, f"{where}.content[{index}].text"
            )
        previous = part
    return text


def _chat_messages(messages: Sequence[Message], images: ImageParts) -> list[dict[str, Any]]:
    rendered = []
    for index, message in enumerate(messages):
        # The OpenAI `developer` role is the newer name of `system`; chat templates know `system`.
        role = "system" if isinstance(message, DeveloperMessage) else type(message).__struct_config__.tag
        if isinstance(message, AssistantMessage) and message.content is None:
            content = ""
        else:
            content = _text(message.content, f"messages[{index}]", images)
        entry: dict[str, Any] = {"role": role, "content": content}
        if isinstance(getattr(message, "name", None), str):
            entry["name"] = message.name
        if isinstance(message, AssistantMessage):
            if message.tool_calls:
                entry["tool_calls"] = template_tool_calls(message.tool_calls, f"messages[{index}]")
            if message.reasoning_content is not None:
                entry["reasoning_content"] = message.reasoning_content
        elif isinstance(message, ToolMessage):
            entry["tool_call_id"] = message.tool_call_id
        rendered.append(entry)
    return rendered


def _template_options(request: ChatCompletionRequest | TokenizeRequest) -> dict[str, Any]:
    """ChatPrompt fields beyond the messages: tools, template variables, how the prompt ends."""
    kwargs = request.chat_template_kwargs or {}
    for key in ("messages", "tools", "add_generation_prompt"):
        if key in kwargs:
            raise InvalidRequest(
                f"chat_template_kwargs cannot set {key!r}; use the request field.", param=f"chat_template_kwargs.{key}"
            )
    reasoning_effort = getattr(request, "reasoning_effort", None)
    if reasoning_effort is not None:
        # OpenAI's field reaches the model the way vLLM passes it: as a chat template variable.
        kwargs = {**kwargs, "reasoning_effort": reasoning_effort}
    add_generation_prompt = request.add_generation_prompt
    if request.continue_final_message:
        if not isinstance(request.messages[-1], AssistantMessage):
            raise InvalidRequest(
                "continue_final_message needs an assistant message last (the text to continue).",
                param="continue_final_message",
            )
        if add_generation_prompt:
            raise InvalidRequest(
                "add_generation_prompt and continue_final_message cannot both be true.", param="add_generation_prompt"
            )
    tools = None
    if request.tools and getattr(request, "tool_choice", None) != "none":
        # With tool_choice "none" the template does not show the tools: the model cannot call one.
        tools = [template_tool(tool) for tool in request.tools]
    return {
        "tools": tools,
        "template_kwargs": kwargs,
        "add_generation_prompt": not request.continue_final_message if add_generation_prompt is None else add_generation_prompt,
        "continue_final_message": request.continue_final_message,
    }


def _chat_params(engine: EngineClient, request: ChatCompletionRequest, grammar: str | None) -> SamplingParams:
    if request.top_logprobs is not None and not request.logprobs:
        raise InvalidRequest("top_logprobs requires logprobs to be true.", param="top_logprobs")
    if request.top_logprobs:
        raise InvalidRequest(
            "top_logprobs above 0 is not supported: the engine reports only the chosen token's log "
            "probability, not alternatives (logprobs=true gives those).",
            param="top_logprobs",
            code="unsupported_parameter",
        )
    uses_completion_tokens = request.max_completion_tokens is not None
    return sampling_params(
        engine.graph,
        request,
        max_tokens=request.max_completion_tokens if uses_completion_tokens else request.max_tokens,
        max_tokens_param="max_completion_tokens" if uses_completion_tokens else "max_tokens",
        logprobs=request.logprobs,
        grammar=grammar,
        # Tool-call markers are often special tokens: keep them in the text the parser reads.
        skip_special_tokens=not parses_tool_calls(request, engine.graph)
        if request.skip_special_tokens is None
        else request.skip_special_tokens,
    )


async def open_chat(
    engine: EngineClient, request: ChatCompletionRequest, media: ImageLoader | None = None
) -> RequestStream:
    """Validate and submit a chat request; returns once the engine accepted it.

    Images are fetched and decoded only once everything else about the request has been checked
    and the engine has admitted it (`media`: the server's loader; None allows data URLs only).
    """
    check_messages(request.messages, engine.graph, engine.max_context, request.tools)
    images = ImageParts(engine.graph, engine.vision_tokens)
    messages = _chat_messages(request.messages, images)
    options = _template_options(request)
    check_tools(request, engine.graph)
    params = _chat_params(engine, request, await constrained_output(request, engine.graph))
    if not images:
        return await engine.submit(ChatPrompt(messages=messages, **options), params)
    media = media or ImageLoader()
    sources = images.sources(media)
    with engine.reserve() as reservation:
        prompt = ChatPrompt(messages=messages, images=await images.load(media, sources), **options)
        return await engine.submit(prompt, params, reservation=reservation)


async def open_completion(
    engine: EngineClient, request: CompletionRequest, *, logprob_values_optional: bool = False
) -> list[RequestStream]:
    """Submit one engine request per prompt; all of them or none (see `sampling_params` for
    `logprob_values_optional`)."""
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
        messages = _chat_messages(request.messages, images)
        if images:
            raise InvalidRequest("Messages with images cannot be tokenized here.", param="messages")
        prompt = ChatPrompt(messages=messages, **_template_options(request))
        add_special_tokens = bool(request.add_special_tokens)
    answer = await engine.tokenize(prompt, add_special_tokens=add_special_tokens)
    return TokenizeResponse(
        count=len(answer.tokens),
        max_model_len=engine.max_context,
        tokens=answer.tokens,
        token_strs=answer.token_strs if request.return_token_strs else None,
    )


async def detokenize(engine: EngineClient, request: DetokenizeRequest) -> DetokenizeResponse:
    return DetokenizeResponse(prompt=await engine.detokenize(request.tokens))
