"""The CPU's instruction-set features that decide OpenVINO's CPU kernels, read from /proc/cpuinfo.

The machines of this project differ from one session to the next (with or without AVX-512 VNNI,
AMX, bf16), and OpenVINO picks its kernels, its default inference precision and its KV-cache
precision from them: `appliance bench` names them with every figure, `appliance tune` writes them
into the graph it tuned, and `appliance check` warns when a graph was tuned on other ones.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ISA_FEATURES", "TUNED_ON", "cpuinfo", "isa", "tuned_isa"]

ISA_FEATURES = (
    "avx2",
    "avx512f",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "f16c",
)
"""/proc/cpuinfo flags that change OpenVINO's CPU kernels (int8 dot products, bf16 and fp16 math, AMX
tiles), in the order they are printed."""
TUNED_ON = "# tuned-on:"
"""The graph-file comment `appliance tune` writes: the features of the CPU it measured on."""


def cpuinfo(path: Path = Path("/proc/cpuinfo")) -> tuple[str | None, set[str]]:
    """(model name, flags) of the first processor; (None, empty) where there is no /proc/cpuinfo."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None, set()
    model, flags = None, set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model is None:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
    return model, flags


def isa(path: Path = Path("/proc/cpuinfo")) -> list[str]:
    """This CPU's `ISA_FEATURES`, in their order."""
    flags = cpuinfo(path)[1]
    return [feature for feature in ISA_FEATURES if feature in flags]


def tuned_isa(graph_text: str) -> list[str] | None:
    """The CPU features a graph file was tuned on (None: it was not tuned)."""
    for line in graph_text.splitlines():
        if line.startswith(TUNED_ON):
            return line.removeprefix(TUNED_ON).split()
    return None
