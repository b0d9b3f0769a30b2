"""Build a graph's OpenVINO GenAI pipeline (runs in the engine process)."""

from __future__ import annotations

import os
from pathlib import Path

import openvino_genai

from appliance.graphfiles import STATEFUL_PROPERTIES, Graph, is_npu

__all__ = ["load_pipeline", "load_stateful_pipeline"]


def scheduler_config(graph: Graph) -> openvino_genai.SchedulerConfig:
    settings = graph.scheduler
    scheduler = openvino_genai.SchedulerConfig()
    scheduler.cache_size = settings.cache_size
    scheduler.max_num_seqs = settings.max_num_seqs
    scheduler.max_num_batched_tokens = settings.max_num_batched_tokens
    scheduler.dynamic_split_fuse = settings.dynamic_split_fuse
    scheduler.enable_prefix_caching = graph.prefix_caching
    return scheduler


def load_pipeline(graph: Graph) -> openvino_genai.ContinuousBatchingPipeline:
    """The continuous-batching pipeline the graph describes (compiles the model: seconds to minutes).

    LM_CB and VLM_CB graphs alike: given a vision-language export, the same class loads the image
    encoder too and takes images in `add_request` (see `vlm.py`).
    """
    _select_gguf_reader(graph)
    properties: dict[str, object] = dict(graph.plugin_config)
    if graph.draft_dir is not None:
        properties["draft_model"] = _draft_model(graph, graph.draft_dir)
    elif graph.prompt_lookup:
        properties["prompt_lookup"] = True
    return openvino_genai.ContinuousBatchingPipeline(
        str(graph.model_dir), scheduler_config(graph), graph.device, properties
    )


def _draft_model(graph: Graph, draft_dir: Path) -> object:
    scheduler = scheduler_config(graph)
    for name in graph.draft_scheduler.__struct_fields__:
        value = getattr(graph.draft_scheduler, name)
        if value is not None:
            setattr(scheduler, name, value)
    plugin_config = graph.plugin_config if graph.draft_plugin_config is None else graph.draft_plugin_config
    return openvino_genai.draft_model(
        str(draft_dir), graph.draft_device or graph.device, scheduler_config=scheduler, **plugin_config
    )


def load_stateful_pipeline(graph: Graph) -> openvino_genai.LLMPipeline | openvino_genai.VLMPipeline:
    """The stateful pipeline of an LM or VLM graph: one request at a time, its KV cache kept in
    the model's state. NPU runs nothing else (it reads MAX_PROMPT_LEN / MIN_RESPONSE_LEN to fix its
    static shapes); on CPU and GPU `ATTENTION_BACKEND=SDPA` selects it, and the CPU plugin refuses
    the NPU-only keys, so they stay with the appliance (which enforces MAX_PROMPT_LEN itself)."""
    _select_gguf_reader(graph)
    properties: dict[str, object] = dict(graph.plugin_config)
    if not is_npu(graph.device):
        for key in STATEFUL_PROPERTIES:
            properties.pop(key, None)
        properties["ATTENTION_BACKEND"] = "SDPA"
    pipeline = openvino_genai.VLMPipeline if graph.accepts_images else openvino_genai.LLMPipeline
    return pipeline(str(graph.model_dir), graph.device, **properties)


def _select_gguf_reader(graph: Graph) -> None:
    # OpenVINO GenAI picks its GGUF reader from the environment when it loads the file (its GGUF
    # guide). The engine process serves one model, so this holds for that model only; an inherited
    # value is overridden, so what `checks` verified for the graph's reader is what loads.
    reader = graph.effective_gguf_reader
    if reader is not None:
        os.environ["GGUF_READER"] = reader
