"""Read a CTranslate2 `model.bin`: named tensors, no CTranslate2 needed (standard library and numpy).

The file, as CTranslate2 writes it (`python/ctranslate2/specs/model_spec.py`, `_serialize`) and
reads it (`src/models/model.cc`, `Model::load`), binary versions 4 to 6; every integer is
little-endian, a *string* is a uint16 length (counting a trailing NUL), the UTF-8 bytes, the NUL:

    uint32  binary version
    string  spec name, e.g. "WhisperSpec"
    uint32  spec revision
    uint32  number of variables, then for each (sorted by name):
        string  name, e.g. "decoder/layer_0/self_attention/linear_0/weight"
        uint8   rank, then rank x uint32 dimensions (rank 0: a scalar such as `num_heads`)
        uint8   data type: 0 float32, 1 int8, 2 int16, 3 int32, 4 float16, 5 bfloat16
        uint32  number of bytes, then the bytes (C order)
    uint32  number of aliases, then for each: string alias, string name of the variable it shares
            (a tied weight such as Whisper's `decoder/projection/weight` is stored once)

Versions 1 to 3 spelled the data type by its width (ambiguous between int16 and float16) and
are refused, as are types a later version may add: a wrong guess would be silent garbage.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Ct2FormatError", "Ct2Model", "read_model_bin"]

SUPPORTED_VERSIONS = range(4, 7)
_DTYPES: dict[int, str] = {0: "<f4", 1: "i1", 2: "<i2", 3: "<i4", 4: "<f2", 5: "bfloat16"}


class Ct2FormatError(ValueError):
    """The file is not a CTranslate2 model.bin this reader understands (or is truncated)."""


@dataclass(frozen=True)
class Ct2Model:
    """A CTranslate2 model's variables by name (aliases resolved: both names give one array)."""

    spec: str
    revision: int
    binary_version: int
    variables: dict[str, np.ndarray]
    aliases: dict[str, str]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.variables[self.aliases.get(name, name)]

    def __contains__(self, name: object) -> bool:
        return name in self.variables or name in self.aliases

    def scalar(self, name: str) -> int:
        """A rank-0 variable as a Python int (e.g. `encoder/num_heads`)."""
        value = self[name]
        if value.shape != ():
            raise Ct2FormatError(f"{name} is not a scalar (shape {value.shape})")
        return int(value)


def read_model_bin(path: Path) -> Ct2Model:
    """Parse `path` (a whole model.bin, read into memory once); Ct2FormatError if it is not one."""
    data = Path(path).read_bytes()
    reader = _Reader(data, str(path))
    version = reader.unpack("I")
    if version not in SUPPORTED_VERSIONS:
        raise Ct2FormatError(
            f"{path}: CTranslate2 binary version {version}; this reader knows versions "
            f"{SUPPORTED_VERSIONS.start} to {SUPPORTED_VERSIONS.stop - 1}"
        )
    spec, revision = reader.string(), reader.unpack("I")
    variables: dict[str, np.ndarray] = {}
    for _ in range(reader.unpack("I")):
        name = reader.string()
        shape = tuple(reader.unpack("I") for _ in range(reader.unpack("B")))
        type_id, size = reader.unpack("B"), reader.unpack("I")
        variables[name] = _array(reader.take(size), type_id, shape, f"{path}: {name}")
    aliases = {}
    for _ in range(reader.unpack("I")):
        alias, target = reader.string(), reader.string()
        if target not in variables:
            raise Ct2FormatError(f"{path}: alias {alias} names a missing variable {target}")
        aliases[alias] = target
    if reader.offset != len(data):
        raise Ct2FormatError(f"{path}: {len(data) - reader.offset} unexpected bytes after the aliases")
    return Ct2Model(spec, revision, version, variables, aliases)


def _array(raw: memoryview, type_id: int, shape: tuple[int, ...], where: str) -> np.ndarray:
    dtype = _DTYPES.get(type_id)
    if dtype is None:
        raise Ct2FormatError(f"{where}: unknown data type id {type_id}")
    count = int(np.prod(shape, dtype=np.int64))
    if dtype == "bfloat16":  # numpy has no bfloat16: its 16 bits are the top half of a float32
        if len(raw) != 2 * count:
            raise Ct2FormatError(f"{where}: {len(raw)} bytes for {count} bfloat16 values")
        halves = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return halves.view(np.float32).reshape(shape)
    if len(raw) != np.dtype(dtype).itemsize * count:
        raise Ct2FormatError(f"{where}: {len(raw)} bytes for {count} values of {np.dtype(dtype)}")
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


class _Reader:
    """A cursor over the file's bytes; running past the end is a Ct2FormatError naming the offset."""

    def __init__(self, data: bytes, source: str) -> None:
        self.data, self.source, self.offset = memoryview(data), source, 0  # slices copy nothing

    def take(self, size: int) -> memoryview:
        if self.offset + size > len(self.data):
            raise Ct2FormatError(f"{self.source}: truncated at byte {self.offset} (wanted {size} more)")
        chunk = self.data[self.offset : self.offset + size]
        self.offset += size
        return chunk

    def unpack(self, code: str) -> int:
        return struct.unpack("<" + code, self.take(struct.calcsize(code)))[0]

    def string(self) -> str:
        raw = self.take(self.unpack("H"))
        if raw[-1:] != b"\0":
            raise Ct2FormatError(f"{self.source}: a string at byte {self.offset - len(raw)} lacks its NUL")
        return bytes(raw[:-1]).decode("utf-8")
