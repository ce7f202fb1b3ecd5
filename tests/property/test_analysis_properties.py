"""Properties of the analysis on generated traces (hypothesis; examples and seeds from the profile in
tests/conftest.py: derandomized in ``make test``, fresh seeds in ``make fuzz``)."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from launchgap.gaps import CAUSES, compute_gaps
from launchgap.report import analyze_trace
from launchgap.trace import Kind, Trace, build_trace


NAMES = ["k0", "k1", "k2", "cudaLaunchKernel", "cudaGraphLaunch", "cudaStreamSynchronize", "decode_step[bs=4]",
         "memcpy"]
NID = {n: i for i, n in enumerate(NAMES)}


@st.composite
def traces(draw) -> dict[str, np.ndarray]:
    """Random kernels/copies on 1-2 devices and 1-3 streams; launches with and without correlation,
    graph launches replaying several ops, sync calls, overlapping and zero-length ops, 0-3 steps."""
    n_ops = draw(st.integers(1, 25))
    rows: list[tuple] = []  # kind, name, device, stream, tid, start, dur, corr
    corr = 1
    for _ in range(n_ops):
        dev = draw(st.integers(0, 1))
        stream = draw(st.integers(1, 3))
        start = draw(st.integers(0, 2_000)) * 100
        dur = draw(st.sampled_from([0, 100, 500, 2_000, 30_000]))
        kind = draw(st.sampled_from([Kind.KERNEL, Kind.KERNEL, Kind.MEMCPY]))
        how = draw(st.sampled_from(["eager", "eager", "none", "graph"]))
        c = -1
        if how != "none":
            c = corr
            corr += 1
            delay = draw(st.integers(0, 50)) * 100
            api = "cudaLaunchKernel" if how == "eager" else "cudaGraphLaunch"
            rows.append((Kind.RUNTIME, api, -1, -1, draw(st.integers(1, 2)), max(start - delay, 0),
                         draw(st.integers(1, 30)) * 100, c))
            if how == "graph":  # more nodes of the same replay
                for j in range(draw(st.integers(0, 3))):
                    rows.append((Kind.KERNEL, "k2", dev, stream, 0, start + dur + 300 * (j + 1), 200, c))
        rows.append((kind, "memcpy" if kind == Kind.MEMCPY else draw(st.sampled_from(["k0", "k1"])), dev, stream, 0,
                     start, dur, c))
    for _ in range(draw(st.integers(0, 2))):
        rows.append((Kind.RUNTIME, "cudaStreamSynchronize", -1, -1, 1, draw(st.integers(0, 2_000)) * 100,
                     draw(st.integers(1, 100)) * 100, -1))
    n_steps = draw(st.integers(0, 3))
    if n_steps:
        bounds = sorted(draw(st.lists(st.integers(0, 2_100), min_size=n_steps + 1, max_size=n_steps + 1,
                                      unique=True)))
        for a, b in zip(bounds[:-1], bounds[1:]):
            rows.append((Kind.ANNOTATION, "decode_step[bs=4]", -1, -1, 1, a * 100, (b - a) * 100 - 1, -1))
    cols = list(zip(*rows))
    return {
        "kind": np.array(cols[0], dtype=np.int8), "name_id": np.array([NID[n] for n in cols[1]], dtype=np.int32),
        "device": np.array(cols[2]), "stream": np.array(cols[3]), "pid": np.where(np.array(cols[2]) >= 0, 0, 99),
        "tid": np.array(cols[4]), "start_ns": np.array(cols[5]), "dur_ns": np.array(cols[6]),
        "corr": np.array(cols[7]), "graph_id": np.full(len(rows), -1), "dims_id": np.full(len(rows), -1),
    }


def _build(cols: dict[str, np.ndarray], shift_ns: int = 0, order: np.ndarray | None = None) -> Trace:
    c = dict(cols)
    c["start_ns"] = c["start_ns"] + shift_ns
    if order is not None:
        c = {k: v[order] for k, v in c.items()}
    return build_trace(path="gen", format="kineto", names=NAMES, columns=c)


@given(traces())
def test_causes_sum_to_idle_exactly(cols) -> None:
    t = _build(cols)
    gaps, busy = compute_gaps(t)
    total = sum(gaps.cause_ns(c) for c in CAUSES)
    assert np.array_equal(total, gaps.dur_ns)
    for c in CAUSES:
        assert (gaps.cause_ns(c) >= 0).all()
    for b in busy:
        ops = b.ops
        window = t.end_ns[ops].max() - t.start_ns[ops].min()
        assert b.busy_ns <= window
        assert gaps.dur_ns[gaps.device == b.device].sum() == window - b.busy_ns


@given(traces())
def test_report_invariants(cols) -> None:
    rep = analyze_trace(_build(cols))
    for d in rep.devices:
        assert d.gpu_busy_us <= d.gpu_window_us + 1e-9
        assert abs(sum(d.idle_us_by_cause.values()) - d.gpu_idle_us) < 0.01
    for s in rep.steps:
        assert 0 <= s.gpu_busy_us <= s.dur_us + 1e-9
        assert abs(sum(s.idle_us_by_cause.values()) - s.gpu_idle_us) < 0.01
        # The graph prediction never beats the GPU's own work.
        assert s.predicted_graph_us >= s.gpu_busy_us


def _numbers(rep) -> tuple:
    dev = [(d.device, d.kernels, d.gpu_busy_us, d.gpu_window_us, tuple(sorted(d.idle_us_by_cause.items())))
           for d in rep.devices]
    steps = [(s.index, s.batch_size, s.dur_us, s.gpu_busy_us, s.gpu_idle_us, tuple(sorted(s.idle_us_by_cause.items())),
              s.kernels, s.kernel_launches, s.graph_launches, s.launch_api_us, s.predicted_graph_us)
             for s in rep.steps]
    return rep.mode, dev, steps


@given(traces(), st.integers(-10**6, 10**12), st.randoms(use_true_random=False))
def test_invariant_under_shift_and_reordering(cols, shift, rnd) -> None:
    base = _numbers(analyze_trace(_build(cols)))
    assert _numbers(analyze_trace(_build(cols, shift_ns=shift))) == base
    order = np.arange(len(cols["kind"]))
    rnd.shuffle(order)
    # Ties in start time may swap which op is "before" a gap, never the numbers.
    assert _numbers(analyze_trace(_build(cols, order=order))) == base


@given(traces())
def test_split_per_device_gives_same_device_totals(cols) -> None:
    whole = {d.device: d for d in analyze_trace(_build(cols)).devices}
    for dev in whole:
        keep = (cols["device"] == dev) | (cols["device"] < 0)
        part = {k: v[keep] for k, v in cols.items()}
        (d,) = analyze_trace(_build(part)).devices
        assert (d.gpu_busy_us, d.gpu_window_us, d.idle_us_by_cause) == \
            (whole[dev].gpu_busy_us, whole[dev].gpu_window_us, whole[dev].idle_us_by_cause)
