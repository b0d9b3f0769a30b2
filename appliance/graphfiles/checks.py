"""Graph files checked against what they point at: model folders, GGUF files, devices, draft models.

Run at start-up, by `appliance check`, and by every reload before anything changes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
from pathlib import Path

from appliance.errors import ConfigError
from appliance.graphfiles.gguf import GGUFError, check_loadable, frontend_reader_available, read_header
from appliance.graphfiles.load import duplicate_names, graph_files, load_graph
from appliance.graphfiles.schema import VISION_ENCODER_IR, Graph, is_npu
from appliance.graphfiles.speech import SPEECH_FILES
from appliance.graphfiles.tts import TTS_FILES

__all__ = ["check_device", "check_model", "prepare_graphs", "review_graphs"]

log = logging.getLogger("appliance.reload")

REQUIRED_FILES = ("openvino_tokenizer.xml", "openvino_detokenizer.xml")


def prepare_graphs(target: Path, devices: list[str], *, allow_empty: bool = False) -> list[Graph]:
    """Load and validate every graph file of `target` (a graphs directory, or one graph file), its
    model (folder or GGUF file) and its device (one of `devices`, the names OpenVINO sees:
    `appliance.engine.host.devices.available_devices()`); raises the first ConfigError. A directory
    without graph files is an error unless `allow_empty`."""
    graphs, errors = review_graphs(target, devices)
    if errors:
        raise errors[0]
    if not graphs and not allow_empty:
        raise ConfigError(f"{target}: no graph files (*.toml) found")
    return graphs


def review_graphs(target: Path, devices: list[str]) -> tuple[list[Graph], list[ConfigError]]:
    """The graphs of `target` that pass every check of `prepare_graphs`, and one error per graph
    that does not (plus names used twice): `appliance check` reports them all at once."""
    graphs: list[Graph] = []
    errors: list[ConfigError] = []
    for path in graph_files(target):
        try:
            graph = load_graph(path)
            _check_graph(graph, devices)
        except ConfigError as exc:
            errors.append(exc)
        else:
            graphs.append(graph)
    duplicates = duplicate_names(graphs)
    return graphs, errors + duplicates


def _check_graph(graph: Graph, devices: list[str]) -> None:
    check_device(graph, devices)
    check_model(graph)
    if graph.draft_dir is not None:
        _check_draft(graph, graph.draft_dir)
    if graph.stateful and not is_npu(graph.device) and "MIN_RESPONSE_LEN" in graph.plugin_config:
        # Kept valid so one graph file can move between an NPU box and a CPU one, but said.
        log.warning(
            "%s: plugin_config.MIN_RESPONSE_LEN sizes the NPU's KV cache and has no effect on %s "
            "(the stateful pipeline's cache grows there); MAX_PROMPT_LEN is still enforced",
            graph.source,
            graph.device,
        )


def check_model(graph: Graph) -> None:
    """Raise ConfigError naming the graph file when its model (an OpenVINO IR folder or a GGUF
    file) cannot serve the graph's pipeline."""
    if graph.gguf:
        _check_gguf_file(graph)
    else:
        _check_model_folder(graph)


def _check_model_folder(graph: Graph) -> None:
    if graph.speech_facts is not None:
        _check_speech_folder(graph)
        return
    if graph.tts_facts is not None:
        _check_tts_folder(graph)
        return
    model_ir = graph.model_dir / "openvino_model.xml"
    vlm_ir = graph.model_dir / "openvino_language_model.xml"
    # Embedding and rerank pipelines only tokenize: no detokenizer is needed.
    required = REQUIRED_FILES[:1] if graph.retrieval is not None else REQUIRED_FILES
    missing = [name for name in required if not (graph.model_dir / name).is_file()]
    if not model_ir.is_file() and not vlm_ir.is_file():
        missing.insert(0, "openvino_model.xml")
    if missing:
        raise ConfigError(
            f"{graph.source}: {graph.model_dir} has no {', '.join(missing)} "
            "(export the model with optimum-intel, tokenizer included: see `appliance export`)"
        )
    has_vision = (graph.model_dir / VISION_ENCODER_IR).is_file()
    if graph.pipeline in ("VLM_CB", "VLM") and not has_vision:
        raise ConfigError(
            f"{graph.source}: `pipeline` is {graph.pipeline} but {graph.model_dir} has no {VISION_ENCODER_IR} "
            "(not a vision-language model export)"
        )
    if graph.pipeline in ("LM_CB", "LM") and has_vision:
        raise ConfigError(
            f"{graph.source}: `pipeline` is {graph.pipeline} but {graph.model_dir} holds a vision-language model "
            f"(use {graph.pipeline.replace('LM', 'VLM', 1)} or AUTO)"
        )


def _check_speech_folder(graph: Graph) -> None:
    missing = [name for name in SPEECH_FILES if not (graph.model_dir / name).is_file()]
    if missing:
        raise ConfigError(
            f"{graph.source}: {graph.model_dir} has no {', '.join(missing)}: not a Whisper export for "
            "OpenVINO GenAI's WhisperPipeline (export it with optimum-intel, tokenizer included: see `appliance export`)"
        )


def _check_tts_folder(graph: Graph) -> None:
    if graph.tts_facts is not None and graph.tts_facts.family == "hibari":
        # The engine speaks with the package's own text front end and DSP (not copied here).
        if importlib.util.find_spec("hibari") is None:
            raise ConfigError(
                f"{graph.source}: {graph.model_dir} holds hibari voices, whose text front end and vocoder come "
                "from the Python package hibari-tts, which is not installed: `pip install --no-deps hibari-tts` "
                "(./setup.sh does; pinned in constraints.txt)"
            )
        return
    missing = [name for name in TTS_FILES if not (graph.model_dir / name).is_file()]
    if missing:
        raise ConfigError(
            f"{graph.source}: {graph.model_dir} has no {', '.join(missing)}: not a SpeechT5 export for "
            "OpenVINO GenAI's Text2SpeechPipeline (export it with optimum-intel: `optimum-cli export openvino "
            "--task text-to-audio --model-kwargs '{\"vocoder\": ...}'`, then its tokenizer with openvino-tokenizers)"
        )


def _check_gguf_file(graph: Graph) -> None:
    reader = graph.effective_gguf_reader or "LEGACY"
    if reader == "FRONTEND" and not frontend_reader_available():
        # Accepting it would load the file with the legacy reader all the same.
        raise ConfigError(
            f'{graph.source}: `gguf_reader = "FRONTEND"`: the installed openvino-genai reads GGUF files with its '
            "legacy reader only (it does not read GGUF_READER); remove the key, or upgrade openvino-genai"
        )
    try:
        check_loadable(read_header(graph.model_dir), reader)
    except GGUFError as exc:
        raise ConfigError(f"{graph.source}: {exc}") from exc
    if not os.access(graph.model_dir, os.W_OK):
        # gguflib opens the file O_RDWR and maps it shared (gguflib.c gguf_open), though nothing is
        # written: read-only, it fails with "Failed to open ... with gguf_open".
        raise ConfigError(
            f"{graph.source}: {graph.model_dir} is not writable by this user, and OpenVINO GenAI's GGUF "
            "loader opens the file read-write (it does not change it); give the service user write access "
            "(under systemd's ProtectSystem=strict: keep it in the state directory or add ReadWritePaths=)"
        )


def check_device(graph: Graph, available: list[str]) -> None:
    """Raise ConfigError naming the graph file and device when the device is not present."""
    device = graph.device
    kind, _, candidates = device.partition(":")
    if kind in ("AUTO", "MULTI", "HETERO"):
        wanted = [c for c in candidates.split(",") if c] if candidates else []
        missing = [c for c in wanted if not _present(c, available)]
        # AUTO/MULTI need one candidate present, HETERO needs all of them.
        if wanted and (missing if kind == "HETERO" else len(missing) == len(wanted)):
            raise ConfigError(_message(graph, ", ".join(missing), available))
        return
    if not _present(device, available):
        raise ConfigError(_message(graph, device, available))


def _present(device: str, available: list[str]) -> bool:
    return any(name == device or name.split(".")[0] == device for name in available)


def _message(graph: Graph, device: str, available: list[str]) -> str:
    return (
        f"{graph.source}: model '{graph.name}' asks for device {device}, which this machine does not "
        f"have (OpenVINO sees: {', '.join(available) or 'none'}). Check the driver "
        "(GPU: intel-opencl-icd and /dev/dri, NPU: the NPU driver and /dev/accel) or change `device`."
    )


def _check_draft(graph: Graph, draft_dir: Path) -> None:
    if not (draft_dir / "openvino_model.xml").is_file():
        raise ConfigError(f"{graph.source}: draft model {draft_dir} has no openvino_model.xml")
    if not (draft_dir / "openvino_tokenizer.bin").is_file():
        raise ConfigError(
            f"{graph.source}: draft model {draft_dir} has no openvino_tokenizer.xml/.bin: export it "
            "with its tokenizer so it can be checked against the main model's"
        )
    if _tokenizer_identity(graph.model_dir) != _tokenizer_identity(draft_dir):
        raise ConfigError(
            f"{graph.source}: the draft model {draft_dir} has a different tokenizer from the main "
            f"model {graph.model_dir}: speculative decoding needs the main model's tokenizer"
        )


_IGNORED_RT_INFO = ("info", "chat_template")
_RT_INFO = re.compile(r"<rt_info>(.*)</rt_info>", re.S)
_RT_ENTRY = re.compile(r'<(\w+)(?: name="([^"]*)")?(?: value="([^"]*)")? ?/>')


def _tokenizer_identity(model_dir: Path) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The tokenizer's constants (vocabulary, merges) and settings (special-token ids, ...).

    Left out: the IR's layer names (they differ between two exports of one tokenizer), the tool
    versions in its rt_info, and the chat template (only the main model's renders prompts; the
    draft sees token ids)."""
    with (model_dir / "openvino_tokenizer.bin").open("rb") as file:
        constants = hashlib.file_digest(file, "sha256").hexdigest()
    xml = (model_dir / "openvino_tokenizer.xml").read_text(encoding="utf-8", errors="replace")
    blocks = _RT_INFO.findall(xml)
    entries = _RT_ENTRY.findall(blocks[-1]) if blocks else []
    settings = tuple(
        sorted((tag, value) for tag, name, value in entries if tag not in _IGNORED_RT_INFO and "version" not in tag)
    )
    return constants, settings
