"""What a model's own files say about it, read once when its graph is validated: the context every
prompt bound derives from, what its chat template does with tools, the length of its vectors, the
size it uses of an image and the marker tokens that place one.

The server plans and bounds every request with these before the model's engine has ever run: an
on-demand model's first request, a model changed by a reload and one unloaded when idle are
treated exactly as a loaded one. The engine process reads the same `Graph` (its context is this
context) and reports what it loaded; `EngineClient` logs any difference and keeps the engine's
value (docs/operations.md, "More models than memory"). A value the files do not give falls back to a stated
default, never to "unbounded": `appliance check` and the start-up log show each with its source.

Read with the standard library only (config.json, the tokenizer's rt_info, a GGUF header, the
IR's output shape): the server process imports no OpenVINO for this.
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ElementTree
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from appliance.graphfiles.chat_template import (
    NO_TEMPLATE,
    TemplateTools,
    gguf_chat_template,
    read_chat_template,
    template_tools,
)
from appliance.graphfiles.gguf import DEFAULT_CONTEXT_LENGTH, GGUFError, GGUFHeader, read_header, type_name
from appliance.graphfiles.model_formats import special_tokens
from appliance.graphfiles.model_json import json_object
from appliance.graphfiles.vision import ImageRule, image_rule, native_tokens

__all__ = ["DEFAULT_CONTEXT", "GGUF_TOKENIZER_TOKENS", "ModelFacts", "ModelIdentity", "Task", "read_facts"]

Task = Literal["generate", "embed", "rerank", "transcribe", "synthesize"]
"""What requests a graph's model serves (`Graph.task`); each is declared once, with its frames,
routes and engine, in `engine/messages.TASKS`."""

DEFAULT_CONTEXT = 4096
"""Tokens of context for an IR folder whose config.json gives no `max_position_embeddings`."""
GGUF_TOKENIZER_TOKENS = 8192
"""Tokens the tokenizer OpenVINO GenAI 2026.4.1 builds from a GGUF file gives for any text: its
IR ends in a Minimum with the constant 8192, and `encode(max_length=..., truncation=False)` does not
lift it (checked on SmolLM2's GGUF and on demo-1b's). A longer prompt would reach the model cut to
its first 8,192 tokens without a word, so a GGUF graph serves at most this context: a longer prompt
is then refused (context_length_exceeded) instead of answered from its beginning. An IR export of
the model (`appliance export`) has no such cut."""
_EMBEDDING_OUTPUTS = ("last_hidden_state", "token_embeddings")
"""The IR outputs an embedding pipeline pools, when the model has several."""


@dataclass(frozen=True)
class ModelIdentity:
    """What a model's files say it is; "" where they do not say."""

    architecture: str = ""
    """GGUF `general.architecture`, or config.json's `model_type` (`llama`, `qwen2`, `bert`)."""
    size_label: str = ""
    """GGUF `general.size_label` (`135M`)."""
    quantization: str = ""
    """A GGUF file's most common type among its 2-D weights (`Q4_1`, `F16`)."""
    template: str = ""
    """The chat template's text (generative graphs)."""


@dataclass(frozen=True)
class ModelFacts:
    """One model's facts, each with where it came from (for `appliance check` and the logs)."""

    context: int
    """The model's own context in tokens (embedding and rerank graphs: tokens of one text), which
    `Graph.max_context` serves unless the graph's limits lower it."""
    context_source: str
    template: TemplateTools
    """What the chat template does with tools (generative graphs; nothing for the others)."""
    template_source: str
    embedding_size: int = 0
    """Embedding graphs: the length of the model's vectors (0: the files do not say; the engine
    measures it when it loads)."""
    embedding_size_source: str = ""
    accepts_images: bool = False
    image_rule: ImageRule | None = None
    """Vision graphs: the size the model uses of an image (None: a family not known here)."""
    vision_tokens: tuple[str, ...] | None = ()
    """Vision graphs: the model's own image marker tokens, refused in client text (None: the
    tokenizer's files do not spell them; the engine decodes them once loaded)."""
    identity: ModelIdentity = field(default_factory=ModelIdentity)
    """What the files say the model is (Ollama's `/api/show` and `/api/tags` report it)."""

    def describe(self, served_context: int) -> str:
        """The facts in one line, each with its source; `served_context`: the context the graph
        serves (`Graph.max_context`: its own limit may lower the model's)."""
        own = f"{self.context} tokens ({self.context_source})"
        lowered = served_context != self.context
        parts = [f"context {served_context} tokens, the model's {own}" if lowered else f"context {own}"]
        if self.template_source:
            parts.append(self._template())
        if self.embedding_size_source:
            size = self.embedding_size or "unknown until loaded"
            parts.append(f"vectors of {size} dimensions ({self.embedding_size_source})")
        if self.accepts_images:
            parts.append(f"images scaled to {self.image_rule or 'nothing: sent as they are (a family not known here)'}")
            tokens = (
                " ".join(self.vision_tokens) if self.vision_tokens is not None else "read by the engine once loaded"
            )
            parts.append(f"image markers {tokens or 'none'}")
        return "; ".join(parts)

    def _template(self) -> str:
        tools = self.template
        if not tools.renders_tools:
            does = "ignores tools (the appliance shows them in a system message)"
        elif not tools.renders_tool_calls:
            does = "renders tools, not earlier calls (the appliance writes those as text)"
        else:
            does = "renders tools and tool calls"
        if self.template_source == NO_TEMPLATE.source:
            return f"no chat template in the model's files: {does}"
        teaches = f", tool parser {tools.tool_parser or 'none'} ({tools.tool_reason})"
        reasons = f", reasoning parser {tools.reasoning_parser or 'none'} ({tools.reasoning_reason})"
        return f"chat template ({self.template_source}): {does}{teaches}{reasons}"


def read_facts(
    model_path: Path,
    *,
    gguf: bool,
    task: Task,
    accepts_images: bool,
    max_length: int,
) -> ModelFacts:
    """The facts of the model at `model_path` (an IR folder or a GGUF file), defaults where its
    files say nothing; never raises. `max_length`: an embedding or rerank graph's tokens per text
    (`RetrievalConfig.max_length`, already resolved from its settings and files), a speech graph's
    text tokens per window (`SpeechFacts.text_tokens`), a text-to-speech graph's text positions."""
    if task == "transcribe":
        source = "text tokens per 30 s window: config.json max_target_positions, else Whisper's"
        return ModelFacts(max_length, source, TemplateTools(False, False, None), "")
    if task == "synthesize":
        source = (
            "text tokens the encoder reads: config.json max_text_positions, else SpeechT5's; hibari: phonemes per call"
        )
        return ModelFacts(max_length, source, TemplateTools(False, False, None), "")
    if task != "generate":
        context = (max_length, "per text: [embedding] max_length, else the model's files")
        size = _embedding_size(model_path) if task == "embed" else (0, "")
        identity = ModelIdentity(architecture=_model_type(model_path))
        return ModelFacts(*context, TemplateTools(False, False, None), "", *size, identity=identity)
    if gguf:
        try:
            header: GGUFHeader | None = read_header(model_path)
        except GGUFError:
            header = None
        context = _gguf_context(header)
        template = gguf_chat_template(header.metadata) if header is not None else NO_TEMPLATE
        identity = _gguf_identity(header)
    else:
        context = _folder_context(model_path)
        template = read_chat_template(model_path)
        identity = ModelIdentity(architecture=_model_type(model_path))
    return ModelFacts(
        *context,
        template_tools(template.text, frozenset() if gguf else special_tokens(model_path)),
        template.source,
        accepts_images=accepts_images,
        image_rule=image_rule(model_path) if accepts_images else None,
        vision_tokens=native_tokens(model_path) if accepts_images else (),
        identity=dataclasses.replace(identity, template=template.text),
    )


def _gguf_identity(header: GGUFHeader | None) -> ModelIdentity:
    if header is None:
        return ModelIdentity()
    label = header.metadata.get("general.size_label")
    weights = Counter(type_name(tensor.ggml_type) for tensor in header.tensors if len(tensor.shape) == 2)
    return ModelIdentity(
        architecture=header.architecture,
        size_label=label if isinstance(label, str) else "",
        quantization=weights.most_common(1)[0][0] if weights else "",
    )


def _model_type(model_dir: Path) -> str:
    value = json_object(model_dir / "config.json").get("model_type")
    return value if isinstance(value, str) else ""


def _gguf_context(header: GGUFHeader | None) -> tuple[int, str]:
    """A GGUF file's `<arch>.context_length`, else OpenVINO GenAI's default for it."""
    if header is None:
        return DEFAULT_CONTEXT_LENGTH, "OpenVINO GenAI's GGUF default: the file cannot be read"
    key = f"{header.architecture}.context_length"
    value = header.metadata.get(key)
    if isinstance(value, int) and value > GGUF_TOKENIZER_TOKENS:
        return GGUF_TOKENIZER_TOKENS, (
            f"GGUF {key} is {value}, cut to {GGUF_TOKENIZER_TOKENS}: OpenVINO GenAI's tokenizer for a GGUF "
            "file cuts every text there (export the model to IR for its whole context)"
        )
    if isinstance(value, int) and value > 0:
        return value, f"GGUF {key}"
    return DEFAULT_CONTEXT_LENGTH, f"OpenVINO GenAI's GGUF default: the file gives no {key}"


def _folder_context(model_dir: Path) -> tuple[int, str]:
    """An IR folder's config.json `max_position_embeddings` (a VLM's under `text_config`)."""
    config = json_object(model_dir / "config.json")
    text_config = config.get("text_config")
    value = (text_config if isinstance(text_config, dict) else config).get("max_position_embeddings")
    if isinstance(value, int) and value > 0:
        return value, "config.json max_position_embeddings"
    return DEFAULT_CONTEXT, "the default: config.json gives no max_position_embeddings"


def _embedding_size(model_dir: Path) -> tuple[int, str]:
    """The vectors' length: the last dimension of the IR output the pipeline pools, else
    config.json's hidden_size; (0, ...) when neither says."""
    size = _ir_output_width(model_dir / "openvino_model.xml")
    if size:
        return size, "openvino_model.xml output"
    hidden = json_object(model_dir / "config.json").get("hidden_size")
    if isinstance(hidden, int) and hidden > 0:
        return hidden, "config.json hidden_size"
    return 0, "the model's files do not say"


def _ir_output_width(path: Path) -> int:
    """The static last dimension of the IR's pooled output (0 when dynamic or unreadable)."""
    widths: dict[str, int] = {}
    try:
        for _, element in ElementTree.iterparse(path):
            if element.tag != "layer":
                continue
            if element.get("type") == "Result":
                dims = [dim.text or "" for dim in element.iterfind("input/port/dim")]
                last = dims[-1] if dims else ""
                widths[element.get("output_names", "")] = int(last) if last.isdigit() else 0
            element.clear()  # a layer at a time: an IR's XML runs to megabytes
    except (OSError, ElementTree.ParseError):
        return 0
    named = [width for name, width in widths.items() if any(out in name.split(",") for out in _EMBEDDING_OUTPUTS)]
    candidates = named or list(widths.values())
    return candidates[0] if len(candidates) == 1 or named else 0
