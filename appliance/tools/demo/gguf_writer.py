"""A small GGUF (version 3) writer: header, metadata, tensor table and 32-byte aligned tensor data.

Written from the format as llama.cpp's gguf-py writes it (`gguf_writer.py`: tensor dimensions are
stored fastest-varying first, each tensor's data starts at a multiple of the alignment, counted
from the start of the data section) and read back by `appliance.graphfiles.gguf`, which also gives
each ggml type's block size. Standard library only: the tensor data arrives as bytes from the
caller, one chunk at a time, so a 650 MB model never sits in memory whole.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from appliance.graphfiles.gguf import tensor_byte_size

__all__ = ["ALIGNMENT", "F32", "Q4_0", "Q8_0", "MetadataValue", "TensorInfo", "write_gguf"]

ALIGNMENT = 32
"""GGUF's default alignment (no `general.alignment` key is written)."""
# ggml tensor types (ggml.h `enum ggml_type`).
F32, Q4_0, Q8_0 = 0, 2, 8

MetadataValue = str | int | float | bool
# GGUF metadata value types (gguf.h `enum gguf_type`): what each Python type is written as.
_UINT32, _FLOAT32, _BOOL, _STRING = 4, 6, 7, 8
_VERSION = 3


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of the file: its ggml type and shape in GGUF order, fastest-varying dimension
    first (a weight matrix of `rows` outputs over `columns` inputs is `(columns, rows)`)."""

    name: str
    ggml_type: int
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return tensor_byte_size(self.ggml_type, self.shape)


def write_gguf(
    path: Path,
    metadata: Mapping[str, MetadataValue],
    tensors: Sequence[TensorInfo],
    data: Callable[[TensorInfo], Iterable[bytes]],
    *,
    raw_metadata: Mapping[str, bytes] = {},
) -> int:
    """Write a GGUF v3 file to `path`; returns its size in bytes.

    `metadata` values are written as strings, uint32 (int), float32 (float) or bools;
    `raw_metadata` holds whole entries as another file stores them (`read_metadata_entries`),
    copied after them verbatim. `data(tensor)` yields the tensor's bytes in chunks, in `tensors`'
    order; ValueError when they do not add up to its size or a key is given twice.
    """
    if twice := metadata.keys() & raw_metadata.keys():
        raise ValueError(f"metadata keys given twice: {', '.join(sorted(twice))}")
    if len({tensor.name for tensor in tensors}) != len(tensors):
        raise ValueError("tensor names must be unique")
    head = bytearray(b"GGUF" + struct.pack("<IQQ", _VERSION, len(tensors), len(metadata) + len(raw_metadata)))
    for key, value in metadata.items():
        head += _string(key) + _value(key, value)
    for key, entry in raw_metadata.items():
        if not entry.startswith(_string(key)):
            raise ValueError(f"raw metadata entry {key!r} does not start with its key")
        head += entry
    offset = 0
    for tensor in tensors:
        head += _string(tensor.name) + struct.pack(f"<I{len(tensor.shape)}Q", len(tensor.shape), *tensor.shape)
        head += struct.pack("<IQ", tensor.ggml_type, offset)
        offset += _padded(tensor.nbytes)
    head += bytes(_padded(len(head)) - len(head))
    with path.open("wb") as file:
        file.write(head)
        for tensor in tensors:
            _write_tensor(file, tensor, data(tensor))
        return file.tell()


def _write_tensor(file: BinaryIO, tensor: TensorInfo, chunks: Iterable[bytes]) -> None:
    written = 0
    for chunk in chunks:
        written += file.write(chunk)
    if written != tensor.nbytes:
        raise ValueError(f"tensor {tensor.name}: {written} bytes of data, its type and shape take {tensor.nbytes}")
    file.write(bytes(_padded(written) - written))


def _padded(size: int) -> int:
    return -(-size // ALIGNMENT) * ALIGNMENT


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def _value(key: str, value: MetadataValue) -> bytes:
    if isinstance(value, bool):  # before int: bool is an int subclass
        return struct.pack("<I?", _BOOL, value)
    if isinstance(value, int):
        if not 0 <= value < 1 << 32:
            raise ValueError(f"metadata {key}: {value} does not fit a uint32")
        return struct.pack("<II", _UINT32, value)
    if isinstance(value, float):
        return struct.pack("<If", _FLOAT32, value)
    if isinstance(value, str):
        return struct.pack("<I", _STRING) + _string(value)
    raise TypeError(f"metadata {key}: cannot write {type(value).__name__} values")
