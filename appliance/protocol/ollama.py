"""Ollama's API (`/api/chat`, `/api/generate`, `/api/embed`, `/api/tags`, ...): requests, answers and
the error body.

Wire names follow Ollama's reference (`docs/api.md` in its repository) and the `ollama` Python
library's types (`ollama/_types.py`). Requests refuse unknown fields, as every dialect here does:
Ollama itself ignores them, but a parameter the appliance does not honour must not be ignored
silently. Every field of Ollama's reference is declared, so a client sending one is answered by
name: honoured, accepted without effect (documented), or refused with a reason
(`dialects.ollama.plan`). Options take the appliance's ranges (`protocol.openai`): a temperature of
7 or a seed beyond 64 bits is a 400 naming `options.temperature`, not a surprise in the engine.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

from appliance.protocol.openai import (
    MAX_STOP_SEQUENCES,
    Identifier,
    Penalty,
    Seed,
    StopSequence,
    Temperature,
    TopP,
)

__all__ = [
    "AnswerFunction",
    "AnswerMessage",
    "AnswerToolCall",
    "ChatRequest",
    "ChatResponse",
    "EmbedRequest",
    "EmbedResponse",
    "EmbeddingsRequest",
    "EmbeddingsResponse",
    "GenerateRequest",
    "GenerateResponse",
    "ListResponse",
    "ListedModel",
    "Logprob",
    "ModelDetails",
    "ModelRequest",
    "OllamaError",
    "Options",
    "ProcessResponse",
    "RunningModel",
    "ShowRequest",
    "ShowResponse",
    "StatusResponse",
    "VersionResponse",
]

Count = Annotated[int, Meta(ge=-(2**31), le=2**31 - 1)]
"""An integer option: 32 bits, as Ollama reads them."""
KeepAlive = float | str
"""Seconds, or a Go duration ("5m", "1h30m", "-1"): negative keeps the model loaded, 0 unloads it."""
Think = bool | Literal["low", "medium", "high"]


class _Request(Struct, kw_only=True, forbid_unknown_fields=True):
    """Unknown fields are refused: a parameter the appliance does not honour must not be ignored."""


class Options(_Request):
    """Ollama's `options` (its Modelfile parameters). Honoured: the sampling and length ones. The
    others are accepted as their neutral value or without effect, each said in docs/ollama.md."""

    # Honoured (mapped onto the chat request).
    temperature: Temperature | None = None
    top_p: TopP | None = None
    top_k: Annotated[int, Meta(ge=-1, le=2**31 - 1)] | None = None
    min_p: Annotated[float, Meta(ge=0, le=1)] | None = None
    num_predict: Count | None = None
    """Tokens to generate; -1 (and -2, "fill the context"): up to the model's context."""
    num_ctx: Annotated[int, Meta(ge=1, le=2**31 - 1)] | None = None
    """The context is the graph's: answers are never longer than this, and a larger value gives no more."""
    stop: Annotated[list[StopSequence], Meta(max_length=MAX_STOP_SEQUENCES)] | None = None
    seed: Seed | None = None
    repeat_penalty: Annotated[float, Meta(gt=0, le=10)] | None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    repeat_last_n: Count | None = None
    """-1 (the whole context, as the engine's penalties read it) or 0 (no repeat penalty); others refused."""
    # Accepted only as their neutral value.
    typical_p: float | None = None
    tfs_z: float | None = None
    mirostat: Count | None = None
    # Without effect: mirostat's settings while it is off, and how the model is loaded (the graph file's).
    mirostat_tau: float | None = None
    mirostat_eta: float | None = None
    penalize_newline: bool | None = None
    num_keep: Count | None = None
    numa: bool | None = None
    num_batch: Count | None = None
    num_gpu: Count | None = None
    main_gpu: Count | None = None
    low_vram: bool | None = None
    f16_kv: bool | None = None
    logits_all: bool | None = None
    vocab_only: bool | None = None
    use_mmap: bool | None = None
    use_mlock: bool | None = None
    num_thread: Count | None = None
    embedding_only: bool | None = None


# --- chat ----------------------------------------------------------------------------------------


class CallFunction(_Request):
    name: str
    arguments: dict[str, Any] = {}
    """An object, as Ollama writes them (not JSON text)."""
    index: int | None = None


class ToolCall(_Request):
    function: CallFunction
    id: str | None = None
    """Sent back by LangChain (OpenAI's shape); Ollama's own calls carry none."""
    type: Literal["function"] | None = None


class Message(_Request):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    images: list[str] | None = None
    """Base64 images (no data URL prefix), for vision models."""
    thinking: str | None = None
    """An assistant turn's reasoning, sent back."""
    tool_calls: list[ToolCall] | None = None
    tool_name: str | None = None
    """A tool message: the tool whose result it holds."""
    tool_call_id: str | None = None
    """A tool message: the call it answers (LangChain sends it; Ollama matches by order)."""


class FunctionSpec(_Request):
    name: Identifier
    description: str | None = None
    parameters: dict[str, Any] | None = None


class Tool(_Request):
    function: FunctionSpec
    type: Literal["function"] = "function"


Format = Literal["", "json"] | dict[str, Any]
"""`json`: any JSON object; an object: a JSON schema the answer follows."""


class _Generation(_Request):
    """What chat and generate share."""

    model: str
    format: Format | None = None
    options: Options | None = None
    stream: bool = True
    keep_alive: KeepAlive | None = None
    think: Think | None = None
    logprobs: bool | None = None
    top_logprobs: Annotated[int, Meta(ge=0, le=20)] | None = None
    truncate: bool | None = None
    """Accepted without effect: a prompt beyond the context is refused (400), never cut."""
    shift: bool | None = None
    """Accepted without effect: the context is never shifted; an answer stops at its end."""


class ChatRequest(_Generation, kw_only=True):
    """`POST /api/chat`. No messages: the model is loaded (or, with `keep_alive: 0`, unloaded)."""

    messages: list[Message] = []
    tools: list[Tool] | None = None


class GenerateRequest(_Generation, kw_only=True):
    """`POST /api/generate`: `prompt` through the chat template (with `system`), or as it is with
    `raw`. No prompt: the model is loaded (or, with `keep_alive: 0`, unloaded)."""

    prompt: str = ""
    suffix: str | None = None
    images: list[str] | None = None
    system: str | None = None
    template: str | None = None
    context: list[int] | None = None
    raw: bool = False


class Logprob(Struct, kw_only=True):
    token: str
    logprob: float
    bytes: list[int] | None = None
    top_logprobs: list[dict[str, Any]] = []


class AnswerFunction(Struct, kw_only=True):
    name: str
    arguments: dict[str, Any]
    index: int


class AnswerToolCall(Struct, kw_only=True):
    id: str
    function: AnswerFunction


class AnswerMessage(Struct, kw_only=True, omit_defaults=True):
    # role and content carry no default so that omit_defaults always writes them.
    role: Literal["assistant"]
    content: str
    thinking: str | None = None
    tool_calls: list[AnswerToolCall] | None = None


class _Answer(Struct, kw_only=True, omit_defaults=True):
    model: str
    created_at: str
    """RFC 3339, UTC."""


class _Final(_Answer, kw_only=True):
    """The counts and durations (nanoseconds) of the last object of an answer."""

    done: bool
    done_reason: str | None = None
    """`stop`, `length`; `load` and `unload` for the requests that only load or unload."""
    total_duration: int | None = None
    load_duration: int | None = None
    """From the request's arrival to the engine accepting it: the model loading, images decoding."""
    prompt_eval_count: int | None = None
    prompt_eval_duration: int | None = None
    eval_count: int | None = None
    eval_duration: int | None = None
    logprobs: list[Logprob] | None = None


class ChatResponse(_Final, kw_only=True):
    message: AnswerMessage


class GenerateResponse(_Final, kw_only=True):
    response: str
    thinking: str | None = None


# --- embeddings ----------------------------------------------------------------------------------


class EmbedRequest(_Request):
    """`POST /api/embed`."""

    model: str
    input: str | list[str] = []
    truncate: bool | None = None
    """true (Ollama's default): a text beyond the model's input is cut where the graph cuts
    (`limits.truncate_inputs`), else refused; false on a graph that cuts: refused."""
    dimensions: Annotated[int, Meta(ge=1)] | None = None
    options: Options | None = None
    """Accepted without effect: an embedding is not sampled."""
    keep_alive: KeepAlive | None = None


class EmbedResponse(Struct, kw_only=True, omit_defaults=True):
    model: str
    embeddings: list[list[float]]
    total_duration: int | None = None
    load_duration: int | None = None
    prompt_eval_count: int | None = None


class EmbeddingsRequest(_Request):
    """`POST /api/embeddings`, the older single-text route."""

    model: str
    prompt: str = ""
    options: Options | None = None
    keep_alive: KeepAlive | None = None


class EmbeddingsResponse(Struct, kw_only=True):
    embedding: list[float]


# --- models --------------------------------------------------------------------------------------


class ModelDetails(Struct, kw_only=True):
    parent_model: str = ""
    format: str
    """`gguf`, or `openvino` for an OpenVINO IR folder."""
    family: str
    families: list[str] | None
    parameter_size: str
    quantization_level: str


class ListedModel(Struct, kw_only=True):
    name: str
    model: str
    modified_at: str
    size: int
    """Bytes of the model's files."""
    digest: str
    details: ModelDetails


class ListResponse(Struct, kw_only=True):
    models: list[ListedModel]


class ShowRequest(_Request):
    """`POST /api/show` (`name` is the older spelling of `model`)."""

    model: str = ""
    name: str = ""
    verbose: bool | None = None
    system: str | None = None
    template: str | None = None
    options: dict[str, Any] | None = None


class ShowResponse(Struct, kw_only=True, omit_defaults=True):
    modelfile: str
    parameters: str
    template: str
    details: ModelDetails
    model_info: dict[str, Any]
    capabilities: list[str]
    """`completion`, `tools`, `vision`, `thinking`, `embedding`."""
    modified_at: str
    license: str | None = None


class RunningModel(Struct, kw_only=True):
    name: str
    model: str
    size: int
    """Bytes the engine process holds, as the memory budget counts them."""
    digest: str
    details: ModelDetails
    expires_at: str
    """When the idle unload takes it (far in the future when nothing will)."""
    size_vram: int
    context_length: int


class ProcessResponse(Struct, kw_only=True):
    models: list[RunningModel]


class VersionResponse(Struct, kw_only=True):
    version: str


class ModelRequest(_Request, rename={"from_": "from"}):
    """The bodies of `/api/pull`, `/api/push`, `/api/create`, `/api/copy` and `/api/delete`, read
    so that their answer can name the model; every field of each is declared."""

    model: str = ""
    name: str = ""
    source: str = ""
    destination: str = ""
    stream: bool | None = None
    insecure: bool | None = None
    username: str | None = None
    password: str | None = None
    # /api/create's
    path: str | None = None
    modelfile: str | None = None
    quantize: str | None = None
    quantization: str | None = None
    files: dict[str, str] | None = None
    adapters: dict[str, str] | None = None
    template: str | None = None
    license: str | list[str] | None = None
    system: str | None = None
    parameters: dict[str, Any] | None = None
    messages: list[dict[str, Any]] | None = None
    from_: str | None = None
    """`from` on the wire (a Python keyword here)."""


class StatusResponse(Struct, kw_only=True):
    status: str


class OllamaError(Struct, kw_only=True):
    """Ollama's error body: `{"error": "..."}` (the `ollama` libraries raise `ResponseError` with it)."""

    error: str
