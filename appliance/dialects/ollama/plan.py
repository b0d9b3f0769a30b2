"""Ollama's chat and generate requests as the core's: a chat completion request, or for `raw`
generation a completion request.

`options` map onto chat's sampling fields (`temperature`, `top_p`, `top_k`, `min_p`, `seed`,
`stop`, `presence_penalty`, `frequency_penalty`; `repeat_penalty` -> `repetition_penalty`;
`num_predict` -> `max_tokens`, -1 and -2 meaning up to the context; `num_ctx` caps the answer, the
context being the graph's); the options with no counterpart are accepted only at their neutral
value (`typical_p`, `tfs_z` 1, `mirostat` 0, `repeat_last_n` -1 or 0) or, for how Ollama loads a
model (threads, GPU layers, memory mapping), without effect. `format` is structured output (`json`:
any object; a schema: that schema), `tools` chat's tools (Ollama has no tool_choice: the model
decides), `think` the template's `enable_thinking` (and a level its `reasoning_effort`), refused on a
graph with no reasoning parser as Ollama refuses it on a model that does not think. An error the
chat plan raises names the Ollama field (`OllamaPlan.field_name`).

The chat request is never a stream (`stream: false`): the answer is rendered from the same pieces
either way, and Ollama's text never holds the stop string (a chat stream keeps it, as OVMS does).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from appliance.dialects.field_paths import renamed
from appliance.dialects.ollama.input import ChatMessages, chat_messages, image_part
from appliance.errors import InvalidRequest, unsupported
from appliance.graphfiles import Graph
from appliance.protocol.ollama import ChatRequest, Format, GenerateRequest, Options, Think, Tool
from appliance.protocol.openai import (
    ChatCompletionRequest,
    CompletionRequest,
    FunctionDefinition,
    JSONSchema,
    ResponseFormatJSONObject,
    ResponseFormatJSONSchema,
    StructuredOutputs,
    SystemMessage,
    TextPart,
    UserMessage,
)
from appliance.protocol.openai import Tool as ChatTool

__all__ = ["KEEP", "UNLOAD", "OllamaPlan", "keep_alive_seconds", "plan_chat", "plan_generate"]

UNLOAD = 0.0
KEEP = math.inf
"""`keep_alive_seconds` of a negative keep_alive: keep the model loaded."""
_GO_DURATION = re.compile(r"^[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+$")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_TERM = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_RENAMED = [
    (re.compile(r"^max_(completion_)?tokens"), "options.num_predict"),
    (re.compile(r"^repetition_penalty"), "options.repeat_penalty"),
    (re.compile(r"^(temperature|top_p|top_k|min_p|seed|stop|presence_penalty|frequency_penalty)\b"), r"options.\1"),
    (re.compile(r"^(response_format|structured_outputs)\b.*"), "format"),
    (re.compile(r"^(chat_template_kwargs|reasoning_effort)\b.*"), "think"),
]
_NEUTRAL = (("typical_p", 1.0), ("tfs_z", 1.0), ("mirostat", 0))


def keep_alive_seconds(value: float | str | None) -> float | None:
    """`keep_alive` in seconds: None when absent, `UNLOAD` (0) to unload, `KEEP` when negative (keep
    loaded). A number is seconds; a string a Go duration (`5m`, `1h30m`, `-1m`) or a number."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text) if len(text) <= 32 else math.nan
        except ValueError:
            if len(text) > 64 or not _GO_DURATION.match(text):
                raise InvalidRequest(
                    f"keep_alive '{value[:64]}' is neither a number of seconds nor a duration such as '5m' or '1h30m'.",
                    param="keep_alive",
                ) from None
            seconds = sum(float(number) * _UNIT_SECONDS[unit] for number, unit in _TERM.findall(text))
            seconds = -seconds if text.startswith("-") else seconds
        if not math.isfinite(seconds):
            raise InvalidRequest("keep_alive must be a finite number of seconds.", param="keep_alive")
        value = seconds
    return KEEP if value < 0 else float(value)


@dataclass(frozen=True)
class OllamaPlan:
    """An Ollama request as the core's request that answers it."""

    chat: ChatCompletionRequest | None = None
    completion: CompletionRequest | None = None
    """Set instead of `chat` for `raw` generation (no chat template)."""
    messages: ChatMessages = field(default_factory=ChatMessages)

    def field_name(self, param: str) -> str:
        """A core request's field path as the Ollama request names it (`chat.FieldNames`)."""
        return renamed(param, _RENAMED) or self.messages.field_name(param)


def _sampling(options: Options | None, graph: Graph) -> dict[str, Any]:
    """The chat fields of `options`, with the checks of those that have no counterpart."""
    if options is None:
        return {"max_tokens": None}
    for name, neutral in _NEUTRAL:
        value = getattr(options, name)
        if value is not None and value != neutral:
            raise unsupported(
                f"{name} is not supported by this engine: send {neutral} (no effect) or leave it out.",
                f"options.{name}",
            )
    penalty = options.repeat_penalty
    if options.repeat_last_n == 0:
        penalty = None  # Ollama's "no repeat window": no repeat penalty
    elif options.repeat_last_n not in (None, -1) and penalty not in (None, 1.0):
        raise unsupported(
            "repeat_last_n other than -1 (the whole context) or 0 (no repeat penalty) is not supported: "
            "the engine's penalties read every token of the prompt and the answer.",
            "options.repeat_last_n",
        )
    max_tokens = options.num_predict
    if max_tokens is not None and max_tokens in (-1, -2):
        max_tokens = None
    elif max_tokens is not None and max_tokens < 1:
        raise InvalidRequest(
            "num_predict must be a number of tokens from 1, or -1 (up to the context).", param="options.num_predict"
        )
    if options.num_ctx is not None and options.num_ctx < graph.max_context:
        cap = min(options.num_ctx, graph.limits.max_tokens_limit)
        max_tokens = cap if max_tokens is None else min(max_tokens, cap)
    return {
        "max_tokens": max_tokens,
        "temperature": options.temperature,
        "top_p": options.top_p,
        "top_k": options.top_k,
        "min_p": options.min_p,
        "seed": options.seed,
        "stop": options.stop or None,
        "presence_penalty": options.presence_penalty,
        "frequency_penalty": options.frequency_penalty,
        "repetition_penalty": penalty,
    }


def _response_format(value: Format | None) -> object:
    if value == "json":
        return ResponseFormatJSONObject()
    if isinstance(value, dict):
        return ResponseFormatJSONSchema(json_schema=JSONSchema(name="format", schema=value))
    return None


def _thinking(think: Think | None, reasoning_parser: str | None) -> dict[str, Any]:
    """The chat fields of `think` on a graph with `reasoning_parser`."""
    if think is None or think is False:
        # Reasoning templates (Qwen3 and kin) read `enable_thinking`; only where the graph parses reasoning.
        return {"chat_template_kwargs": {"enable_thinking": False}} if think is False and reasoning_parser else {}
    if reasoning_parser is None:
        raise unsupported(
            "This model does not think: its graph has no reasoning_parser, so no reasoning can be told apart "
            "from the answer. Leave think out or send false.",
            "think",
        )
    level = {"reasoning_effort": think} if isinstance(think, str) else {}
    return {"chat_template_kwargs": {"enable_thinking": True}, **level}


def _tools(tools: list[Tool] | None) -> list[ChatTool] | None:
    if not tools:
        return None
    return [
        ChatTool(
            function=FunctionDefinition(
                name=tool.function.name, description=tool.function.description, parameters=tool.function.parameters
            )
        )
        for tool in tools
    ]


def plan_chat(body: ChatRequest, graph: Graph, reasoning_parser: str | None) -> OllamaPlan:
    """The chat request answering `body` (with messages) on `graph`."""
    messages = chat_messages(body.messages)
    chat = ChatCompletionRequest(
        messages=messages.messages,
        model=body.model,
        tools=_tools(body.tools),
        response_format=_response_format(body.format),
        logprobs=bool(body.logprobs),
        top_logprobs=body.top_logprobs,
        stream=False,
        **_sampling(body.options, graph),
        **_thinking(body.think, reasoning_parser),
    )
    return OllamaPlan(chat=chat, messages=messages)


def _refuse_set(body: GenerateRequest) -> None:
    if body.template:
        raise unsupported(
            "template is not supported: the model's chat template comes from its files. Send raw: true "
            "with a prompt already templated, or leave template out.",
            "template",
        )
    if body.context:
        raise unsupported(
            "context (Ollama's deprecated conversation memory) is not supported: send the conversation "
            "to /api/chat as messages.",
            "context",
        )
    if body.suffix:
        raise unsupported("suffix (fill-in-the-middle) is not supported by this server.", "suffix")


def plan_generate(body: GenerateRequest, graph: Graph, reasoning_parser: str | None) -> OllamaPlan:
    """The request answering `body` (with a prompt) on `graph`: a chat request whose user message
    is the prompt (after `system`), or with `raw` a completion request of the prompt as it is."""
    _refuse_set(body)
    if body.raw:
        return OllamaPlan(completion=_raw_completion(body, graph))
    messages = ChatMessages()
    if body.system:
        messages.add(SystemMessage(content=body.system), "system", ["system"])
    images = body.images or []
    names = [f"images[{index}]" for index in range(len(images))]
    content = [image_part(image) for image in images] + [TextPart(text=body.prompt)] if images else body.prompt
    messages.add(UserMessage(content=content), "prompt", [*names, "prompt"])
    chat = ChatCompletionRequest(
        messages=messages.messages,
        model=body.model,
        response_format=_response_format(body.format),
        logprobs=bool(body.logprobs),
        top_logprobs=body.top_logprobs,
        stream=False,
        **_sampling(body.options, graph),
        **_thinking(body.think, reasoning_parser),
    )
    return OllamaPlan(chat=chat, messages=messages)


def _raw_completion(body: GenerateRequest, graph: Graph) -> CompletionRequest:
    for name in ("images", "system", "think", "logprobs"):
        if getattr(body, name):
            raise unsupported(
                f"{name} cannot be combined with raw: a raw prompt goes to the model as it is, with no "
                "template to place it.",
                name,
            )
    constraint = None
    if body.format == "json":
        constraint = StructuredOutputs(json={"type": "object"})
    elif isinstance(body.format, dict):
        constraint = StructuredOutputs(json=body.format)
    return CompletionRequest(
        model=body.model,
        prompt=body.prompt,
        structured_outputs=constraint,
        stream=False,
        **_sampling(body.options, graph),
    )
