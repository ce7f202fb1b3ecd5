"""Which GPU a trace ran on and what it says of it (launchgap.gpus), on hand-built Kineto traces."""
from __future__ import annotations

from launchgap.costmodel import gpu_peaks
from launchgap.gpus import device_name, device_properties_of, name_from_properties
from launchgap.loaders import load_trace
from tests.unit.kineto_tiny import kernel, launch, write

MI300X = {"id": 0, "name": "AMD Instinct MI300X", "totalGlobalMem": 206141652992, "computeMajor": 9, "computeMinor": 4,
          "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "warpSize": 64, "numSms": 304}


def test_kernels_on_a_device_the_properties_do_not_list_take_the_one_listed(tmp_path) -> None:
    """ROCm's Kineto lists the one GPU the process saw as id 0 while the kernels name the node's GPU 9 (TraceLens'
    SGLang MI300X traces): its properties are that GPU's, so the cost model knows its SMs and peaks."""
    p = write(tmp_path, [launch(0, 5, 1), kernel(10, 20, 1, device=9)], deviceProperties=[MI300X])
    t = load_trace(p)
    props = device_properties_of(t, 9)
    assert props["sm_count"] == 304 and props["total_memory_bytes"] == 206141652992
    assert device_name(t, 9) == "AMD Instinct MI300X"
    assert gpu_peaks(name_from_properties(props), props)[2] == "AMD Instinct MI300X data sheet"
    assert device_properties_of(t, 0) == props


def test_an_unlisted_device_among_different_gpus_has_no_properties(tmp_path) -> None:
    h100 = {"id": 1, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}
    p = write(tmp_path, [launch(0, 5, 1), kernel(10, 20, 1, device=9)], deviceProperties=[MI300X, h100])
    t = load_trace(p)
    assert device_properties_of(t, 9) == {}
    assert device_properties_of(t, 1)["sm_count"] == 132
    # two listed devices of one kind (same properties but the id): still one kind, the unlisted device is it
    same = write(tmp_path, [launch(0, 5, 1), kernel(10, 20, 1, device=9)], name="same.json",
                 deviceProperties=[MI300X, {**MI300X, "id": 1}])
    assert device_properties_of(load_trace(same), 9)["sm_count"] == 304
