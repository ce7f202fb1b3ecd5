"""Properties of the cost curve's fits on generated samples (hypothesis; examples and seeds from the profile in
tests/conftest.py: derandomized in ``make test``, fresh seeds in ``make fuzz``)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from launchgap.costmodel import DEFAULT_SCALING, KERNEL_CLASSES, WAVE_SHARE_GRID, SizeSample, _kernel_factor, \
    fit_attention_wave_share, fit_cost_curve

ATTN, GEMM = KERNEL_CLASSES.index("attention"), KERNEL_CLASSES.index("gemm")
SMS = 132


def _load(b: int, per_row: int, resident: int, share: float) -> float:
    """The co-resident rule's load (docs/costmodel.md): blocks per SM, ``share`` of it paid in whole waves."""
    p = max(1.0, per_row * b / SMS)
    return (1 - share) * p + share * (min(p, resident) + resident * (np.ceil(p / resident - 1e-9) - 1))


@given(st.sampled_from(list(WAVE_SHARE_GRID)), st.sampled_from([14, 24, 32, 40, 64]), st.integers(2, 4),
       st.lists(st.integers(1, 128), min_size=3, max_size=8, unique=True), st.floats(1.0, 15.0))
def test_fitted_share_carries_every_size_to_its_neighbours(share: float, per_row: int, resident: int,
                                                            sizes: list[int], unit_us: float) -> None:
    """Attention times made by the rule with a share on the grid, at 3-8 traced sizes: the fitted share (or the prior,
    on a tie) carries each size's time to its neighbours' exactly, so the curve through them passes each traced size's
    own prediction at the others; no fit only where every share carries them alike. One row's time stays under the
    split-KV rule's 30 us (1.5 units of at most 15 us), which would take the rows below a size as split."""
    sizes = sorted(sizes)
    xs = [SizeSample(b, 500.0 + unit_us * (0.5 + _load(b, per_row, resident, share)),
                     np.array([ATTN, GEMM], dtype=np.int8),
                     np.array([unit_us * (0.5 + _load(b, per_row, resident, share)), 50.0]),
                     np.array([per_row * b, 32]), np.array([128, 256]), resident=np.array([resident, 1]))
          for b in sizes]
    fitted = fit_attention_wave_share(DEFAULT_SCALING, xs, 200.0, SMS)
    if fitted is None:  # every share alike: the data cannot tell them apart, the true one included
        return
    got, n = fitted
    assert n == len(sizes)
    c = fit_cost_curve(xs, 128, None, {"name": "NVIDIA H200", "sm_count": SMS})
    for i in range(len(sizes) - 1):
        a, b = sizes[i], sizes[i + 1]
        want = unit_us * (_load(b, per_row, resident, share) - _load(a, per_row, resident, share))
        matmul = 50.0 * (b - a) / 5000 / (1 + b / 5000)  # the matmul beside it: (1 + rows/5000)
        assert np.isfinite(c.own_change(b, a))
        assert abs(float(c.own_change(b, a)) - want - matmul) <= 1e-6 * max(abs(want), 1.0), (got, share)


@given(st.floats(0.5, 10.79), st.floats(0.4, 2.5), st.integers(1, 128), st.sampled_from([8, 16, 32, 40, 64]),
       st.sampled_from([-1, 1, 2, 4]))
def test_latency_bound_attention_grows_past_its_latency_at_the_bandwidth(t0: float, k: float, b0: int,
                                                                         per_row: int, resident: int) -> None:
    """A latency-bound attention launch (traced within 1.2 x 9 us) at another GPU's bandwidth ratio ``k``: its own
    size keeps its time; wherever the rules put its time on the H200 (``t_ref``) at or past the latency ``L``, what
    they add past it is ``k`` times as long; below it the rules' time as it is."""
    x = SizeSample(b0, 500.0, np.array([ATTN], dtype=np.int8), np.array([t0]), np.array([per_row * b0]),
                   np.array([128]), resident=np.array([resident]))
    b = np.arange(1, 129, dtype=float)
    rules = _kernel_factor(DEFAULT_SCALING, x, b, 200.0, SMS)[0]
    got = _kernel_factor(replace(DEFAULT_SCALING, attention_bandwidth_ratio=k), x, b, 200.0, SMS)[0]
    lat = min(DEFAULT_SCALING.attention_latency_us, t0)
    t_ref = (lat + (t0 - lat) / k) * rules
    want = np.where(t_ref >= lat, lat + k * (t_ref - lat), t_ref)
    assert np.allclose(got * t0, want, rtol=1e-9, atol=1e-9)
    assert abs(got[b0 - 1] - 1.0) < 1e-12  # the traced size keeps its time
