"""Which GPU a trace ran on: its device name, or where the trace leaves the name empty (ROCm's PyTorch writes
``name: ""`` in some exports, e.g. TraceLens' vLLM MI300X traces), the GPU its properties identify."""
from __future__ import annotations

import re
from collections.abc import Mapping

from .trace import Trace


#: AMD Instinct GPUs by (compute capability as ROCm's PyTorch reports gfx9xx, compute units, memory GiB rounded):
#: ROCm traces may leave the device name empty; the properties still tell the kind.
_AMD_BY_PROPS = {("9.4", 304, 192): "AMD Instinct MI300X", ("9.4", 304, 256): "AMD Instinct MI325X",
                 ("9.4", 228, 128): "AMD Instinct MI300A", ("9.0", 110, 64): "AMD Instinct MI250X (one GCD)",
                 ("9.0", 104, 64): "AMD Instinct MI210", ("9.5", 256, 288): "AMD Instinct MI355X"}


def name_from_properties(props: Mapping) -> str:
    """A device's name from its properties: the name written, else an AMD GPU its properties identify."""
    if props.get("name"):
        return str(props["name"])
    mem = props.get("total_memory_bytes")
    key = (props.get("compute_capability"), props.get("sm_count"), round(mem / 2**30 / 32) * 32 if mem else None)
    return _AMD_BY_PROPS.get(key, "") if props.get("warp_size") == 64 else ""


#: GPU names of AMD parts (their launch latency and inter-kernel gap were never measured here).
_AMD_NAME = re.compile(r"(?i)\bAMD\b|Instinct|\bMI\d{3}|Radeon")


def is_amd(name: str | None) -> bool:
    """Whether a GPU name (:func:`name_from_properties`, :func:`device_name`) is an AMD part."""
    return bool(name) and bool(_AMD_NAME.search(name))


def device_name(trace: Trace, device: int) -> str:
    """The name of ``device`` from the trace's device properties (an empty ROCm name: the AMD GPU its compute
    capability, compute units and memory identify); where the device is not listed (the kernels ran on a device
    id the properties do not list) and the properties describe one GPU kind only, that kind; else ``""``."""
    props = trace.device_properties
    if device in props and name_from_properties(props[device]):
        return name_from_properties(props[device])
    if trace.device_names.get(device):
        return str(trace.device_names[device])
    kinds = {name_from_properties(p) for p in props.values()} | {str(v) for v in trace.device_names.values() if v}
    kinds.discard("")
    return kinds.pop() if len(kinds) == 1 else ""


def device_properties_of(trace: Trace, device: int) -> dict:
    """What the trace says of ``device`` (:attr:`Trace.device_properties`); where the device is not listed (ROCm's
    Kineto may list the one GPU a process saw as id 0 while its kernels name the node's GPU 9: TraceLens' SGLang
    MI300X traces) and every listed device has the same properties, the listed ones; else ``{}``."""
    props = trace.device_properties
    if device in props:
        return dict(props[device])
    kinds = [dict(p) for p in props.values()]
    return kinds[0] if kinds and all(k == kinds[0] for k in kinds[1:]) else {}

