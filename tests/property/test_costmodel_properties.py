"""Properties of the cost curve's fits on generated samples (hypothesis; examples and seeds from the profile in
tests/conftest.py: derandomized in ``make test``, fresh seeds in ``make fuzz``)."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from launchgap.costmodel import DEFAULT_SCALING, KERNEL_CLASSES, WAVE_SHARE_GRID, SizeSample, \
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
