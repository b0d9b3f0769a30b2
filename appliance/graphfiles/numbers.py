"""The number types of graph files: every number a graph file holds has a lower and an upper bound
(`tests/unit/test_numbers.py` walks the schema for one without), so TOML's `nan` and `inf`, and an
integer of 401 digits, are errors naming the file and the field when the graph is read, never a
traceback (or an OpenVINO overflow) when its engine loads."""

from __future__ import annotations

from typing import Annotated

import msgspec

__all__ = ["MAX_COUNT", "FiniteFloat", "Int64", "NonNegativeInt", "PositiveInt"]

MAX_COUNT = 2**31 - 1
"""The largest count a graph file takes (tokens, sequences, bytes of one upload, gigabytes of KV
cache...): OpenVINO's 32-bit fields hold it, and no machine needs more."""

PositiveInt = Annotated[int, msgspec.Meta(ge=1, le=MAX_COUNT)]
NonNegativeInt = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
"""An integer a device property (`plugin_config`) may hold."""
FiniteFloat = Annotated[float, msgspec.Meta(ge=-1.7976931348623157e308, le=1.7976931348623157e308)]
"""Any float but nan and the infinities (both bounds refuse nan too)."""
