"""Which OpenVINO devices this machine has, checked before an engine process is spawned."""

from __future__ import annotations

from appliance.config import Graph
from appliance.errors import ConfigError

__all__ = ["available_devices", "check_device", "describe_devices"]


def available_devices() -> list[str]:
    """OpenVINO's device names here, e.g. ['CPU'] or ['CPU', 'GPU.0', 'GPU.1', 'NPU']."""
    import openvino

    return list(openvino.Core().available_devices)


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
