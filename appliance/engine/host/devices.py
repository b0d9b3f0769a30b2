"""Which OpenVINO devices this machine has (graph files are checked against them before an
engine process is spawned: `appliance.graphfiles.checks`)."""

from __future__ import annotations

__all__ = ["available_devices", "describe_devices"]


def available_devices() -> list[str]:
    """OpenVINO's device names here, e.g. ['CPU'] or ['CPU', 'GPU.0', 'GPU.1', 'NPU']."""
    import openvino

    return list(openvino.Core().available_devices)


_PROPERTIES = (
    "FULL_DEVICE_NAME",
    "DEVICE_ARCHITECTURE",
    "DEVICE_TYPE",
    "OPTIMIZATION_CAPABILITIES",
    "INFERENCE_PRECISION_HINT",
    "GPU_DEVICE_TOTAL_MEM_SIZE",
    "NPU_DEVICE_TOTAL_MEM_SIZE",
    "DEVICE_GOPS",
)


def describe_devices() -> dict[str, dict[str, str]]:
    """Each device OpenVINO sees, with the properties an operator picks a device by."""
    import openvino

    core = openvino.Core()
    described: dict[str, dict[str, str]] = {}
    for device in core.available_devices:
        supported = set(core.get_property(device, "SUPPORTED_PROPERTIES"))
        properties = {}
        for name in _PROPERTIES:
            if name in supported:
                try:
                    value = core.get_property(device, name)
                except RuntimeError:
                    continue
                properties[name] = _text(value)
        described[device] = properties
    return described


def _text(value: object) -> str:
    if isinstance(value, list | tuple):
        return " ".join(map(_text, value))
    if hasattr(value, "get_type_name"):  # openvino.Type, e.g. the inference precision
        return value.get_type_name()
    return str(value).removeprefix("Type.")
