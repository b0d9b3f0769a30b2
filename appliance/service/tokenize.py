"""vLLM's tokenizer routes on the engine: the tokens of a prompt or of chat messages as the chat
template renders them (with the tools shown as a chat request would show them), and the text of
token ids."""

from __future__ import annotations

from appliance.engine import ChatPrompt, EngineClient, TextPrompt
from appliance.errors import InvalidRequest
from appliance.protocol.tokenize import DetokenizeRequest, DetokenizeResponse, TokenizeRequest, TokenizeResponse
from appliance.service.chat_prompt import chat_messages, template_options
from appliance.service.images import ImageParts
from appliance.service.prompt_limits import check_messages, check_prompt, check_token_ids
from appliance.service.tool_plan import ToolPlan
from appliance.service.tool_prompt import shown_tools

__all__ = ["detokenize", "tokenize"]


async def tokenize(engine: EngineClient, request: TokenizeRequest) -> TokenizeResponse:
    """The tokens of a prompt, or of messages as the chat template renders them for a chat request."""
    if (request.prompt is None) == (request.messages is None):
        raise InvalidRequest("Send either prompt or messages.", param="prompt" if request.prompt else "messages")
    if request.prompt is not None:
        check_prompt(request.prompt, engine.graph, engine.max_context, "prompt")
        prompt: ChatPrompt | TextPrompt = TextPrompt(text=request.prompt)
        add_special_tokens = True if request.add_special_tokens is None else request.add_special_tokens
    else:
        check_messages(request.messages, engine.graph, engine.max_context, request.tools, request.chat_template_kwargs)
        images = ImageParts(engine.graph, engine.vision_tokens, engine.image_fit)
        messages = chat_messages(request.messages, images)
        if images:
            raise InvalidRequest("Messages with images cannot be tokenized here.", param="messages")
        options = template_options(request)
        messages, tools = shown_tools(messages, ToolPlan.shown(request.tools).template_tools(), engine.tools)
        prompt = ChatPrompt(messages=messages, tools=tools, **options)
        add_special_tokens = bool(request.add_special_tokens)
    answer = await engine.tokenize(prompt, add_special_tokens=add_special_tokens)
    return TokenizeResponse(
        count=len(answer.tokens),
        max_model_len=engine.max_context,
        tokens=answer.tokens,
        token_strs=answer.token_strs if request.return_token_strs else None,
    )


async def detokenize(engine: EngineClient, request: DetokenizeRequest) -> DetokenizeResponse:
    """The text of token ids (at most one context of them)."""
    check_token_ids(request.tokens, engine.max_context)
    return DetokenizeResponse(prompt=await engine.detokenize(request.tokens))
