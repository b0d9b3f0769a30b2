"""The Responses API on the chat plan: a Responses request becomes one chat completion request.

`plan_response` checks what only the Responses API has (its informative and refused fields, the
`text`, `reasoning` and `include` options, stored conversations), turns the input into chat
messages (`input`) and the rest into chat's fields (`max_output_tokens` ->
`max_completion_tokens`, `text.format` -> `response_format`, flat function tools -> chat tools,
`reasoning.effort` -> `reasoning_effort`, the sampling extensions as they are). The route submits
that request through `chat.open_chat`, so message limits, images and their guards, the tool plan,
grammars and their budget, sampling, admission, cancellation and metrics are chat's; an error the
chat plan raises names the Responses field it came from (`ResponsePlan.field_name`).
`ResponseCall` turns the chat call's answer pieces into the response's events (`output`) and
keeps the finished response in the store when the request asked for it (`store`).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

from appliance.dialects.hosted_tools import HostedTools
from appliance.dialects.responses.input import InputMessages, hosted, input_messages
from appliance.dialects.responses.output import ResponseEvents, object_id
from appliance.dialects.responses.store import ResponseStore, StoredResponse
from appliance.errors import InvalidRequest, unsupported
from appliance.protocol.openai import (
    AssistantMessage,
    ChatCompletionRequest,
    FunctionCall,
    FunctionDefinition,
    JSONSchema,
    Message,
    NamedToolChoice,
    ResponseFormatJSONObject,
    ResponseFormatJSONSchema,
    SystemMessage,
    Tool,
    ToolCall,
    ToolChoiceFunction,
)
from appliance.protocol.response_events import ResponseCompleted, ResponseEvent, ResponseIncomplete
from appliance.protocol.responses import (
    AllowedTools,
    FunctionTool,
    FunctionToolChoice,
    NamespaceTool,
    OutputFunctionCall,
    OutputMessage,
    OutputReasoning,
    Response,
    ResponsesRequest,
    ResponseTool,
    TextConfig,
    TextFormatJSONObject,
    TextFormatJSONSchema,
    TextFormatText,
)
from appliance.service.chat import ChatCall
from appliance.service.field_policy import RESPONSES, STREAM_OPTIONS, check_fields, check_stream_options

__all__ = ["ResponseCall", "ResponsePlan", "plan_response"]

LOGPROBS = "message.output_text.logprobs"
_SAMPLING_EXTENSIONS = (
    "frequency_penalty",
    "presence_penalty",
    "seed",
    "stop",
    "top_k",
    "min_p",
    "repetition_penalty",
    "ignore_eos",
    "min_tokens",
    "stop_token_ids",
    "include_stop_str_in_output",
    "skip_special_tokens",
    "structured_outputs",
    "num_assistant_tokens",
    "assistant_confidence_threshold",
    "max_ngram_size",
    "chat_template_kwargs",
)


@dataclass(frozen=True)
class ResponsePlan:
    """A Responses request as the chat request that answers it, and the response's first state."""

    chat: ChatCompletionRequest
    messages: InputMessages
    response: Response
    """Status `in_progress`: the request's settings, echoed."""
    store: bool
    hosted: HostedTools = field(default_factory=HostedTools)
    """The hosted tools taken out of the request's `tools` (`dialects.hosted_tools`)."""

    def field_name(self, param: str) -> str:
        """A chat request's field path as the Responses request names it (`chat.FieldNames`)."""
        name = self.hosted.original_path(self.messages.field_name(param))
        assert name is not None
        return name


def _check_options(body: ResponsesRequest) -> None:
    check_fields(body, RESPONSES)
    check_fields(body.stream_options, STREAM_OPTIONS, "stream_options")
    check_stream_options(body.stream, body.stream_options)
    if body.text is not None and body.text.verbosity not in (None, "medium"):
        raise unsupported(
            "text.verbosity is not supported: no model here is trained to follow it; 'medium' (OpenAI's "
            "default) is accepted.",
            "text.verbosity",
        )
    if body.reasoning is not None and body.reasoning.mode not in (None, "standard"):
        raise unsupported("reasoning.mode is not supported: only 'standard' is served here.", "reasoning.mode")
    if (body.prompt_cache_options or {}).get("prewarm") is True:
        raise unsupported(
            "prompt_cache_options.prewarm is not supported: a response here always generates its output.",
            "prompt_cache_options.prewarm",
        )
    if body.top_logprobs:
        raise unsupported(
            "top_logprobs above 0 is not supported: the engine reports only the chosen token's log "
            f"probability, not alternatives (include '{LOGPROBS}' gives those).",
            "top_logprobs",
        )


def function_tools(tools: list[ResponseTool] | None) -> Iterator[tuple[str, FunctionTool, str | None]]:
    """Every function tool with its path in the request and its namespace (None outside one)."""
    for index, tool in enumerate(tools or ()):
        if isinstance(tool, NamespaceTool):
            for inner, function in enumerate(tool.tools):
                yield f"tools[{index}].tools[{inner}]", function, tool.name
        else:
            yield f"tools[{index}]", tool, None


def _tools(body: ResponsesRequest) -> tuple[list[Tool] | None, object]:
    tools, paths = [], {}
    for path, tool, _ in function_tools(body.tools):
        if tool.name in paths:
            raise InvalidRequest(
                f"The function name '{tool.name}' is offered twice ({paths[tool.name]} too); calls name "
                "functions without their namespace here, so each needs its own name.",
                param=f"{path}.name",
            )
        paths[tool.name] = path
        if tool.defer_loading:  # only a tool search loads it, and there is none here (a hosted tool)
            continue
        tools.append(
            Tool(
                function=FunctionDefinition(
                    name=tool.name, description=tool.description, parameters=tool.parameters, strict=tool.strict
                )
            )
        )
    choice = body.tool_choice
    if isinstance(choice, FunctionToolChoice):
        return tools or None, NamedToolChoice(function=ToolChoiceFunction(name=choice.name))
    if isinstance(choice, AllowedTools):
        names = {tool.function.name for tool in tools}
        allowed = []
        for index, entry in enumerate(choice.tools):
            if hosted(entry):
                continue  # taken out of `tools` too: the model is offered the others
            name = entry.get("name")
            if entry.get("type") != "function" or name not in names:
                raise InvalidRequest(
                    "allowed_tools lists function tools by name, each one of the request's tools.",
                    param=f"tool_choice.tools[{index}]",
                )
            allowed.append(name)
        return [tool for tool in tools if tool.function.name in allowed], choice.mode
    return tools or None, choice


def _response_format(text: TextConfig | None) -> object:
    found = text.format if text is not None else None
    if isinstance(found, TextFormatJSONSchema):
        return ResponseFormatJSONSchema(
            json_schema=JSONSchema(
                name=found.name, description=found.description, schema=found.schema, strict=found.strict
            )
        )
    if isinstance(found, TextFormatJSONObject):
        return ResponseFormatJSONObject()
    return None


def plan_response(
    body: ResponsesRequest, previous: StoredResponse | None = None, hosted_tools: HostedTools | None = None
) -> ResponsePlan:
    """The chat request answering `body`, after `previous` (the stored response it continues);
    `hosted_tools`: those `input.prepare_body` took out of the request's tools."""
    hosted_tools = hosted_tools or HostedTools()
    _check_options(body)
    if body.previous_response_id is not None and previous is None:
        raise InvalidRequest(
            f"Previous response with id '{body.previous_response_id}' not found: it was not stored (store: "
            "false), was deleted, expired or was evicted, or belongs to another API key.",
            param="previous_response_id",
            code="previous_response_not_found",
        )
    messages = input_messages(body.input, list(previous.conversation) if previous else None)
    if body.instructions is not None:
        messages.messages.insert(0, SystemMessage(content=body.instructions))
        messages.paths.insert(0, "instructions")
        messages.call_paths = {(k + 1, m): path for (k, m), path in messages.call_paths.items()}
    tools, tool_choice = _tools(body)
    logprobs = LOGPROBS in (body.include or ())
    chat = ChatCompletionRequest(
        messages=messages.messages,
        model=body.model,
        logprobs=logprobs,
        max_completion_tokens=body.max_output_tokens,
        parallel_tool_calls=body.parallel_tool_calls is not False,
        response_format=_response_format(body.text),
        tool_choice=tool_choice,
        tools=tools,
        reasoning_effort=body.reasoning.effort if body.reasoning is not None else None,
        stream=bool(body.stream),
        temperature=body.temperature,
        top_p=body.top_p,
        user=body.user,
        **{name: getattr(body, name) for name in _SAMPLING_EXTENSIONS},
    )
    store = body.store is not False
    response = Response(
        id=object_id("resp"),
        created_at=int(time.time()),
        status="in_progress",
        instructions=body.instructions,
        max_output_tokens=body.max_output_tokens,
        max_tool_calls=body.max_tool_calls,
        metadata=body.metadata or {},
        model=body.model,
        parallel_tool_calls=body.parallel_tool_calls is not False,
        previous_response_id=body.previous_response_id,
        prompt_cache_key=body.prompt_cache_key,
        reasoning=body.reasoning,
        safety_identifier=body.safety_identifier,
        store=store,
        temperature=body.temperature,
        text=body.text or TextConfig(format=TextFormatText()),
        tool_choice=body.tool_choice or "auto",
        tools=hosted_tools.echo(body.tools or []),
        top_logprobs=body.top_logprobs or 0,
        top_p=body.top_p,
        user=body.user,
    )
    return ResponsePlan(chat=chat, messages=messages, response=response, store=store, hosted=hosted_tools)


def conversation_after(plan: ResponsePlan, response: Response) -> list[Message]:
    """The conversation a follow-up continues: the plan's messages (instructions left out, as
    OpenAI does not carry them over) and the response's output as the assistant's turn."""
    messages = [m for m, path in zip(plan.messages.messages, plan.messages.paths) if path != "instructions"]
    texts, reasoning, calls = [], [], []
    for item in response.output:
        if isinstance(item, OutputMessage):
            texts += [part.text for part in item.content]
        elif isinstance(item, OutputReasoning):
            reasoning += [part.text for part in item.content]
        elif isinstance(item, OutputFunctionCall):
            calls.append(ToolCall(id=item.call_id, function=FunctionCall(name=item.name, arguments=item.arguments)))
    turn = AssistantMessage(
        content="".join(texts) if texts or not calls else None,
        tool_calls=calls or None,
        reasoning_content="".join(reasoning) or None,
    )
    return [*messages, turn]


class ResponseCall:
    """A Responses request the engine accepted: its events, or the whole response."""

    def __init__(self, plan: ResponsePlan, call: ChatCall, store: ResponseStore, owner: str) -> None:
        self._plan = plan
        self._call = call
        self._store = store
        self._owner = owner
        self._events = ResponseEvents(plan.response)

    async def events(self) -> AsyncIterator[ResponseEvent]:
        """The stream's events; the response is stored once complete (or incomplete), before the
        event that says so is sent: a client may send its `previous_response_id` at once."""
        async for event in self._events.stream(self._call.pieces()):
            if isinstance(event, ResponseCompleted | ResponseIncomplete):
                await self._keep()
            yield event

    async def response(self) -> Response:
        """The whole response (an engine failure is raised)."""
        response = await self._events.final(self._call.pieces())
        await self._keep()
        return response

    async def _keep(self) -> None:
        response = self._events.response
        if self._plan.store and response.status in ("completed", "incomplete"):
            await self._store.put(self._owner, response, conversation_after(self._plan, response))
