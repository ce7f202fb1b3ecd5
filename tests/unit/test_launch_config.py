"""Kernel launch configuration (grid/block columns) and device properties, read by both loaders.

Exact values on tiny hand-built traces, written as Kineto JSON and as an nsys SQLite export from one
:class:`tests.builders.TraceSpec`; the Kineto file is read with the C scan and with msgspec alone.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from launchgap.loaders import load_trace
from launchgap.loaders.kineto import scan as kineto_scan
from launchgap.trace import DEVICE_PROPERTY_KEYS, LAUNCH_CONFIG_COLUMNS, Kind, Trace
from tests.builders import TraceSpec, write
from tests.unit import kineto_tiny as kt


def _spec() -> TraceSpec:
    spec = TraceSpec(device_names={0: "NVIDIA H200"})
    spec.launch("gemm", 1_000, 4_000, 6_000, 20_000, corr=1, grid=(132, 2, 1), block=(128, 1, 1))
    spec.launch("reduce", 30_000, 4_000, 35_000, 5_000, corr=2, grid=(2_147_483_647, 65_535, 3), block=(1024, 1, 64))
    spec.launch("no_config", 50_000, 4_000, 55_000, 5_000, corr=3)
    spec.launch("Memcpy HtoD", 70_000, 4_000, 75_000, 1_000, corr=4, kind="memcpy")
    return spec


# Rows sorted by start: call 1, kernel gemm, call 2, kernel reduce, call 3, kernel no_config, call 4, copy.
_LAUNCH = {
    "grid_x": [-1, 132, -1, 2_147_483_647, -1, -1, -1, -1],
    "grid_y": [-1, 2, -1, 65_535, -1, -1, -1, -1],
    "grid_z": [-1, 1, -1, 3, -1, -1, -1, -1],
    "block_x": [-1, 128, -1, 1024, -1, -1, -1, -1],
    "block_y": [-1, 1, -1, 1, -1, -1, -1, -1],
    "block_z": [-1, 1, -1, 64, -1, -1, -1, -1],
}


# The smallest integer type that holds each column's values (at most int32 for a grid, int16 for a block).
_DTYPES = {"grid_x": np.int32, "grid_y": np.int32, "grid_z": np.int8, "block_x": np.int16, "block_y": np.int8,
           "block_z": np.int8}


def _check_launch(trace: Trace) -> None:
    assert trace.kind.tolist() == [Kind.RUNTIME, Kind.KERNEL] * 3 + [Kind.RUNTIME, Kind.MEMCPY]
    for col, want in _LAUNCH.items():
        arr = getattr(trace, col)
        assert arr.dtype == _DTYPES[col], col
        assert arr.tolist() == want, col


@pytest.mark.parametrize("scan", [True, False], ids=["c-scan", "msgspec"])
def test_kineto_grid_and_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scan: bool) -> None:
    if not scan:
        monkeypatch.setattr(kineto_scan, "_SCAN", None)
    _check_launch(load_trace(write(_spec(), "kineto", tmp_path)))


def test_nsys_grid_and_block(tmp_path: Path) -> None:
    _check_launch(load_trace(write(_spec(), "nsys", tmp_path)))


@pytest.mark.parametrize("scan", [True, False], ids=["c-scan", "msgspec"])
def test_kineto_odd_launch_values_read_as_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 scan: bool) -> None:
    """Values Kineto does not write: a dimension past int32 or negative is -1 alone; a block dimension past
    int16 is -1; a list of another length, floats, strings or null make all three -1."""
    if not scan:
        monkeypatch.setattr(kineto_scan, "_SCAN", None)
    odd = [((3_000_000_000, 1, -5), (40_000, 2, 1)), ([1, 2], [1.0, 1, 1]), ("1,1,1", None), ([1, 1, 1, 1], {"x": 1})]
    events = []
    for i, (grid, block) in enumerate(odd):
        k = kt.kernel(10.0 * i, 1.0, corr=i + 1)
        k["args"].update(grid=grid, block=block)
        events.append(k)
    trace = load_trace(kt.write(tmp_path, events))
    assert [trace.grid_x.tolist(), trace.grid_y.tolist(), trace.grid_z.tolist()] == [
        [-1, -1, -1, -1], [1, -1, -1, -1], [-1, -1, -1, -1]]
    assert [trace.block_x.tolist(), trace.block_y.tolist(), trace.block_z.tolist()] == [
        [-1, -1, -1, -1], [2, -1, -1, -1], [1, -1, -1, -1]]


_H200_KINETO = {"totalGlobalMem": 150109880320, "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024,
                "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
                "numSms": 132, "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448,
                "sharedMemPerMultiprocessor": 233472, "l2CacheSizeUnknownKey": 7}


def test_kineto_device_properties(tmp_path: Path) -> None:
    spec = _spec()
    spec.device_names = {0: "NVIDIA H200", 1: ""}
    # device 1 as ROCm writes it: an empty name, its own spelling of shared memory per SM; a bool and a
    # negative number are not counts and are left out
    spec.kineto_device_extra = {0: _H200_KINETO, 1: {"totalGlobalMem": 206141652992, "computeMajor": 9,
                                                      "computeMinor": 4, "numSms": 304, "warpSize": 64,
                                                      "maxSharedMemoryPerMultiProcessor": 65536,
                                                      "regsPerBlock": True, "sharedMemPerBlock": -1}}
    trace = load_trace(write(spec, "kineto", tmp_path))
    assert trace.device_properties == {
        0: {"name": "NVIDIA H200", "total_memory_bytes": 150109880320, "sm_count": 132, "compute_capability": "9.0",
            "warp_size": 32, "max_threads_per_block": 1024, "max_threads_per_sm": 2048, "registers_per_block": 65536,
            "registers_per_sm": 65536, "shared_memory_per_block_bytes": 49152,
            "shared_memory_per_block_optin_bytes": 232448, "shared_memory_per_sm_bytes": 233472},
        1: {"name": "", "total_memory_bytes": 206141652992, "sm_count": 304, "compute_capability": "9.4",
            "warp_size": 64, "shared_memory_per_sm_bytes": 65536},
    }
    assert trace.device_names == {0: "NVIDIA H200", 1: ""}
    for props in trace.device_properties.values():
        assert set(props) <= set(DEVICE_PROPERTY_KEYS)


def test_nsys_device_properties(tmp_path: Path) -> None:
    spec = _spec()
    spec.device_names = {0: "NVIDIA H100 80GB HBM3"}
    spec.nsys_gpu_extra = {0: {"totalMemory": 85_520_809_984, "smCount": 132, "memoryBandwidth": 3_352_320_000_000,
                               "clockRate": 1_980_000_000, "computeMajor": 9, "computeMinor": 0,
                               "threadsPerWarp": 32, "chipName": "GH100"}}
    trace = load_trace(write(spec, "nsys", tmp_path))
    assert trace.device_properties == {0: {
        "name": "NVIDIA H100 80GB HBM3", "chip_name": "GH100", "total_memory_bytes": 85_520_809_984,
        "sm_count": 132, "memory_bandwidth_bytes_per_s": 3_352_320_000_000, "clock_rate_hz": 1_980_000_000,
        "warp_size": 32, "compute_capability": "9.0"}}
    assert set(trace.device_properties[0]) <= set(DEVICE_PROPERTY_KEYS)


def test_nsys_device_properties_follow_the_cuda_ordinal(tmp_path: Path) -> None:
    """A process that sees nsys GPU 1 as CUDA device 0: its properties are device 0's, as its name is."""
    spec = _spec()
    spec.device_names = {0: "GPU A", 1: "GPU B"}
    spec.nsys_gpu_extra = {0: {"smCount": 108}, 1: {"smCount": 132, "totalMemory": 1000}}
    spec.cuda_devices = [(4242, 0, 1)]
    trace = load_trace(write(spec, "nsys", tmp_path))
    assert trace.device_names == {0: "GPU B"}
    assert trace.device_properties == {0: {"name": "GPU B", "sm_count": 132, "total_memory_bytes": 1000}}


def test_no_device_properties_when_the_trace_has_none(tmp_path: Path) -> None:
    events = [kt.kernel(0.0, 1.0, corr=1)]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events}))
    trace = load_trace(p)
    assert trace.device_properties == {} and trace.device_names == {}
    assert all(getattr(trace, c).tolist() == [-1] for c in LAUNCH_CONFIG_COLUMNS)


def _resources_spec() -> TraceSpec:
    """Kernels with their registers per thread and shared memory (static, dynamic bytes): ``attn`` launched twice with
    different dynamic shared memory (the larger is kept), ``norm`` with registers only, ``plain`` with neither."""
    spec = TraceSpec(device_names={0: "NVIDIA H200"})
    spec.launch("attn", 1_000, 4_000, 6_000, 20_000, corr=1, grid=(1, 32, 8), block=(128, 1, 1), registers=246,
                shared_memory=(86_336, 0))
    spec.launch("attn", 30_000, 4_000, 35_000, 5_000, corr=2, grid=(1, 32, 8), block=(128, 1, 1), registers=246,
                shared_memory=(86_336, 4_096))
    spec.launch("norm", 50_000, 4_000, 55_000, 5_000, corr=3, registers=32)
    spec.launch("plain", 70_000, 4_000, 75_000, 1_000, corr=4)
    spec.launch("Memcpy HtoD", 90_000, 4_000, 95_000, 1_000, corr=5, kind="memcpy")
    return spec


def _named_resources(trace: Trace) -> dict[str, tuple[int, int]]:
    return {trace.names[k]: v for k, v in trace.kernel_resources.items()}


@pytest.mark.parametrize("scan", [True, False], ids=["c-scan", "msgspec"])
def test_kineto_kernel_resources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scan: bool) -> None:
    """One entry per kernel name (not per event): the largest of its launches; Kineto writes no shared memory arg
    where the spec has none, so ``norm``'s is -1."""
    if not scan:
        monkeypatch.setattr(kineto_scan, "_SCAN", None)
    trace = load_trace(write(_resources_spec(), "kineto", tmp_path))
    assert _named_resources(trace) == {"attn": (246, 90_432), "norm": (32, -1)}


def test_nsys_kernel_resources(tmp_path: Path) -> None:
    """nsys: registersPerThread and staticSharedMemory + dynamicSharedMemory, grouped by kernel name."""
    trace = load_trace(write(_resources_spec(), "nsys", tmp_path))
    assert _named_resources(trace) == {"attn": (246, 90_432), "norm": (32, -1)}


@pytest.mark.parametrize("scan", [True, False], ids=["c-scan", "msgspec"])
def test_kineto_odd_resource_values_read_as_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    scan: bool) -> None:
    """A negative, a past-int32, a float, a string or a null value reads as -1; a value on a copy or a CPU op is not a
    kernel's; a kernel whose args say neither is left out."""
    if not scan:
        monkeypatch.setattr(kineto_scan, "_SCAN", None)
    odd = [("k1", -3, 3_000_000_000), ("k2", 64.0, "1024"), ("k3", None, 2048), ("k4", 40, [1])]
    events = []
    for i, (name, regs, smem) in enumerate(odd):
        k = kt.kernel(10.0 * i, 1.0, corr=i + 1, name=name)
        k["args"].update({"registers per thread": regs, "shared memory": smem})
        events.append(k)
    events.append({"ph": "X", "cat": "gpu_memcpy", "name": "k1", "pid": 0, "tid": 7, "ts": 50.0, "dur": 1.0,
                   "args": {"registers per thread": 255, "shared memory": 1}})
    trace = load_trace(kt.write(tmp_path, events))
    assert _named_resources(trace) == {"k3": (-1, 2048), "k4": (40, -1)}
