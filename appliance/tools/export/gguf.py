"""`appliance export FILE.gguf`: a GGUF file checked and given a graph file, not converted.

OpenVINO GenAI serves a GGUF file as it is (weights, tokenizer and chat template from the file), and
cannot write a tokenizer IR for one, so there is nothing to convert: the export checks the file as
serving would (its header: `appliance.graphfiles.gguf`, and the graph checks), loads it and
generates, then writes `graphs/NAME.toml` with a `model_path` relative to the graph pointing at the
file where it is. Converting would not start it faster either: building the tokenizer (about 2 s for
a 49k vocabulary) and compiling the model dominate start-up, from a GGUF file or an IR (docs/models.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from appliance.errors import ConfigError
from appliance.graphfiles import DEFAULT_MAX_PROMPT_LEN, load_graph
from appliance.graphfiles.checks import check_model
from appliance.graphfiles.gguf import GGUFError, read_header
from appliance.tools.export.ir import ExportError, render_graph

__all__ = ["export_gguf"]


def export_gguf(
    source: Path,
    name: str,
    *,
    graphs_dir: Path = Path("graphs"),
    device: str = "CPU",
    force: bool = False,
    max_prompt_len: int = DEFAULT_MAX_PROMPT_LEN,
    log: Callable[[str], None] = print,
) -> Path:
    """Check `source` (a .gguf file), load it, and write `graphs_dir/name.toml` pointing at it;
    returns the graph file's path. ExportError says which step failed and why."""
    graph_path = graphs_dir / f"{name}.toml"
    if graph_path.exists() and not force:
        raise ExportError(f"{graph_path} already exists; pass --force to replace it")
    if not source.is_file():
        raise ExportError(f"{source}: no such file")
    log(f"[1/3] reading {source} ...")
    try:
        header = read_header(source)
    except GGUFError as exc:
        raise ExportError(str(exc)) from exc
    counts = ", ".join(f"{kind} x{count}" for kind, count in header.type_counts.items())
    log(f"      GGUF v{header.version}, {header.architecture}, context {header.context_length}, tensors {counts}")
    if not header.metadata.get("tokenizer.chat_template"):
        raise ExportError(
            f"{source}: the file has no chat template (tokenizer.chat_template), so chat requests cannot be "
            "rendered; use a chat/instruct model's GGUF file"
        )
    graphs_dir.mkdir(parents=True, exist_ok=True)
    staging = graphs_dir / f".{name}.toml.partial"
    staging.write_text(
        render_graph(
            name,
            str(source),
            source,
            graphs_dir,
            device,
            "GGUF",
            max_prompt_len=max_prompt_len,
            comment=f"# Written by `appliance export` for {source.name}, served as it is (GGUF: {counts}).\n",
        ),
        encoding="utf-8",
    )
    try:
        log("[2/3] checking it as `appliance serve` would, then loading it and generating ...")
        try:
            check_model(load_graph(staging))
        except ConfigError as exc:
            raise ExportError(str(exc).replace(str(staging), str(graph_path))) from exc
        os.environ["GGUF_READER"] = "LEGACY"
        log(f"      {_probe(source)}")
        log(f"[3/3] writing {graph_path}")
        staging.replace(graph_path)
    finally:
        staging.unlink(missing_ok=True)
    log(f"done: serve it with `appliance serve --graphs {graphs_dir}` (the graph points at {source})")
    return graph_path


def _probe(source: Path) -> str:
    from appliance.tools.export.probe import probe_model

    try:
        return probe_model(source, "CPU")
    except RuntimeError as exc:
        raise ExportError(str(exc)) from exc
