"""What a graph file holds: one served model, as frozen structs.

A graph file names the model, where its OpenVINO IR (or GGUF file) lives, the device, the scheduler settings of its
continuous-batching pipeline, OpenVINO plugin properties, generation defaults and limits. Unknown
keys are errors (a typo must not be silently ignored). See docs/models.md ("Graph files") for the
reference; `load.py` reads and checks the files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import msgspec

from appliance.graphfiles.facts import ModelFacts, Task, read_facts
from appliance.graphfiles.footprint import Footprint, estimate_footprint
from appliance.graphfiles.numbers import FiniteFloat, Int64, NonNegativeInt, PositiveInt
from appliance.graphfiles.retrieval import RetrievalConfig, RetrievalSettings, resolve, retrieval_kind
from appliance.graphfiles.speech import SpeechFacts, SpeechSettings, is_whisper, read_speech_facts
from appliance.graphfiles.tts import OPENAI_INPUT_CHARS, TtsFacts, TtsSettings, is_hibari, is_speecht5, read_tts_facts

__all__ = [
    "GGUF_SUFFIX",
    "STATEFUL_PROPERTIES",
    "GenerationDefaults",
    "Graph",
    "Limits",
    "RETRIEVAL_KINDS",
    "RetrievalSettings",
    "SchedulerSettings",
    "SchedulerOverrides",
    "SpeculativeSettings",
    "SpeechSettings",
    "Task",
    "TtsSettings",
    "is_npu",
]

ModelName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")]
PluginValue = str | Int64 | FiniteFloat | bool
_DAY = 86_400
"""Upper bound of the graph's durations in seconds: TOML can write `inf`, which would disable a timeout."""
GGUF_SUFFIX = ".gguf"
# What optimum-intel writes for a vision-language model's image encoder.
VISION_ENCODER_IR = "openvino_vision_embeddings_model.xml"
# Pillow refuses images above twice its MAX_IMAGE_PIXELS outright.
MAX_IMAGE_PIXELS_CEILING = 178_956_970

# OpenVINO GenAI's NPU pipeline defaults for its static shapes (prompt, and room for the answer).
DEFAULT_MAX_PROMPT_LEN = 1024
DEFAULT_MIN_RESPONSE_LEN = 128
STATEFUL_PROPERTIES = ("MAX_PROMPT_LEN", "MIN_RESPONSE_LEN")
"""plugin_config keys read by the stateful pipeline itself, not by a device plugin."""
RETRIEVAL_KINDS = ("TEXT_EMBEDDING", "TEXT_RERANK")
"""Pipelines that turn text into vectors or scores: nothing is generated."""
PipelineKind = Literal[
    "LM_CB", "VLM_CB", "LM", "VLM", "TEXT_EMBEDDING", "TEXT_RERANK", "SPEECH_TO_TEXT", "TEXT_TO_SPEECH"
]


class _Config(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    pass


class SchedulerSettings(_Config):
    """OpenVINO GenAI `SchedulerConfig` of the model's continuous-batching pipeline."""

    cache_size: NonNegativeInt = 1
    """KV cache size in GB (0: grow on demand)."""
    max_num_seqs: PositiveInt = 256
    max_num_batched_tokens: PositiveInt = 512
    """Prompt and generated tokens one step may compute (OpenVINO GenAI's default: 256). Measured
    on demo-smol (2 CPU cores, 16 streams of 128 + 128 tokens): 512 gave 209 output tokens/s and
    TTFT p50/p99 0.74/3.1 s, 256 gave 184 and 0.72/4.2 s, 2048 gave 196 and 3.1/3.1 s (whole
    prompts in one step hold up every stream)."""
    dynamic_split_fuse: bool = True
    enable_prefix_caching: bool | None = None
    """Keep the KV blocks of earlier prompts for requests that start the same way (a chat's
    history). None: on for text models without a draft model or prompt lookup (measured on
    demo-smol: the 4th turn of a chat 0.14x the time to first token at 1 stream, 0.26x at 4, and
    no cost measurable on prompts that share nothing), off otherwise."""


class GenerationDefaults(_Config):
    """Defaults applied when a request leaves a parameter out."""

    max_tokens: PositiveInt | None = None
    """Output tokens when the request sets none (None: up to the context / max_tokens_limit)."""
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] = 1.0
    top_p: Annotated[float, msgspec.Meta(gt=0, le=1)] = 1.0


class Limits(_Config):
    """Per-model limits enforced before the engine is called."""

    max_tokens_limit: PositiveInt = 4096
    """Largest max_tokens a request may ask for."""
    max_context: NonNegativeInt = 0
    """Prompt + output tokens allowed (0: the model's own context, read from its files when the
    graph is loaded: config.json `max_position_embeddings`, 4096 when it gives none; a GGUF
    file's `<arch>.context_length`, 2048 when it gives none). See `Graph.facts`."""
    max_queued_requests: PositiveInt = 512
    """Requests waiting or running at once; above it requests get 503 with Retry-After."""
    request_timeout_seconds: Annotated[float, msgspec.Meta(ge=0, le=_DAY)] = 0
    """Longest a request may run from submission to its last token; then it is stopped (504, or
    an error event in a stream). 0: no limit."""
    engine_hang_seconds: Annotated[float, msgspec.Meta(ge=1, le=_DAY)] = 120
    """An engine that makes no progress for this long (no step finished, no token generated),
    with or without requests in flight, is hung: it is killed and restarted (its requests end with
    an error). From half this time (at least 2 s) `/health` shows it "stalled" and not ready."""
    engine_degraded_seconds: Annotated[float, msgspec.Meta(ge=0, le=_DAY)] = 5
    """An engine that makes no progress for this long (at least 2 s, at most the "stalled" time)
    shows as "degraded" in `/health` (503, so a balancer sends new requests to other boxes) while
    still admitting requests; it is back to "ready" with its next step. Keep it above the model's
    longest step (a prefill of `max_num_batched_tokens` tokens)."""
    engine_max_rss_mb: NonNegativeInt = 0
    """When the engine process's resident memory passes this, a fresh engine process replaces it
    without dropping requests (OpenVINO GenAI's process grows slowly with traffic). 0: never."""
    best_of_limit: Annotated[int, msgspec.Meta(ge=1, le=128)] = 20
    """Largest `n` and `best_of` (beam width) a request may ask for."""
    max_messages: PositiveInt = 4096
    """Messages one chat request may carry, and content parts plus tool calls over all of them:
    the engine renders every message through the chat template before it can count tokens, so
    many tiny messages stall the model (600,000 took 11 s on one core)."""
    max_prompt_chars: NonNegativeInt = 0
    """Characters of text one prompt may hold, counted before anything is rendered or tokenized:
    every string of a chat request the template sees (names, tool calls, tool definitions and
    template variables included), a completions prompt, an `/invocations` input, a `/tokenize`
    body. Tokenizing runs on the thread that steps the pipeline (about 1 s per MB on 2 cores), so
    every stream of the model waits for it. 0: 32 characters per token of the context."""
    max_stop_sequences: Annotated[int, msgspec.Meta(ge=0, le=64)] = 4
    """Stop strings one request may give (OpenAI allows 4)."""
    max_stop_sequence_chars: Annotated[int, msgspec.Meta(ge=1, le=4096)] = 256
    """Characters of one stop string. Text that may begin a stop string is held back from a
    stream (up to this many characters less one), and where the pipeline matches stop strings
    itself (several sequences on LM_CB) it decodes as many tokens as the longest one has, for
    every sequence at every step (4 of 256 characters, 768 tokens each, with n=4: 1.8 -> 2.3 s
    for 1,500 tokens on demo-chat)."""
    max_images_per_request: NonNegativeInt = 8
    """Images one chat request may carry, over all its messages (vision graphs)."""
    max_image_pixels: Annotated[int, msgspec.Meta(ge=1, le=MAX_IMAGE_PIXELS_CEILING)] = 16_777_216
    """Width x height of one image, read from its header before decoding (default 4096 x 4096)."""
    max_image_pixels_per_request: PositiveInt = 16_777_216
    """Width x height summed over a request's images as they reach the engine, each scaled down
    to the size the model uses (for the model families the appliance knows: Qwen2-VL, LLaVA,
    Gemma 3; others get their images as decoded). The engine holds every pixel of a request
    (3 bytes each) while it encodes the images: 16,777,216 is 48 MB, eight of Qwen2-VL's
    largest (1,003,520 pixels) with room to spare."""
    max_grammar_states: PositiveInt = 256
    """Largest compile cost of a request's output constraint (schema, regex, grammar, forced tool
    call), in character classes the engine matches against the vocabulary, each 128 bytes of
    literal text (enum values, consts, property names, pattern alternatives) and each 8,000 of
    closure work (long runs of optional items, such as hundreds of optional properties) counting
    as one: the engine compiles a new grammar inside its step, so every stream of the model waits
    for it (2-6 ms per class and 6-23 us per literal byte for a 49k-token vocabulary on 2 cores, in
    proportion to the vocabulary's size; each distinct grammar is compiled once)."""
    max_inputs_per_request: PositiveInt = 2048
    """Embedding and rerank graphs: texts one request may carry (`input` items of an embeddings
    request, `documents` of a rerank request; OpenAI's own limit is 2048)."""
    max_request_tokens: PositiveInt = 300_000
    """Embedding and rerank graphs: tokens of one request's texts together, counted by the
    engine's tokenizer before any text is embedded (OpenAI's own limit is 300,000). The engine
    embeds about 10,000 tokens a second on 2 CPU cores (all-MiniLM-L6-v2), so this is a request of
    about 30 s there, while the requests behind it wait."""
    truncate_inputs: bool = False
    """Embedding and rerank graphs: a text longer than the model's `max_length` tokens is cut to
    it (true) or refused with 400 `context_length_exceeded` naming it (false, as OpenAI does)."""
    max_parallel_tool_calls: Annotated[int, msgspec.Meta(ge=1, le=64)] = 8
    """Tool calls one answer may hold when its output is constrained to calls (tool_choice
    "required", or "auto" with a response format) and parallel calls are allowed; a named
    tool_choice or `parallel_tool_calls: false` gives exactly one. A weak model repeats a call
    until max_tokens otherwise."""


class SchedulerOverrides(_Config):
    """`[draft_scheduler]`: settings of the draft model's scheduler that differ from the main's."""

    cache_size: NonNegativeInt | None = None
    max_num_seqs: PositiveInt | None = None
    max_num_batched_tokens: PositiveInt | None = None
    dynamic_split_fuse: bool | None = None
    enable_prefix_caching: bool | None = None


class SpeculativeSettings(_Config):
    """`[speculative]`: per-request defaults of speculative decoding and prompt lookup.

    A request may override them (`num_assistant_tokens`, `assistant_confidence_threshold`,
    `max_ngram_size`); the service enforces the envelope the engine survives (see
    `appliance.service.speculative`).
    """

    num_assistant_tokens: Annotated[int, msgspec.Meta(ge=1, le=16)] = 4
    """Tokens the draft (or the prompt lookup) proposes per step."""
    assistant_confidence_threshold: Annotated[float, msgspec.Meta(gt=0, lt=1)] | None = None
    """Draft graphs: propose while the draft's confidence stays above this (replaces
    num_assistant_tokens as the default when set)."""
    max_ngram_size: Annotated[int, msgspec.Meta(ge=1, le=16)] = 3
    """Prompt lookup: longest n-gram matched against the prompt."""


class Graph(_Config, dict=True):
    """One served model.

    Plain data: where the model folders are, which pipeline serves it (`pipeline` AUTO looks into
    the model folder) and what the model's files say about it (`facts`: its context, chat
    template, vector length, image rule) are resolved once, when the graph is built or decoded,
    not on every access. They are kept out of the fields, so two graphs are equal when their files say the same
    (a reload keeps the engine of an unchanged file, even if its model folder was re-exported).
    """

    name: ModelName
    model_path: str
    """Folder with the OpenVINO IR, or a `.gguf` file (text models), relative to the graph file's
    directory unless absolute."""
    device: str = "CPU"
    pipeline: Literal[
        "AUTO", "LM_CB", "VLM_CB", "LM", "VLM", "TEXT_EMBEDDING", "TEXT_RERANK", "SPEECH_TO_TEXT", "TEXT_TO_SPEECH"
    ] = "AUTO"
    """LM_CB: text model; VLM_CB: vision-language model (images in chat); both run continuous
    batching. LM and VLM: the stateful pipeline, one request at a time (what NPU runs; on CPU and
    GPU it trades throughput for a smaller footprint). TEXT_EMBEDDING: an embedding model
    (`/v1/embeddings`); TEXT_RERANK: a cross-encoder (`/v1/rerank`); SPEECH_TO_TEXT: a Whisper model
    (`/v1/audio/transcriptions`, `/v1/audio/translations`); TEXT_TO_SPEECH: a SpeechT5 model or
    hibari voices (`/v1/audio/speech`). AUTO: TEXT_EMBEDDING when the folder holds sentence-transformers'
    `modules.json`, TEXT_RERANK for a `*ForSequenceClassification` model, SPEECH_TO_TEXT for a
    Whisper model, TEXT_TO_SPEECH for a SpeechT5 model or a hibari folder, VLM when it holds a vision encoder, else LM (always
    LM for a GGUF file); continuous batching except on NPU."""
    description: str = ""
    aliases: tuple[ModelName, ...] = ()
    """Other names requests may use for this model, e.g. the placeholder a client sends when it
    does not ask for a model (Hugging Face's InferenceClient: "tgi", or "dummy" for a URL)."""
    tool_parser: (
        Literal["hermes", "llama3_json", "mistral", "phi4_mini", "qwen3_coder", "glm45", "deepseek_r1", "harmony"]
        | None
    ) = None
    """How the model writes tool calls: hermes (`<tool_call>{...}</tool_call>`, Hermes, Qwen 2.5/3),
    llama3_json (`{"name": ..., "parameters": ...}`), mistral (`[TOOL_CALLS][...]`), phi4_mini
    (`<|tool_call|>[...]<|/tool_call|>`), qwen3_coder (`<tool_call><function=...><parameter=...>`),
    glm45 (`<tool_call>NAME<arg_key>...</arg_key><arg_value>...</arg_value></tool_call>`),
    deepseek_r1 (`<｜tool▁calls▁begin｜>...`), harmony (gpt-oss: `commentary to=functions.NAME`).
    None: the format the chat template (or the tokenizer's tokens) shows, else hermes taught by
    the appliance's own tool prompt (docs/models.md)."""
    reasoning_parser: Literal["think", "harmony"] | None = None
    """think: text inside `<think>...</think>` (the block may open in the prompt) is returned as
    `reasoning_content`; harmony: gpt-oss's `analysis` channel is. None: the format the chat
    template shows, else no reasoning is split out."""
    speech_model: ModelName | None = None
    """A speech-to-text graph served beside this one: the `input_audio` parts of chat messages are
    transcribed by it, and the model reads the text heard. None: audio parts are refused."""
    voice_model: ModelName | None = None
    """A text-to-speech graph served beside this one: a Realtime conversation on this model speaks
    its answers in it (`/v1/realtime`, output modality audio). None: such sessions answer in text."""
    control_tokens_in_messages: Literal["text", "control"] = "text"
    """How the model's control-token strings (`<|im_end|>`, `<|im_start|>`, ...) written in
    messages, tool definitions and template variables are tokenized. text: as the characters they
    are, so a client cannot forge a system turn; control: as control tokens, for trusted clients
    that rely on it. The chat template's own markers are control tokens either way."""
    plugin_config: dict[str, PluginValue] = {}
    """OpenVINO properties for the device, e.g. INFERENCE_PRECISION_HINT, KV_CACHE_PRECISION."""
    scheduler: SchedulerSettings = SchedulerSettings()
    defaults: GenerationDefaults = GenerationDefaults()
    limits: Limits = Limits()
    embedding: RetrievalSettings = RetrievalSettings()
    speech: SpeechSettings = SpeechSettings()
    tts: TtsSettings = TtsSettings()
    draft_model_path: str | None = None
    """Speculative decoding: folder of a draft model exported with the same tokenizer (relative to
    the graph file's directory unless absolute)."""
    draft_device: str | None = None
    """Device of the draft model (default: `device`)."""
    draft_plugin_config: dict[str, PluginValue] | None = None
    """OpenVINO properties of the draft model (default: `plugin_config`)."""
    draft_scheduler: SchedulerOverrides = SchedulerOverrides()
    prompt_lookup: bool = False
    """Prompt-lookup decoding: candidate tokens are copied from n-gram matches in the prompt."""
    speculative: SpeculativeSettings = SpeculativeSettings()
    gguf_reader: Literal["LEGACY", "FRONTEND"] | None = None
    """GGUF files only: which OpenVINO GenAI reader converts the file (the engine process's
    GGUF_READER). None: LEGACY, the default reader (llama, qwen2, qwen3); FRONTEND: OpenVINO's GGUF
    frontend, a preview that reads more architectures."""
    stream_interval_ms: Annotated[float, msgspec.Meta(ge=0, le=1000)] = 5
    """A stream's tokens are sent at most this often, those generated meanwhile merged into one
    chunk (a request's first token and its end go at once). Saves the server a chunk per token
    when steps take under a millisecond; a model whose steps take longer sends every step anyway.
    0: every step's tokens at once."""
    load: Literal["start", "on_demand"] = "start"
    """start: the engine loads when the server starts (ready before /health says 200). on_demand:
    on the model's first request, which waits for it (`load_timeout_seconds`); until then the model
    is listed and available, its engine not running."""
    idle_unload_seconds: Annotated[float, msgspec.Meta(ge=0, le=30 * _DAY)] = 0
    """Stop the engine after this long with no request in flight (0: never); the next request
    loads it again, as an on-demand model's first one does."""
    load_timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=_DAY)] = 600
    """How long a request waits for its model to load on demand before a 503: its turn in the load
    queue under `max_loaded_models` and the load together."""
    source: str = ""
    """The graph file this came from (filled in by the loader)."""

    def __post_init__(self) -> None:
        # `dict=True` gives a frozen struct a __dict__ for values that are not fields.
        model_dir = self._resolve(self.model_path)
        self.__dict__["_model_dir"] = model_dir
        self.__dict__["_draft_dir"] = None if self.draft_model_path is None else self._resolve(self.draft_model_path)
        # OpenVINO GenAI tells a GGUF model from a folder by this extension alone (utils.cpp).
        gguf = model_dir.suffix == GGUF_SUFFIX
        self.__dict__["_gguf"] = gguf
        kind = self.pipeline
        if kind == "AUTO" and not gguf:
            kind = retrieval_kind(model_dir) or _audio_kind(model_dir) or kind
        if kind == "AUTO":
            kind = "VLM" if not gguf and (model_dir / VISION_ENCODER_IR).is_file() else "LM"
            # NPU compiles static shapes and runs only OpenVINO GenAI's stateful pipeline.
            kind = kind if is_npu(self.device) else f"{kind}_CB"
        self.__dict__["_pipeline_kind"] = kind
        retrieval = resolve(self.embedding, model_dir) if kind in RETRIEVAL_KINDS else None
        self.__dict__["_retrieval"] = retrieval
        speech = self.__dict__["_speech"] = read_speech_facts(model_dir) if kind == "SPEECH_TO_TEXT" else None
        tts = self.__dict__["_tts"] = read_tts_facts(model_dir) if kind == "TEXT_TO_SPEECH" else None
        self.__dict__["_facts"] = read_facts(
            model_dir,
            gguf=gguf,
            task=self.task,
            accepts_images=self.accepts_images,
            max_length=(
                retrieval.max_length
                if retrieval is not None
                else speech.text_tokens
                if speech
                else tts.text_positions
                if tts
                else 0
            ),
        )

    @property
    def pipeline_kind(self) -> PipelineKind:
        """The pipeline actually served (AUTO resolved by the model folder and the device)."""
        return self.__dict__["_pipeline_kind"]

    @property
    def task(self) -> Task:
        """What requests the model serves: generation (chat, completions...), embeddings, rerank,
        transcription (and translation)."""
        kinds: dict[str, Task] = {
            "TEXT_EMBEDDING": "embed",
            "TEXT_RERANK": "rerank",
            "SPEECH_TO_TEXT": "transcribe",
            "TEXT_TO_SPEECH": "synthesize",
        }
        return kinds.get(self.pipeline_kind, "generate")

    @property
    def retrieval(self) -> RetrievalConfig | None:
        """Embedding and rerank graphs: `[embedding]` with what it leaves out taken from the model's
        own files (None for generative graphs)."""
        return self.__dict__["_retrieval"]

    @property
    def speech_facts(self) -> SpeechFacts | None:
        """Speech-to-text graphs: what the Whisper model's files say (None for the others)."""
        return self.__dict__["_speech"]

    @property
    def tts_facts(self) -> TtsFacts | None:
        """Text-to-speech graphs: what the model's files say (None for the others)."""
        return self.__dict__["_tts"]

    @property
    def voices(self) -> dict[str, Path | None]:
        """Text-to-speech graphs: each voice's file, resolved (`tts.voices`: a speaker embedding,
        or a hibari voice's ONNX model); `{"default": None}` when the graph names none (SpeechT5
        with no speaker embedding)."""
        if not self.tts.voices:
            return {"default": None}
        return {name: self._resolve(path) for name, path in self.tts.voices.items()}

    @property
    def vad_model(self) -> Path | None:
        """Speech-to-text graphs: the voice-activity model's file, resolved (`speech.vad_model`);
        None when the graph names none (no voice-activity check)."""
        return None if self.speech.vad_model is None else self._resolve(self.speech.vad_model)

    @property
    def default_voice(self) -> str:
        """The voice of a request that names none: `tts.default_voice`, else the first voice."""
        return self.tts.default_voice or next(iter(self.voices))

    @property
    def max_input_chars(self) -> int:
        """Text-to-speech graphs: characters one request may carry (see `TtsSettings`)."""
        if self.tts.max_input_chars is not None:
            return self.tts.max_input_chars
        if self.tts_facts is not None and self.tts_facts.streams:
            return OPENAI_INPUT_CHARS  # spoken a sentence at a time: the call's bound is not the text's
        return min(OPENAI_INPUT_CHARS, self.facts.context - 1)

    @property
    def facts(self) -> ModelFacts:
        """What the model's own files say (its context, what its chat template does with tools,
        its vectors' length, its image rule), read when the graph was built: every bound and plan
        of the server uses these, loaded or not (see `graphfiles.facts`)."""
        return self.__dict__["_facts"]

    @property
    def footprint(self) -> Footprint:
        """The memory its engine process will hold, estimated from the graph and its files (weights,
        KV cache, the engine's overhead; see `graphfiles.footprint`), read once when first asked."""
        footprint = self.__dict__.get("_footprint")
        if footprint is None:
            draft_cache = self.draft_scheduler.cache_size
            footprint = self.__dict__["_footprint"] = estimate_footprint(
                self.model_dir,
                gguf=self.gguf,
                continuous_batching=not self.stateful,
                generates=self.task == "generate",
                cache_size_gb=self.scheduler.cache_size,
                context=self.max_context,
                kv_precision=str(self.plugin_config.get("KV_CACHE_PRECISION", "")) or None,
                draft_dir=self.draft_dir,
                draft_cache_size_gb=self.scheduler.cache_size if draft_cache is None else draft_cache,
                batch_tokens=self.retrieval.max_batch_tokens if self.retrieval is not None else 0,
            )
        return footprint

    @property
    def footprint_bytes(self) -> int:
        """`footprint` in bytes: what `memory_budget` counts for this graph until its engine's
        measured memory is larger."""
        return self.footprint.total_bytes

    @property
    def max_context(self) -> int:
        """Prompt + output tokens one request may use (embedding and rerank graphs: tokens of one
        text): `limits.max_context`, else the model's own (`facts.context`); on NPU at most what
        its KV cache is compiled for. Every prompt bound of the server and the engine's own
        context check use this number, known before the model loads."""
        if self.retrieval is not None or self.task in ("transcribe", "synthesize"):
            return self.facts.context
        context = self.limits.max_context or self.facts.context
        if self.stateful and is_npu(self.device):
            return min(context, (self.max_prompt_len or 0) + self.min_response_len)
        return context

    @property
    def stateful(self) -> bool:
        """One request at a time through the stateful LLMPipeline / VLMPipeline (FIFO queue)."""
        return self.pipeline_kind in ("LM", "VLM")

    @property
    def accepts_images(self) -> bool:
        return self.pipeline_kind in ("VLM_CB", "VLM")

    @property
    def max_images(self) -> int:
        """Images one request may carry: the stateful VLM pipeline takes one."""
        limit = self.limits.max_images_per_request
        return min(limit, 1) if self.stateful else limit

    @property
    def max_prompt_len(self) -> int | None:
        """Stateful graphs: the longest prompt, in tokens (plugin_config MAX_PROMPT_LEN, default
        1024 as in OpenVINO GenAI's NPU pipeline); None for continuous batching."""
        return int(self.plugin_config.get("MAX_PROMPT_LEN", DEFAULT_MAX_PROMPT_LEN)) if self.stateful else None

    @property
    def min_response_len(self) -> int:
        """Stateful graphs on NPU: KV-cache room kept for the answer beyond MAX_PROMPT_LEN."""
        return int(self.plugin_config.get("MIN_RESPONSE_LEN", DEFAULT_MIN_RESPONSE_LEN))

    @property
    def model_dir(self) -> Path:
        """`model_path` resolved (against the graph file's directory when relative): the model
        folder, or the GGUF file when `gguf`."""
        return self.__dict__["_model_dir"]

    @property
    def gguf(self) -> bool:
        """`model_path` names a GGUF file (`*.gguf`), not an OpenVINO IR folder."""
        return self.__dict__["_gguf"]

    @property
    def effective_gguf_reader(self) -> Literal["LEGACY", "FRONTEND"] | None:
        """The GGUF reader the engine loads the file with (`gguf_reader`, default LEGACY); None
        for an OpenVINO IR folder."""
        return (self.gguf_reader or "LEGACY") if self.gguf else None

    @property
    def draft_dir(self) -> Path | None:
        return self.__dict__["_draft_dir"]

    @property
    def prefix_caching(self) -> bool:
        """Whether the scheduler keeps prompt prefixes (`enable_prefix_caching`, or its default)."""
        if self.scheduler.enable_prefix_caching is not None:
            return self.scheduler.enable_prefix_caching
        return self.pipeline_kind == "LM_CB" and self.assisted is None

    @property
    def assisted(self) -> Literal["draft", "lookup"] | None:
        """How candidate tokens are proposed: a draft model, prompt lookup, or not at all."""
        if self.draft_model_path is not None:
            return "draft"
        return "lookup" if self.prompt_lookup else None

    def _resolve(self, value: str) -> Path:
        path = Path(value)
        if not path.is_absolute() and self.source:
            path = Path(self.source).parent / path
        return path.resolve()


def _audio_kind(model_dir: Path) -> PipelineKind | None:
    """SPEECH_TO_TEXT for a Whisper folder, TEXT_TO_SPEECH for a SpeechT5 or hibari one."""
    if is_whisper(model_dir):
        return "SPEECH_TO_TEXT"
    return "TEXT_TO_SPEECH" if is_speecht5(model_dir) or is_hibari(model_dir) else None


def is_npu(device: str) -> bool:
    """NPU or NPU.N (not a virtual device that merely lists it)."""
    return device == "NPU" or device.startswith("NPU.")
