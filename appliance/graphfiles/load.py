"""Reading graph files: TOML decoded into a `Graph`, with the checks that need the whole file.

Every error names the file and the field path. The checks against what the file points at (model
folders and GGUF files, devices, draft tokenizers) are in `checks.py`.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import msgspec

from appliance.errors import ConfigError, validation_path
from appliance.graphfiles.cpu_properties import check_cpu_properties
from appliance.graphfiles.schema import (
    GGUF_SUFFIX,
    RETRIEVAL_KINDS,
    STATEFUL_PROPERTIES,
    Graph,
    RetrievalSettings,
    SchedulerOverrides,
    SchedulerSettings,
    SpeechSettings,
    TtsSettings,
    is_npu,
)

__all__ = ["duplicate_names", "graph_files", "load_graph", "load_graphs"]

# Plain devices and OpenVINO's virtual devices (AUTO:GPU,CPU / HETERO:GPU,CPU / MULTI:...).
_DEVICE = re.compile(r"^(CPU|GPU(\.\d+)?|NPU(\.\d+)?|(AUTO|HETERO|MULTI)(:[A-Z]+(\.\d+)?(,[A-Z]+(\.\d+)?)*)?)$")


def load_graph(path: Path, *, check_paths: bool = True) -> Graph:
    """Read and validate one graph file; raises ConfigError naming the file and field.

    With `check_paths=False` the model folder need not exist yet (e.g. before `appliance demo`).
    """
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read graph file: {exc.strerror}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    if "source" in raw:
        raise ConfigError(f"{path}: unknown field `source`")
    raw["source"] = str(path)
    try:
        graph = msgspec.convert(raw, Graph)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{path}: {_describe(exc)}") from exc
    if not _DEVICE.match(graph.device):
        raise ConfigError(
            f"{path}: `device` {graph.device!r} is not an OpenVINO device "
            "(CPU, GPU, GPU.1, NPU, AUTO, AUTO:GPU,CPU, HETERO:GPU,CPU, ...)"
        )
    if check_paths:
        _check_model_path(path, graph)
    _check_speculative(path, graph, check_paths=check_paths)
    _check_gguf(path, graph)
    _check_stateful(path, graph)
    _check_plugin_config(path, graph)
    _check_retrieval(path, graph)
    _check_speech(path, graph, check_paths=check_paths)
    _check_tts(path, graph, check_paths=check_paths)
    return graph


def _check_retrieval(path: Path, graph: Graph) -> None:
    if graph.pipeline_kind not in RETRIEVAL_KINDS:
        if graph.embedding != RetrievalSettings():
            raise ConfigError(
                f"{path}: `[embedding]` applies to embedding and rerank graphs only (`pipeline` TEXT_EMBEDDING or TEXT_RERANK)"
            )
        return
    _check_not_generative(path, graph)
    retrieval = graph.retrieval
    if retrieval is not None and graph.pipeline_kind == "TEXT_RERANK" and graph.embedding.dimensions:
        raise ConfigError(f"{path}: `embedding.dimensions` applies to embedding graphs (a reranker gives scores)")
    size = graph.facts.embedding_size
    longer = [dimensions for dimensions in graph.embedding.dimensions if size and dimensions > size]
    if longer:
        raise ConfigError(
            f"{path}: `embedding.dimensions` {longer[0]} is longer than the model's vectors ({size} dimensions, "
            f"from its {graph.facts.embedding_size_source}): only shorter sizes can be cut from them"
        )


def _check_speech(path: Path, graph: Graph, *, check_paths: bool) -> None:
    facts = graph.speech_facts
    if facts is None:
        if graph.speech != SpeechSettings():
            raise ConfigError(f"{path}: `[speech]` applies to speech-to-text graphs only (`pipeline` SPEECH_TO_TEXT)")
        return
    _check_not_generative(path, graph)
    if graph.speech.max_queued_audio_seconds < graph.speech.max_audio_seconds:
        raise ConfigError(
            f"{path}: `speech.max_queued_audio_seconds` ({graph.speech.max_queued_audio_seconds:g}) is below "
            f"`speech.max_audio_seconds` ({graph.speech.max_audio_seconds:g}): a request of the longest audio "
            "could never be taken"
        )
    # Judged from the model's files once they are there (`check_paths=False` reads a graph alone).
    read = (graph.model_dir / "generation_config.json").is_file()
    if graph.speech.word_timestamps and read and not facts.alignment_heads:
        raise ConfigError(
            f"{path}: `speech.word_timestamps` needs the model's alignment heads, which its "
            "generation_config.json does not give (`alignment_heads`)"
        )
    vad_model = graph.vad_model
    if check_paths and vad_model is not None and not vad_model.is_file():
        raise ConfigError(
            f"{path}: `speech.vad_model`: {vad_model} is not a file (silero-vad's silero_vad_16k_sequence.onnx; "
            "remove the key to serve without a voice-activity check)"
        )


def _check_tts(path: Path, graph: Graph, *, check_paths: bool) -> None:
    facts = graph.tts_facts
    if facts is None:
        if graph.tts != TtsSettings():
            raise ConfigError(f"{path}: `[tts]` applies to text-to-speech graphs only (`pipeline` TEXT_TO_SPEECH)")
        return
    _check_not_generative(path, graph)
    voices = graph.voices
    if graph.tts.default_voice is not None and graph.tts.default_voice not in graph.tts.voices:
        raise ConfigError(
            f"{path}: `tts.default_voice` {graph.tts.default_voice!r} is not one of `tts.voices` "
            f"({', '.join(graph.tts.voices) or 'none given'})"
        )
    if facts.family == "hibari":
        _check_hibari_voices(path, graph, check_paths=check_paths)
        return
    if not check_paths:
        return
    size = facts.speaker_embedding_dim * 4
    for name, voice in voices.items():
        if voice is None:
            continue
        if not voice.is_file():
            raise ConfigError(f"{path}: `tts.voices.{name}`: {voice} is not a file")
        if voice.stat().st_size != size:
            raise ConfigError(
                f"{path}: `tts.voices.{name}`: {voice} holds {voice.stat().st_size} bytes; a speaker embedding "
                f"of this model is {facts.speaker_embedding_dim} float32 values ({size} bytes, config.json "
                "speaker_embedding_dim)"
            )


def _check_hibari_voices(path: Path, graph: Graph, *, check_paths: bool) -> None:
    if not graph.tts.voices:
        raise ConfigError(
            f"{path}: a hibari folder's graph names its voices: `[tts.voices]`, each a voice's ONNX model "
            '(e.g. heart = "../models/demo-voice/hibari.onnx")'
        )
    for name, voice in graph.voices.items():
        if voice is None or voice.suffix != ".onnx":
            raise ConfigError(f"{path}: `tts.voices.{name}`: a hibari voice is its ONNX model (a .onnx file)")
        if check_paths and not voice.is_file():
            raise ConfigError(f"{path}: `tts.voices.{name}`: {voice} is not a file")


def _check_not_generative(path: Path, graph: Graph) -> None:
    """An embedding, rerank or speech graph: an IR folder, and no generation settings."""
    if graph.gguf:
        raise ConfigError(
            f"{path}: `pipeline` is {graph.pipeline_kind} but {graph.model_dir} is a GGUF file: OpenVINO GenAI "
            "reads embedding, rerank and speech models from an OpenVINO IR folder (see `appliance export`)"
        )
    generation_only = [
        key
        for key, value, default in (
            ("scheduler", graph.scheduler, SchedulerSettings()),
            ("draft_model_path", graph.draft_model_path, None),
            ("prompt_lookup", graph.prompt_lookup, False),
            ("tool_parser", graph.tool_parser, None),
            ("reasoning_parser", graph.reasoning_parser, None),
            ("speech_model", graph.speech_model, None),
            ("voice_model", graph.voice_model, None),
        )
        if value != default
    ]
    if generation_only:
        raise ConfigError(
            f"{path}: `{generation_only[0]}` applies to generative graphs; this one is {graph.pipeline_kind}"
        )


def _check_model_path(path: Path, graph: Graph) -> None:
    model = graph.model_dir
    if graph.gguf:
        if not model.is_file():
            raise ConfigError(f"{path}: `model_path` {model} is not a file")
    elif model.is_file():
        raise ConfigError(
            f"{path}: `model_path` {model} is a file: give a folder of OpenVINO IR or a GGUF file, whose name "
            f"must end in {GGUF_SUFFIX} (OpenVINO GenAI tells a GGUF file by its extension)"
        )
    elif not model.is_dir():
        raise ConfigError(f"{path}: `model_path` {model} is not a directory")


def _check_gguf(path: Path, graph: Graph) -> None:
    # What the file holds is checked with the other model checks (checks.py); these need only the graph.
    if not graph.gguf:
        if graph.gguf_reader is not None:
            raise ConfigError(f"{path}: `gguf_reader` applies to a GGUF model only (`model_path` naming a .gguf file)")
        return
    if graph.pipeline_kind in ("VLM_CB", "VLM"):
        raise ConfigError(
            f"{path}: `pipeline` is {graph.pipeline} but {graph.model_dir} is a GGUF file, which OpenVINO GenAI "
            "loads as a text model only (use LM_CB, LM or AUTO)"
        )
    if graph.draft_model_path is not None:
        raise ConfigError(
            f"{path}: `draft_model_path` cannot be used with a GGUF model ({graph.model_dir}): the draft must "
            "share the main model's tokenizer, which is checked on the tokenizer files of two OpenVINO IR "
            "folders; use `prompt_lookup = true`, or export both models to OpenVINO IR"
        )


def _check_plugin_config(path: Path, graph: Graph) -> None:
    for name, device, config in (
        ("plugin_config", graph.device, graph.plugin_config),
        ("draft_plugin_config", graph.draft_device or graph.device, graph.draft_plugin_config or {}),
    ):
        if device.upper() == "CPU" and (why := check_cpu_properties(config)):
            raise ConfigError(f"{path}: {why.replace('plugin_config', name, 1)}")


def _check_stateful(path: Path, graph: Graph) -> None:
    # `pipeline` AUTO resolves by looking into the model folder, which may not exist yet: the
    # checks that need the kind only apply once it is known.
    explicit = graph.pipeline in ("LM", "VLM") or (graph.pipeline == "AUTO" and is_npu(graph.device))
    for key in STATEFUL_PROPERTIES:
        value = graph.plugin_config.get(key)
        if value is None:
            continue
        if not explicit:
            raise ConfigError(
                f"{path}: `plugin_config.{key}` applies to the stateful pipeline only (`pipeline` LM "
                "or VLM, or a graph on NPU); continuous batching has no prompt limit of its own"
            )
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{path}: `plugin_config.{key}` must be a positive whole number of tokens")
    if not explicit:
        return
    if graph.assisted is not None:
        raise ConfigError(
            f"{path}: speculative decoding and prompt lookup need continuous batching (`pipeline` LM_CB); "
            "this graph runs the stateful pipeline"
        )
    if graph.scheduler != SchedulerSettings():
        raise ConfigError(
            f"{path}: `[scheduler]` configures continuous batching; this graph runs the stateful "
            "pipeline (one request at a time), which has no scheduler: remove the section"
        )
    if not is_npu(graph.device) and graph.plugin_config.get("ATTENTION_BACKEND", "SDPA") != "SDPA":
        raise ConfigError(f'{path}: the stateful pipeline runs with `plugin_config.ATTENTION_BACKEND` = "SDPA"')


def _check_speculative(path: Path, graph: Graph, *, check_paths: bool) -> None:
    if graph.draft_model_path is not None and graph.prompt_lookup:
        raise ConfigError(
            f"{path}: `draft_model_path` and `prompt_lookup = true` cannot be combined: choose "
            "speculative decoding with a draft model or prompt-lookup decoding"
        )
    if graph.draft_model_path is None:
        overrides = [name for name in ("draft_device", "draft_plugin_config") if getattr(graph, name) is not None]
        if graph.draft_scheduler != SchedulerOverrides():
            overrides.append("draft_scheduler")
        if overrides:
            raise ConfigError(f"{path}: `{overrides[0]}` needs `draft_model_path`")
    if graph.assisted is not None and graph.pipeline_kind == "VLM_CB":
        raise ConfigError(f"{path}: speculative decoding and prompt lookup serve text models only (LM_CB)")
    if graph.draft_device is not None and not _DEVICE.match(graph.draft_device):
        raise ConfigError(f"{path}: `draft_device` {graph.draft_device!r} is not an OpenVINO device")
    draft_dir = graph.draft_dir
    if draft_dir is not None and draft_dir.suffix == GGUF_SUFFIX:
        raise ConfigError(
            f"{path}: `draft_model_path` {draft_dir} is a GGUF file: OpenVINO GenAI reads a draft model "
            "from an OpenVINO IR folder only (openvino_model.xml); export the draft with `appliance export`"
        )
    if check_paths and draft_dir is not None and not draft_dir.is_dir():
        raise ConfigError(f"{path}: `draft_model_path` {draft_dir} is not a directory")


def graph_files(target: Path) -> list[Path]:
    """The graph files `target` names: itself when it is a file, else every `*.toml` in the
    directory, sorted by name (none when it is empty); ConfigError when it does not exist."""
    if target.is_file():
        return [target]
    if not target.is_dir():
        raise ConfigError(f"{target}: no such graph file or graphs directory")
    return sorted(target.glob("*.toml"))


def duplicate_names(graphs: list[Graph]) -> list[ConfigError]:
    """One error per graph whose name or alias an earlier graph already uses."""
    errors = []
    seen: dict[str, str] = {}
    for graph in graphs:
        if graph.name in seen:
            errors.append(
                ConfigError(f"{graph.source}: model name {graph.name!r} is already served by {seen[graph.name]}")
            )
        seen.setdefault(graph.name, graph.source)
    for graph in graphs:
        for alias in graph.aliases:
            if alias in seen:
                errors.append(
                    ConfigError(f"{graph.source}: alias {alias!r} is already a model name or alias in {seen[alias]}")
                )
            seen.setdefault(alias, graph.source)
    return errors


def load_graphs(directory: Path) -> list[Graph]:
    """Every `*.toml` graph in `directory`, sorted by file name; names and aliases must be unique."""
    if not directory.is_dir():
        raise ConfigError(f"{directory}: graphs directory does not exist")
    graphs = [load_graph(path) for path in graph_files(directory)]
    if not graphs:
        raise ConfigError(f"{directory}: no graph files (*.toml) found")
    for error in duplicate_names(graphs):
        raise error
    _check_speech_models(graphs)
    return graphs


def _check_speech_models(graphs: list[Graph]) -> None:
    """Each `speech_model` names a speech-to-text graph of the same directory, each `voice_model`
    a text-to-speech graph."""
    kinds = {name: graph.pipeline_kind for graph in graphs for name in (graph.name, *graph.aliases)}
    for graph in graphs:
        for key, named, kind in (
            ("speech_model", graph.speech_model, "SPEECH_TO_TEXT"),
            ("voice_model", graph.voice_model, "TEXT_TO_SPEECH"),
        ):
            if named is not None and kinds.get(named) != kind:
                what = f"is a {kinds[named]} graph" if named in kinds else "is not served here"
                raise ConfigError(f"{graph.source}: `{key}` {named!r} {what}: name a {kind} graph")


def _describe(exc: msgspec.ValidationError) -> str:
    # msgspec says "... - at `$.scheduler.cache_size`"; lead with the field path, TOML-style.
    text = str(exc)
    reason, field = validation_path(text)
    if reason == text:
        return text
    return f"`{field or '(top level)'}`: {reason}"
