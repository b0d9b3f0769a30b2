"""GGUF model files: the header read with the standard library, and what OpenVINO GenAI can load.

A graph's `model_path` may name a `.gguf` file, which OpenVINO GenAI loads directly (weights,
tokenizer, detokenizer and chat template from the file). The engine would fail on a file it cannot
read only after seconds of loading, with a C++ assertion; `read_header` reads the metadata and the
tensor table (not the weights: ~2 MB of a 98 MB file, tens of milliseconds) so that `appliance
check`, start-up, reloads and `appliance export` refuse it first, naming the file and the reason.

What the default reader (GGUF_READER "LEGACY") loads, read from openvino.genai's
src/cpp/src/gguf_utils/ (2026.x; the installed 2026.4.1 holds the same code paths):

- architectures llama, qwen2, qwen3 (`gguf_modeling.cpp`, `create_from_gguf`);
- the projection weights (attention q/k/v/output, MLP gate/up/down) as F16, Q4_0, Q4_1, Q8_0,
  Q4_K or Q6_K (`building_blocks.cpp`, `make_weights_subgraph`: anything else is "Unsupported
  quantization type");
- norm weights as F32 or F16 (`make_rms_norm`);
- the embedding, output and bias tensors as those, or F32, BF16 or Q2_K (taken as they are, or
  dequantized to f16 by gguflib's `gguf_tensor_to_f16` in `gguf.cpp`);
- a byte-level BPE tokenizer only (`tokenizer.ggml.model` "gpt2": `gguf_tokenizer.cpp`).

The "FRONTEND" reader (OpenVINO's GGUF frontend, a preview) reads more, and what it reads changes
with the OpenVINO version: only the file's structure is checked for it. Not every release has it:
2026.4.1 ignores GGUF_READER (its library does not hold the name), so `frontend_reader_available`
looks before a graph may ask for it.
"""

from __future__ import annotations

import functools
import importlib.util
import mmap
import os
import re
import struct
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = [
    "LEGACY_ARCHITECTURES",
    "GGUFArray",
    "GGUFError",
    "GGUFHeader",
    "GGUFTensor",
    "check_loadable",
    "frontend_reader_available",
    "read_header",
    "read_metadata_entries",
    "tensor_byte_size",
    "type_name",
]

Reader = Literal["LEGACY", "FRONTEND"]
LEGACY_ARCHITECTURES = ("llama", "qwen2", "qwen3")
DEFAULT_CONTEXT_LENGTH = 2048
"""What OpenVINO GenAI assumes when the file has no `<arch>.context_length` (`config_from_meta`)."""

# ggml tensor types: id -> (name, weights per block, bytes per block).
_TENSOR_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
}
_PROJECTION_TYPES = frozenset({"F16", "Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q6_K"})
_NORM_TYPES = frozenset({"F32", "F16"})
_OTHER_TYPES = _PROJECTION_TYPES | {"F32", "BF16", "Q2_K"}
_PROJECTION = re.compile(r"^blk\.\d+\.(attn_q|attn_k|attn_v|attn_output|ffn_gate|ffn_up|ffn_down)\.weight$")
_NORM = re.compile(r"_norm\.weight$")
_LEGACY_KEYS = ("block_count", "attention.head_count", "embedding_length", "attention.layer_norm_rms_epsilon")

# Metadata value types: id -> struct format (8: string, 9: array).
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")
_MAX_DIMS = 8


class GGUFError(Exception):
    """The file is not a GGUF file OpenVINO GenAI can load; the message names the file and why."""


@dataclass(frozen=True)
class GGUFArray:
    """A metadata array, summarized (the tokenizer's vocabulary is one: 49k strings)."""

    element_type: int
    count: int


@dataclass(frozen=True)
class GGUFTensor:
    name: str
    ggml_type: int
    shape: tuple[int, ...]
    offset: int
    """Bytes from the start of the data section."""


@dataclass(frozen=True)
class GGUFHeader:
    """A GGUF file's header: version, metadata (arrays summarized, but those read whole) and tensor table."""

    path: Path
    version: int
    metadata: Mapping[str, object]
    tensors: tuple[GGUFTensor, ...]
    data_offset: int
    """Where the tensor data starts (after the tensor table, aligned)."""

    @property
    def architecture(self) -> str:
        value = self.metadata.get("general.architecture")
        return value if isinstance(value, str) else ""

    @property
    def context_length(self) -> int:
        """The model's context (`<arch>.context_length`), as OpenVINO GenAI builds the model for."""
        value = self.metadata.get(f"{self.architecture}.context_length")
        return int(value) if isinstance(value, int) and value > 0 else DEFAULT_CONTEXT_LENGTH

    @property
    def type_counts(self) -> dict[str, int]:
        """Tensors per ggml type, e.g. {"Q4_1": 210, "F32": 61, "Q8_0": 1}."""
        return dict(Counter(type_name(tensor.ggml_type) for tensor in self.tensors).most_common())


def type_name(ggml_type: int) -> str:
    """The ggml name of a tensor type ("Q4_K"), or "type N" for one this table does not know."""
    known = _TENSOR_TYPES.get(ggml_type)
    return known[0] if known else f"type {ggml_type}"


def read_header(path: Path, *, whole: Collection[str] = ()) -> GGUFHeader:
    """The header of the GGUF file at `path`; GGUFError when it is not one, is truncated, or uses a
    format version other than 2 and 3. Metadata arrays of strings named in `whole` are read as
    tuples (`tokenizer.ggml.tokens`: the vocabulary's pieces); other arrays are summarized."""
    try:
        with path.open("rb") as file:
            size = os.fstat(file.fileno()).st_size
            if size < 24:
                start = file.read(4)
                if start != b"GGUF"[: len(start)] or not start:
                    raise _not_gguf(path, start)
                raise GGUFError(f"{path}: truncated GGUF file ({size} bytes, not even the header)")
            with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _Parser(path, data, size, frozenset(whole)).header()
    except OSError as exc:
        raise GGUFError(f"{path}: cannot read the GGUF file: {exc.strerror}") from exc


def read_metadata_entries(path: Path, prefix: str) -> dict[str, bytes]:
    """The metadata entries of the GGUF file at `path` whose key starts with `prefix`, in file
    order, each as stored (key, value type, value): for copying them verbatim into another GGUF
    file, e.g. a tokenizer's 49k-piece vocabulary and merges. GGUFError as `read_header`."""
    try:
        with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
            parser = _Parser(path, data, os.fstat(file.fileno()).st_size)
            parser.header()
            return {key: data[start:end] for key, (start, end) in parser.spans.items() if key.startswith(prefix)}
    except (OSError, ValueError) as exc:  # mmap refuses an empty file with ValueError
        raise GGUFError(f"{path}: cannot read the GGUF file: {exc}") from exc


@functools.cache
def frontend_reader_available() -> bool:
    """Whether the installed openvino-genai reads GGUF_READER at all: its library names the variable
    if it does (found in ~40 ms without importing it; 2026.4.1 does not)."""
    spec = importlib.util.find_spec("openvino_genai")
    for folder in (spec.submodule_search_locations or ()) if spec is not None else ():
        for library in Path(folder).glob("libopenvino_genai.so*"):
            with library.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
                if data.find(b"GGUF_READER") >= 0:
                    return True
    return False


def _other_reader_hint() -> str:
    """The alternative to offer for a file the default reader cannot load, where there is one."""
    return ' or try `gguf_reader = "FRONTEND"` (a preview that reads more)' if frontend_reader_available() else ""


def check_loadable(header: GGUFHeader, reader: Reader) -> None:
    """Raise GGUFError naming the file when `reader` cannot load the model (see the module
    docstring for what the LEGACY reader loads; FRONTEND, a preview, is not second-guessed)."""
    if reader == "FRONTEND":
        return
    path, arch = header.path, header.architecture
    if arch not in LEGACY_ARCHITECTURES:
        raise GGUFError(
            f"{path}: architecture {arch or '(none: no general.architecture)'!r} cannot be read by OpenVINO "
            f"GenAI's default GGUF reader (it reads {', '.join(LEGACY_ARCHITECTURES)}); export the model to "
            f"OpenVINO IR from its Hugging Face folder (`appliance export`){_other_reader_hint()}"
        )
    missing = [key for key in (f"{arch}.{name}" for name in _LEGACY_KEYS) if key not in header.metadata]
    missing += [] if "general.file_type" in header.metadata else ["general.file_type"]
    if missing:
        raise GGUFError(f"{path}: the GGUF metadata has no {', '.join(missing)}, which the model is built from")
    for tensor in header.tensors:
        name = type_name(tensor.ggml_type)
        if _PROJECTION.match(tensor.name):
            allowed, role = _PROJECTION_TYPES, "projection weights"
        elif _NORM.search(tensor.name):
            allowed, role = _NORM_TYPES, "norm weights"
        else:
            allowed, role = _OTHER_TYPES, "embedding and output tensors"
        if name not in allowed:
            raise GGUFError(
                f"{path}: tensor {tensor.name} is {name}, a quantization OpenVINO GenAI's default GGUF reader "
                f"cannot load (for {role} it reads {', '.join(sorted(allowed))}); use a Q4_0, Q4_K_M or Q8_0 "
                f"file of the model{_other_reader_hint()}"
            )
    tokenizer = header.metadata.get("tokenizer.ggml.model")
    if tokenizer != "gpt2":
        found = f"a {tokenizer!r} tokenizer" if isinstance(tokenizer, str) else "no tokenizer (tokenizer.ggml.model)"
        raise GGUFError(
            f"{path}: the file has {found}; OpenVINO GenAI builds only byte-level BPE tokenizers "
            '("gpt2", as Llama 3, Qwen and SmolLM use) from GGUF metadata'
        )


def _not_gguf(path: Path, start: bytes) -> GGUFError:
    return GGUFError(f"{path}: not a GGUF file (it starts with {start[:4]!r}, not b'GGUF')")


class _Parser:
    """Reads the header from a buffer, every read bounds-checked (a truncated or corrupt file gives
    a GGUFError, never an IndexError or a loop over a bogus count)."""

    def __init__(self, path: Path, data: mmap.mmap, size: int, whole: frozenset[str] = frozenset()) -> None:
        self.path, self.data, self.size = path, data, size
        self.whole = whole
        self.pos = 0
        self.spans: dict[str, tuple[int, int]] = {}
        """Where each metadata entry lies in the file: (start, end) by key."""

    def header(self) -> GGUFHeader:
        if self.data[:4] != b"GGUF":
            raise _not_gguf(self.path, self.data[:4])
        self.pos = 4
        version = self.u32()
        if version not in (2, 3):
            raise GGUFError(f"{self.path}: {_version_problem(version)}")
        tensor_count, kv_count = self.u64(), self.u64()
        metadata: dict[str, object] = {}
        for _ in range(kv_count):
            start = self.pos
            key = self.string()
            metadata[key] = self.value(self.u32(), key)
            self.spans[key] = (start, self.pos)
        tensors = tuple(self.tensor() for _ in range(tensor_count))
        alignment = metadata.get("general.alignment", 32)
        if not isinstance(alignment, int) or alignment < 1 or alignment & (alignment - 1):
            raise GGUFError(f"{self.path}: corrupt GGUF file: general.alignment is {alignment!r}")
        data_offset = -(-self.pos // alignment) * alignment
        end = max((data_offset + t.offset + _byte_size(t) for t in tensors), default=self.pos)
        if end > self.size:
            raise GGUFError(
                f"{self.path}: truncated GGUF file: its tensors end at byte {end}, the file has {self.size} "
                "(an interrupted download or copy?)"
            )
        return GGUFHeader(self.path, version, metadata, tensors, data_offset)

    def take(self, count: int) -> int:
        start = self.pos
        if count < 0 or start + count > self.size:
            raise GGUFError(f"{self.path}: truncated GGUF file (the header runs past its {self.size} bytes)")
        self.pos = start + count
        return start

    def u32(self) -> int:
        return _U32.unpack_from(self.data, self.take(4))[0]

    def u64(self) -> int:
        return _U64.unpack_from(self.data, self.take(8))[0]

    def string(self) -> str:
        length = self.u64()
        start = self.take(length)
        return self.data[start : start + length].decode("utf-8", "replace")

    def value(self, value_type: int, key: str) -> object:
        if value_type == _STRING:
            return self.string()
        if value_type == _ARRAY:
            element_type, count = self.u32(), self.u64()
            if element_type == _STRING and key in self.whole:
                return tuple(self.string() for _ in range(count))
            if element_type == _STRING:
                for _ in range(count):
                    self.take(self.u64())
            elif element_type in _SCALARS:
                self.take(count * struct.calcsize(_SCALARS[element_type]))
            elif element_type == _ARRAY:
                raise GGUFError(f"{self.path}: metadata {key} is an array of arrays, which OpenVINO GenAI cannot read")
            else:
                raise GGUFError(f"{self.path}: corrupt GGUF file: metadata {key} has element type {element_type}")
            return GGUFArray(element_type, count)
        scalar = _SCALARS.get(value_type)
        if scalar is None:
            raise GGUFError(f"{self.path}: corrupt GGUF file: metadata {key} has value type {value_type}")
        return struct.unpack_from(scalar, self.data, self.take(struct.calcsize(scalar)))[0]

    def tensor(self) -> GGUFTensor:
        name = self.string()
        dims = self.u32()
        if dims > _MAX_DIMS:
            raise GGUFError(f"{self.path}: corrupt GGUF file: tensor {name} has {dims} dimensions")
        shape = tuple(self.u64() for _ in range(dims))
        return GGUFTensor(name=name, ggml_type=self.u32(), shape=shape, offset=self.u64())


def _byte_size(tensor: GGUFTensor) -> int:
    return tensor_byte_size(tensor.ggml_type, tensor.shape) if tensor.ggml_type in _TENSOR_TYPES else 0


def tensor_byte_size(ggml_type: int, shape: Collection[int]) -> int:
    """The bytes a tensor of this ggml type and shape takes in the file (ValueError for a type this
    table does not know)."""
    known = _TENSOR_TYPES.get(ggml_type)
    if known is None:
        raise ValueError(f"unknown ggml tensor type {ggml_type}")
    _, block, block_bytes = known
    weights = 1
    for dim in shape:
        weights *= dim
    return -(-weights // block) * block_bytes


def _version_problem(version: int) -> str:
    if version == 1:
        return "GGUF version 1 (before August 2023) is not supported: convert the model again with a current llama.cpp"
    if struct.unpack("<I", struct.pack(">I", version))[0] in (2, 3):
        return "a big-endian GGUF file, which OpenVINO GenAI cannot read"
    return f"GGUF version {version} is not one this appliance reads (2 and 3)"
