"""`appliance export`: a Hugging Face model (hub id or local folder) -> OpenVINO IR + graph file.

It runs `optimum-cli export openvino` (the supported exporter; it also converts the tokenizer and
detokenizer) with its progress shown, checks the result, and writes `graphs/NAME.toml`. The model
only replaces an existing folder with `--force`, and only once the new one passed its checks.

A `.gguf` file is not converted: `export_gguf.py` checks it and writes a graph file pointing at it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from appliance.graphfiles import DEFAULT_MAX_PROMPT_LEN, DEFAULT_MIN_RESPONSE_LEN, GGUF_SUFFIX, is_npu
from appliance.tools.hub_source import SourceError, hub_environment

__all__ = ["WEIGHT_FORMATS", "ExportError", "export_model", "register", "run"]

WEIGHT_FORMATS = ("int4", "int8", "fp16", "fp32")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_REQUIRED = ("openvino_tokenizer.xml", "openvino_detokenizer.xml")


def register(subcommands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `export` to the parser."""
    parser = subcommands.add_parser(
        "export",
        help="export a Hugging Face model to OpenVINO IR and write its graph file",
        description="Export SOURCE (a Hugging Face model id or a local folder) with optimum-intel into "
        "MODELS/NAME, check that it loads and renders its chat template, and write GRAPHS/NAME.toml. "
        "A .gguf file is served as it is: it is checked and loaded, and the graph points at it.",
    )
    parser.add_argument("source", metavar="SOURCE", help="Hugging Face model id, local model folder or .gguf file")
    parser.add_argument("--name", required=True, help="served model name (and folder name)")
    parser.add_argument("--weight-format", choices=WEIGHT_FORMATS, help="default int8 (not for a .gguf file)")
    parser.add_argument("--models-dir", type=Path, metavar="DIR", help="default ./models (not for a .gguf file)")
    parser.add_argument("--graphs-dir", type=Path, default=Path("graphs"), metavar="DIR", help="default ./graphs")
    parser.add_argument(
        "--device",
        default="CPU",
        help="device written to the graph file (default CPU); NPU also means symmetric int4 weights with "
        "--weight-format int4 and a stateful-pipeline graph",
    )
    parser.add_argument(
        "--max-prompt-len",
        type=int,
        default=DEFAULT_MAX_PROMPT_LEN,
        metavar="N",
        help=f"NPU graphs: longest prompt in tokens (MAX_PROMPT_LEN, default {DEFAULT_MAX_PROMPT_LEN})",
    )
    parser.add_argument("--task", help="optimum task, when it cannot be inferred (e.g. image-text-to-text)")
    parser.add_argument(
        "--trust-remote-code", action="store_true", help="allow the model's own code (trusted repos only)"
    )
    parser.add_argument("--force", action="store_true", help="replace an existing model folder and graph file")
    return parser


def run(args: argparse.Namespace) -> int:
    """Export; 1 with the failed step's reason on stderr."""
    try:
        if args.source.endswith(GGUF_SUFFIX):
            _export_gguf(args)
            return 0
        export_model(
            args.source,
            args.name,
            weight_format=args.weight_format or "int8",
            models_dir=args.models_dir or Path("models"),
            graphs_dir=args.graphs_dir,
            device=args.device,
            task=args.task,
            trust_remote_code=args.trust_remote_code,
            force=args.force,
            max_prompt_len=args.max_prompt_len,
        )
    except ExportError as exc:
        print(f"appliance export: {exc}", file=sys.stderr)
        return 1
    return 0


def _export_gguf(args: argparse.Namespace) -> None:
    from appliance.tools.export_gguf import export_gguf

    flags = {"--weight-format": args.weight_format, "--models-dir": args.models_dir, "--task": args.task}
    flags["--trust-remote-code"] = args.trust_remote_code or None
    given = [flag for flag, value in flags.items() if value is not None]
    if given:
        raise ExportError(
            f"{given[0]} does not apply to a GGUF file: it is served as it is (its own quantization), from where it is"
        )
    if not _NAME.match(args.name):
        raise ExportError(f"--name {args.name!r}: use letters, digits, '.', '_' and '-' (up to 128)")
    export_gguf(
        Path(args.source),
        args.name,
        graphs_dir=args.graphs_dir,
        device=args.device,
        force=args.force,
        max_prompt_len=args.max_prompt_len,
    )


class ExportError(Exception):
    """The export or its checks failed; the message says which step and why."""


def export_model(
    source: str,
    name: str,
    *,
    weight_format: str = "int8",
    models_dir: Path = Path("models"),
    graphs_dir: Path = Path("graphs"),
    device: str = "CPU",
    task: str | None = None,
    trust_remote_code: bool = False,
    force: bool = False,
    max_prompt_len: int = DEFAULT_MAX_PROMPT_LEN,
    log: Callable[[str], None] = print,
) -> Path:
    """Export `source` to `models_dir/name`, check it, write `graphs_dir/name.toml`; returns the graph."""
    if not _NAME.match(name):
        raise ExportError(f"--name {name!r}: use letters, digits, '.', '_' and '-' (up to 128)")
    if weight_format not in WEIGHT_FORMATS:
        raise ExportError(f"--weight-format {weight_format!r}: choose one of {', '.join(WEIGHT_FORMATS)}")
    if max_prompt_len < 1:
        raise ExportError(f"--max-prompt-len {max_prompt_len}: give a positive number of tokens")
    target = models_dir / name
    graph_path = graphs_dir / f"{name}.toml"
    if (target.exists() or graph_path.exists()) and not force:
        raise ExportError(f"{target} or {graph_path} already exists; pass --force to replace them")
    try:
        hub_env = hub_environment(source)
    except SourceError as exc:
        raise ExportError(str(exc)) from exc
    models_dir.mkdir(parents=True, exist_ok=True)
    staging = models_dir / f".{name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    started = time.monotonic()
    try:
        log(f"[1/3] exporting {source} with optimum-intel ({weight_format} weights) ...")
        _run_optimum_cli(source, staging, weight_format, task, trust_remote_code, log, npu=is_npu(device), env=hub_env)
        log("[2/3] checking the exported model ...")
        # Checked on the CPU, which every box has; the graph still names the device asked for.
        log(f"      {check_model(staging, 'CPU')}")
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log(f"[3/3] writing {graph_path}")
    graphs_dir.mkdir(parents=True, exist_ok=True)
    graph_path.write_text(
        render_graph(name, source, target, graphs_dir, device, weight_format, max_prompt_len=max_prompt_len),
        encoding="utf-8",
    )
    log(f"done in {time.monotonic() - started:.0f} s: serve it with `appliance serve --graphs {graphs_dir}`")
    return graph_path


def _run_optimum_cli(
    source: str,
    out: Path,
    weight_format: str,
    task: str | None,
    trust_remote_code: bool,
    log: Callable[[str], None],
    *,
    npu: bool = False,
    env: dict[str, str] | None = None,
) -> None:
    command = [
        sys.executable,
        "-m",
        "optimum.commands.optimum_cli",
        "export",
        "openvino",
        "--model",
        source,
        "--weight-format",
        weight_format,
    ]
    if npu and weight_format == "int4":
        # NPU runs symmetric int4 weights, every layer compressed (OpenVINO's "GenAI on NPU" guide).
        command += ["--sym", "--ratio", "1.0", "--group-size", "128"]
    task = task or _infer_local_task(Path(source))
    if task:
        command += ["--task", task]
    if trust_remote_code:
        command.append("--trust-remote-code")
    command.append(str(out))
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
    )
    tail: list[str] = []
    assert process.stdout is not None
    for line in process.stdout:
        line = line.rstrip()
        if line:
            log(f"      {line}")
            tail = (tail + [line])[-20:]
    if process.wait() != 0:
        raise ExportError(f"optimum-cli export failed (exit {process.returncode}); its last lines:\n" + "\n".join(tail))


def _infer_local_task(folder: Path) -> str | None:
    """optimum cannot infer the task of a local folder; its config.json tells us."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # a hub id, or a folder optimum will report on
    if "vision_config" in config:
        return "image-text-to-text"
    if any(arch.endswith("ForCausalLM") for arch in config.get("architectures", [])):
        return "text-generation-with-past"
    return None


def check_model(model_dir: Path, device: str = "CPU") -> str:
    """The folder has the model IR, both tokenizer IRs and a chat template, and it generates."""
    from appliance.tools.probe import is_vlm_folder, probe_model

    main_ir = "openvino_language_model.xml" if is_vlm_folder(model_dir) else "openvino_model.xml"
    missing = [f for f in (main_ir, *_REQUIRED) if not (model_dir / f).is_file()]
    if missing:
        raise ExportError(f"{model_dir}: the export wrote no {', '.join(missing)}")
    if not _has_chat_template(model_dir):
        raise ExportError(
            f"{model_dir}: the tokenizer has no chat template, so chat requests cannot be rendered; "
            "export a chat/instruct model (or add chat_template to tokenizer_config.json and re-export)"
        )
    try:
        return probe_model(model_dir, device)
    except RuntimeError as exc:
        raise ExportError(str(exc)) from exc


def _has_chat_template(model_dir: Path) -> bool:
    if (model_dir / "chat_template.jinja").is_file():
        return True
    rt_info = (model_dir / "openvino_tokenizer.xml").read_text(encoding="utf-8", errors="replace")
    return "chat_template" in rt_info


def render_graph(
    name: str,
    source: str,
    model_dir: Path,
    graphs_dir: Path,
    device: str,
    weight_format: str,
    *,
    max_prompt_len: int = DEFAULT_MAX_PROMPT_LEN,
    comment: str = "",
) -> str:
    """The graph file's text; `comment` replaces its first line (what it was exported from)."""
    model_path = Path(os.path.relpath(model_dir.resolve(), graphs_dir.resolve())).as_posix()
    head = (
        comment or f"# Exported by `appliance export` from {source} ({weight_format} weights).\n"
    ) + f'name = "{name}"\nmodel_path = "{model_path}"\ndevice = "{device}"\n'
    if is_npu(device):
        return head + (
            "# NPU runs the stateful pipeline: one request at a time (docs/npu.md).\n"
            "\n[plugin_config]\n"
            f"MAX_PROMPT_LEN = {max_prompt_len}     # longest prompt in tokens; longer ones get a 400\n"
            f"MIN_RESPONSE_LEN = {DEFAULT_MIN_RESPONSE_LEN}   # room for the answer beyond it\n"
        )
    return head + ("\n[scheduler]\ncache_size = 2            # GB of KV cache\nmax_num_batched_tokens = 512\n")
