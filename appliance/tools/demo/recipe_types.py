"""The shape of one demo: `DemoRecipe` (a model spec, its tokenizer and its serving `GraphSpec`).

The model specs are `random_specs` (built here) and `packaged_specs` (from installed packages);
the demos themselves are in `*_recipes` modules by family, gathered in `recipes.RECIPES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .packaged_specs import (
    PackagedEncoderSpec,
    PackagedGGUFSpec,
    PackagedVoiceSpec,
    PackagedWhisperSpec,
)
from .random_specs import CausalLMSpec, GGUFToIRSpec, QwenVLSpec, RandomGGUFSpec, SpeechT5Spec
from .tokenizer_specs import TokenizerSpec

# Bump when the build procedure changes in a way that changes the files it writes: every demo
# model built by an older procedure is then rebuilt.
BUILDER_VERSION = "appliance-demo/1"

# IR kinds have a matching branch in `export.build_model`; PackagedGGUFSpec is `packaged.install`'s,
# RandomGGUFSpec `random_gguf.build`'s and GGUFToIRSpec `gguf_ir.build`'s (called by `builder`).
ModelSpec = (
    CausalLMSpec
    | QwenVLSpec
    | PackagedGGUFSpec
    | PackagedEncoderSpec
    | PackagedWhisperSpec
    | SpeechT5Spec
    | PackagedVoiceSpec
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


LOCAL_NOTE = "built offline by `appliance demo` (outputs are gibberish)."
"""Ends the description of every random-weight demo's graph."""

# Embedding, rerank and speech graphs: no continuous-batching pipeline, the scheduler's values are unused.
UNSCHEDULED = dict(cache_size=0, max_num_seqs=1, max_num_batched_tokens=1, max_tokens_limit=1, scheduled=False)
