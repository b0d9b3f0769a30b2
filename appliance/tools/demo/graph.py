"""Render and write the TOML serving graph of a demo.

Written by plain string formatting (the standard library reads TOML but does not write it) so the
file keeps its comments and a stable layout.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .recipe_types import DemoRecipe, ModelRef, TomlScalar


def relative_model_path(graphs_dir: Path, models_dir: Path, ref: ModelRef) -> str:
    """Path of `models_dir/<name>` (or of its `file`) relative to the graph's directory, with '/'
    separators.

    Relative so the whole root can be moved or mounted elsewhere without rewriting graphs.
    """
    path = models_dir / ref.name / ref.file if ref.file else models_dir / ref.name
    return Path(os.path.relpath(path, graphs_dir)).as_posix()


def _toml_value(value: TomlScalar, graphs_dir: Path, models_dir: Path) -> str:
    if isinstance(value, ModelRef):
        value = relative_model_path(graphs_dir, models_dir, value)
    if isinstance(value, bool):  # before int: bool is an int subclass
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        # A JSON string is a valid TOML basic string for anything json.dumps emits.
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, tuple):
        return "[" + ", ".join(_toml_value(item, graphs_dir, models_dir) for item in value) + "]"
    raise TypeError(f"cannot write {value!r} to a graph file")


def render_graph(recipe: DemoRecipe, graphs_dir: Path, models_dir: Path) -> str:
    """The text of `graphs_dir/<recipe.name>.toml` (ValueError for a recipe without a graph)."""
    g = recipe.graph
    if g is None:
        raise ValueError(f"{recipe.name} has no serving graph")

    def val(value: TomlScalar) -> str:
        return _toml_value(value, graphs_dir, models_dir)

    lines = [
        f"# Served as {val(recipe.name)}: {g.description}",
        f"name = {val(recipe.name)}",
        f"model_path = {val(recipe.model_ref())}",
        f"device = {val(g.device)}",
        f"pipeline = {val(g.pipeline)}",
        *(f"{key} = {val(value)}" for key, value in g.extra.items()),
    ]
    if g.scheduled:
        lines += [
            "",
            "[scheduler]",
            f"{'cache_size = ' + val(g.cache_size):<26}# GB of KV cache",
            f"max_num_seqs = {val(g.max_num_seqs)}",
            f"max_num_batched_tokens = {val(g.max_num_batched_tokens)}",
            f"dynamic_split_fuse = {val(g.dynamic_split_fuse)}",
            f"enable_prefix_caching = {val(g.enable_prefix_caching)}",
            "",
            "[limits]",
            f"max_tokens_limit = {val(g.max_tokens_limit)}",
        ]
    elif g.limits:
        lines += ["", "[limits]"]
    lines += [f"{key} = {val(value)}" for key, value in g.limits.items()]
    if g.speech:
        lines += ["", "[speech]", *(f"{key} = {val(value)}" for key, value in g.speech.items())]
    if g.tts or g.voices:
        lines += ["", "[tts]", *(f"{key} = {val(value)}" for key, value in g.tts.items())]
    if g.voices:
        lines += ["", "[tts.voices]", *(f"{key} = {val(value)}" for key, value in g.voices.items())]
    if g.plugin_config:
        lines += ["", "[plugin_config]", *(f"{key} = {val(value)}" for key, value in g.plugin_config.items())]
    return "\n".join(lines) + "\n"


def write_graph(recipe: DemoRecipe, graphs_dir: Path, models_dir: Path) -> tuple[Path, bool]:
    """Write the demo's graph if its text changed; returns (path, whether it was written).

    Leaving an identical file alone keeps its mtime, so a server watching graphs does not reload.
    The write goes through a temporary file and a rename so readers never see half a graph.
    """
    graphs_dir.mkdir(parents=True, exist_ok=True)
    path = graphs_dir / f"{recipe.name}.toml"
    text = render_graph(recipe, graphs_dir, models_dir)
    try:
        if path.read_text(encoding="utf-8") == text:
            return path, False
    except FileNotFoundError:
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path, True
