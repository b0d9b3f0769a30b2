"""A chat completion request, planned once and handed to the routes as one call.

`plan_chat` decides everything about a request before the engine sees it, in the order a client
sees refusals: cheap message limits (`prompt_limits`, before any rendering), the messages for the
chat template with their image parts (`chat_prompt`, `images`), the template options, the tool plan
(`tool_plan`: one rule for whether tools are in play), the output grammar (`constraints`, off the
event loop) and the sampling parameters (`sampling`). `open_chat` submits the plan (images are
fetched only once the engine has admitted the request) and returns a `ChatCall`, from which the
routes take the answer or its chunks without carrying the graph between service calls. A request
with `input_audio` parts is planned twice: first with each recording as empty text, so that every
check needing no audio refuses it before the speech model hears any (`voice`), then with the text
heard (its grammar, if any, is remembered from the first plan).

Validation that needs the tokenizer (context length, the chat template itself) happens in the
engine process before the request reaches the pipeline.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from appliance.engine import ChatPrompt, EngineClient, RequestStream, SamplingParams
from appliance.errors import ApplianceError, InvalidRequest
from appliance.media import ImageLoader
from appliance.protocol.openai import ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, Tool
from appliance.service.chat_output import chat_completion, chat_completion_chunks
from appliance.service.chat_prompt import chat_messages, template_options
from appliance.service.constraints import OutputConstraint, constrained_output
from appliance.service.field_policy import CHAT, STREAM_OPTIONS, check_fields
from appliance.service.images import ImageParts
from appliance.service.pieces import AnswerPiece, answer_pieces
from appliance.service.prompt_limits import check_messages
from appliance.service.sampling import sampling_params
from appliance.service.tool_plan import ToolPlan
from appliance.service.tool_prompt import shown_tools
from appliance.service.voice import Recordings

__all__ = ["ChatCall", "ChatPlan", "FieldNames", "open_chat", "plan_chat"]

FieldNames = Callable[[str], str]
"""A chat request's field path (`messages[2].content[0]`, `max_completion_tokens`) -> the path of
the field it came from in the request a dialect received (`input[1].content[0]`,
`max_output_tokens`): errors name what the client sent."""


def _same(path: str) -> str:
    return path


@dataclass(frozen=True)
class ChatPlan:
    """Everything the engine is asked for, checked: the prompt (images still unloaded), the tool
    plan, the output grammar and the sampling parameters."""

    messages: list[dict[str, Any]]
    options: dict[str, Any]
    """ChatPrompt fields beyond the messages and images (tools included)."""
    tools: ToolPlan
    grammar: OutputConstraint
    params: SamplingParams
    images: ImageParts

    def prompt(self, images: list | None = None) -> ChatPrompt:
        return ChatPrompt(messages=self.messages, **self.options, **({"images": images} if images else {}))


async def plan_chat(engine: EngineClient, request: ChatCompletionRequest, names: FieldNames = _same) -> ChatPlan:
    """The plan of `request` on `engine`'s graph; InvalidRequest (400) naming the field otherwise
    (`names`: see `open_chat`)."""
    graph = engine.graph
    check_fields(request, CHAT)
    check_fields(request.stream_options, STREAM_OPTIONS, "stream_options")
    check_messages(request.messages, graph, engine.max_context, request.tools, request.chat_template_kwargs)
    images = ImageParts(graph, engine.vision_tokens, engine.image_fit)
    messages = chat_messages(request.messages, images)
    options = template_options(request)
    tools = ToolPlan.of(request, graph, engine.tools.parser)
    grammar = await constrained_output(request, graph, tools)
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
    params = sampling_params(
        graph,
        request,
        max_tokens=request.max_completion_tokens if uses_completion_tokens else request.max_tokens,
        max_tokens_param=names("max_completion_tokens" if uses_completion_tokens else "max_tokens"),
        stop_param=names("stop"),
        logprobs=request.logprobs,
        grammar=grammar,
        # Tool-call markers (and harmony's channels) are often special tokens: keep them in the
        # text the parsers read.
        skip_special_tokens=(tools.parser is None and not engine.tools.keeps_special_tokens)
        if request.skip_special_tokens is None
        else request.skip_special_tokens,
    )
    messages, template_tools = shown_tools(messages, tools.template_tools(), engine.tools)
    return ChatPlan(
        messages=messages,
        options={"tools": template_tools, **options},
        tools=tools,
        grammar=grammar,
        params=params,
        images=images,
    )


@dataclass(frozen=True)
class ChatCall:
    """A chat request the engine accepted: its stream, and the answer built from it."""

    request: ChatCompletionRequest
    stream: RequestStream
    reasoning_parser: str | None
    tool_parser: str | None
    tools: tuple[Tool, ...] = ()
    """The tools in play (their schemas type the values of some formats' calls)."""

    def pieces(self) -> AsyncIterator[AnswerPiece]:
        """The answer as typed pieces (reasoning, content, tool calls, finishes, usage last): what
        every dialect renders."""
        return answer_pieces(
            self.stream,
            self.request.n,
            logprobs=bool(self.request.logprobs),
            reasoning_parser=self.reasoning_parser,
            tool_parser=self.tool_parser,
            tools=self.tools,
        )

    def chunks(self) -> AsyncIterator[ChatCompletionChunk]:
        """The streamed answer as OpenAI's chunks."""
        return chat_completion_chunks(self.request, self.pieces())

    async def completion(self) -> ChatCompletion:
        """The whole answer as OpenAI's chat completion."""
        return await chat_completion(self.request, self.pieces())


async def open_chat(
    engine: EngineClient,
    request: ChatCompletionRequest,
    media: ImageLoader | None = None,
    names: FieldNames | None = None,
) -> ChatCall:
    """Plan and submit a chat request; returns once the engine accepted it.

    Recordings (`input_audio` parts) are transcribed only once the request planned without them
    passed every check (`voice.Recordings`), images fetched and decoded only once everything else
    about the request has been checked and the engine has admitted it (`media`: the server's
    loader; None allows data URLs only). A dialect's request made into a chat request gives `names`, so a refusal's `param` is the field
    the client sent (messages name fields only through `param`, or through `names` themselves).
    """
    names = names or _same
    try:
        recordings = Recordings.of(engine, request)
        if recordings is not None:
            # Every check that needs no audio before any is transcribed (seconds of the speech
            # engine per recording): the plan of the request with each recording as empty text.
            await plan_chat(engine, recordings.unheard(), names)
            request = await recordings.heard(media)
        plan = await plan_chat(engine, request, names)
        if not plan.images:
            stream = await engine.submit(plan.prompt(), plan.params)
        else:
            media = media or ImageLoader()
            sources = plan.images.sources(media)
            await engine.ensure_loaded()  # a model loaded on demand takes reservations once ready
            with engine.reserve() as reservation:
                prompt = plan.prompt(await plan.images.load(media, sources))
                stream = await engine.submit(prompt, plan.params, reservation=reservation)
    except ApplianceError as exc:
        if exc.param is not None:
            exc.param = names(exc.param)
        raise
    return ChatCall(
        request=request,
        stream=stream,
        reasoning_parser=engine.tools.reasoning,
        tool_parser=plan.tools.parser,
        tools=plan.tools.tools,
    )
