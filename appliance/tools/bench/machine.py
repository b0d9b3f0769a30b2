"""What a benchmark ran on: the CPU, the instruction sets that decide OpenVINO's kernels, and
OpenVINO's own view of the device.

The machines of this project differ from one session to the next (with or without AVX-512 VNNI,
AMX, bf16), and OpenVINO picks its kernels, its default inference precision and its KV-cache
precision from them: a figure without them cannot be compared with another.
"""

from __future__ import annotations

import os
from pathlib import Path

from appliance.cpu_features import ISA_FEATURES
from appliance.cpu_features import cpuinfo as _cpuinfo

__all__ = ["ISA_FEATURES", "describe_machine", "machine_line"]

_OPENVINO_PROPERTIES = ("FULL_DEVICE_NAME", "OPTIMIZATION_CAPABILITIES", "INFERENCE_PRECISION_HINT")


def _openvino_view(device: str) -> dict[str, object]:
    """The device as OpenVINO sees it; {"error": ...} when it cannot say (e.g. the device is absent)."""
    try:
        import openvino

        core = openvino.Core()
        found: dict[str, object] = {}
        for name in _OPENVINO_PROPERTIES:
            value = core.get_property(device, name)
            if isinstance(value, list | tuple):
                found[name.lower()] = [str(item) for item in value]
            else:  # an openvino.Type (the precision) writes itself as "bf16" with to_string()
                found[name.lower()] = value.to_string() if hasattr(value, "to_string") else str(value)
        return found
    except Exception as exc:  # any failure here only means the report says less
        return {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[-200:]}"}


def describe_machine(device: str = "CPU", cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, object]:
    """{cpu_model, cores, isa, openvino}: what the figures of a run were measured on."""
    model, flags = _cpuinfo(cpuinfo)
    return {
        "cpu_model": model,
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "isa": [feature for feature in ISA_FEATURES if feature in flags],
        "openvino": _openvino_view(device),
    }


def machine_line(machine: dict[str, object]) -> str:
    """One line for the report's header."""
    found = machine.get("openvino")
    view = found if isinstance(found, dict) else {}
    features = machine.get("isa")
    isa = " ".join(features) if isinstance(features, list) and features else "none of " + " ".join(ISA_FEATURES)
    if "error" in view:
        openvino = f"OpenVINO could not describe the device ({view['error']})"
    else:
        capabilities = " ".join(view.get("optimization_capabilities") or [])
        openvino = (
            f"OpenVINO: {view.get('full_device_name')}, capabilities {capabilities}, "
            f"inference precision {view.get('inference_precision_hint')}"
        )
    return f"machine: {machine.get('cpu_model') or 'unknown CPU'}, {machine.get('cores')} cores; ISA {isa}; {openvino}"
