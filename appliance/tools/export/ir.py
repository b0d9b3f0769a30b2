"""A Hugging Face model (hub id or local folder) -> OpenVINO IR + graph file.

It runs `optimum-cli export openvino` (the supported exporter; it also converts the tokenizer and
detokenizer) with its progress shown, checks the result (`probe`), and writes `graphs/NAME.toml`.
The model only replaces an existing folder with `--force`, and only once the new one passed its
checks.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from appliance.graphfiles import DEFAULT_MAX_PROMPT_LEN, DEFAULT_MIN_RESPONSE_LEN, is_npu
from appliance.graphfiles.speech import SPEECH_FILES, is_whisper
from appliance.tools.export.hub_source import SourceError, hub_environment

__all__ = ["WEIGHT_FORMATS", "ExportError", "check_model", "export_model", "render_graph"]

WEIGHT_FORMATS = ("int4", "int8", "fp16", "fp32")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
"""A served model name (and folder name)."""
_REQUIRED = ("openvino_tokenizer.xml", "openvino_detokenizer.xml")
RETRIEVAL_TASKS = {"feature-extraction": "TEXT_EMBEDDING", "text-classification": "TEXT_RERANK"}
"""optimum tasks exported as embedding and rerank models, and the graph kind each is served as."""
# sentence-transformers' description of the model (pooling, normalization, length, prompts): the
# graph's defaults come from them (`graphfiles.retrieval`), so they are copied beside the IR.
_SENTENCE_TRANSFORMERS_FILES = (
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "1_Pooling/config.json",
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
    if not NAME.match(name):
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
    task = task or _infer_local_task(Path(source))
    kind = RETRIEVAL_TASKS.get(task or "")
    try:
        log(f"[1/3] exporting {source} with optimum-intel ({weight_format} weights) ...")
        _run_optimum_cli(source, staging, weight_format, task, trust_remote_code, log, npu=is_npu(device), env=hub_env)
        if kind is not None:
            _copy_sentence_transformers_files(Path(source), staging)
        log("[2/3] checking the exported model ...")
        if kind is None and is_whisper(staging):
            kind = "SPEECH_TO_TEXT"
        # Checked on the CPU, which every box has; the graph still names the device asked for.
        log(f"      {_check(staging, kind)}")
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log(f"[3/3] writing {graph_path}")
    graphs_dir.mkdir(parents=True, exist_ok=True)
    graph_path.write_text(
        render_graph(
            name, source, target, graphs_dir, device, weight_format, max_prompt_len=max_prompt_len, pipeline=kind
        ),
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
    if task:
        command += ["--task", task]
    if task in RETRIEVAL_TASKS:
        # The transformers model, not sentence-transformers' (which folds pooling into the IR):
        # OpenVINO GenAI's pipelines pool and normalize themselves, as the graph says.
        command += ["--library", "transformers"]
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
    if config.get("model_type") == "whisper":
        return "automatic-speech-recognition-with-past"
    architectures = config.get("architectures") or []
    if any(arch.endswith("ForCausalLM") for arch in architectures):
        return "text-generation-with-past"
    if (folder / "modules.json").is_file():
        return "feature-extraction"
    if any(arch.endswith("ForSequenceClassification") for arch in architectures):
        return "text-classification"
    return None


def _copy_sentence_transformers_files(source: Path, out: Path) -> None:
    for file in _SENTENCE_TRANSFORMERS_FILES:
        if (source / file).is_file():
            (out / file).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / file, out / file)


def _check(model_dir: Path, pipeline: str | None) -> str:
    if pipeline == "SPEECH_TO_TEXT":
        return check_speech_model(model_dir)
    return check_retrieval_model(model_dir, pipeline) if pipeline else check_model(model_dir, "CPU")


def check_speech_model(model_dir: Path) -> str:
    """The folder has what WhisperPipeline reads, and it transcribes a second of silence."""
    from appliance.tools.export.probe import probe_speech_model

    missing = [f for f in SPEECH_FILES if not (model_dir / f).is_file()]
    if missing:
        raise ExportError(f"{model_dir}: the export wrote no {', '.join(missing)}")
    try:
        return probe_speech_model(model_dir)
    except RuntimeError as exc:
        raise ExportError(str(exc)) from exc


def check_retrieval_model(model_dir: Path, pipeline: str) -> str:
    """The folder has the model and tokenizer IRs, and embeds (or scores) a text."""
    from appliance.tools.export.probe import probe_retrieval_model

    missing = [f for f in ("openvino_model.xml", "openvino_tokenizer.xml") if not (model_dir / f).is_file()]
    if missing:
        raise ExportError(f"{model_dir}: the export wrote no {', '.join(missing)}")
    try:
        return probe_retrieval_model(model_dir, pipeline)
    except RuntimeError as exc:
        raise ExportError(str(exc)) from exc


def check_model(model_dir: Path, device: str = "CPU") -> str:
    """The folder has the model IR, both tokenizer IRs and a chat template, and it generates."""
    from appliance.tools.export.probe import is_vlm_folder, probe_model

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
    pipeline: str | None = None,
) -> str:
    """The graph file's text; `comment` replaces its first line (what it was exported from);
    `pipeline`: TEXT_EMBEDDING or TEXT_RERANK for an embedding or rerank model, SPEECH_TO_TEXT for
    a Whisper model."""
    model_path = Path(os.path.relpath(model_dir.resolve(), graphs_dir.resolve())).as_posix()
    head = (
        comment or f"# Exported by `appliance export` from {source} ({weight_format} weights).\n"
    ) + f'name = "{name}"\nmodel_path = "{model_path}"\ndevice = "{device}"\n'
    if pipeline == "SPEECH_TO_TEXT":
        return head + (
            f'pipeline = "{pipeline}"\n# Audio bounds and word timestamps: a [speech] section (docs/speech.md).\n'
        )
    if pipeline is not None:
        return head + (
            f'pipeline = "{pipeline}"\n'
            "# Pooling, normalization, instructions and max_length come from the model's own files;\n"
            "# override them in an [embedding] section (docs/models.md).\n"
        )
    if is_npu(device):
        return head + (
            "# NPU runs the stateful pipeline: one request at a time (docs/npu.md).\n"
            "\n[plugin_config]\n"
            f"MAX_PROMPT_LEN = {max_prompt_len}     # longest prompt in tokens; longer ones get a 400\n"
            f"MIN_RESPONSE_LEN = {DEFAULT_MIN_RESPONSE_LEN}   # room for the answer beyond it\n"
        )
    return head + ("\n[scheduler]\ncache_size = 2            # GB of KV cache\nmax_num_batched_tokens = 512\n")
