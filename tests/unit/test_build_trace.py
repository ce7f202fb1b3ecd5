"""build_trace: the one place loaders' columns are checked, sorted and joined."""
from __future__ import annotations

import numpy as np
import pytest

from launchgap.trace import Kind, build_trace


def _columns(kind: list[int]) -> dict[str, np.ndarray]:
    n = len(kind)
    ints = np.arange(n, dtype=np.int64)
    return {"kind": np.array(kind, dtype=np.int8), "name_id": np.zeros(n, np.int32), "device": np.zeros(n, np.int64),
            "stream": np.full(n, 7), "pid": np.zeros(n, np.int64), "tid": np.full(n, 7), "start_ns": ints * 10,
            "dur_ns": np.full(n, 5), "corr": ints, "graph_id": np.full(n, -1), "dims_id": np.full(n, -1)}


def test_gpu_mask_is_the_device_kinds() -> None:
    kinds = [int(k) for k in Kind]
    trace = build_trace(path="t", format="kineto", names=["k"], columns=_columns(kinds))
    want = [k in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.GRAPH) for k in kinds]
    assert trace.gpu_mask.tolist() == want


@pytest.mark.parametrize("bad", [-1, max(Kind) + 1])
def test_a_kind_outside_the_enum_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="not a Kind"):
        build_trace(path="t", format="kineto", names=["k"], columns=_columns([0, bad]))
