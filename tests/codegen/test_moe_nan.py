"""One rule for NaN router logits, the same on the GPU router and the CPU executor (issue 10, item 4):
a NaN logit ranks below every number (ties, NaN with NaN too, go to the lower index), so `top_k`
distinct experts are kept even from an all-NaN row (the GPU kernel kept one expert twice); the kept
weights are the renormalized softmax of the kept logits, every one NaN where a kept logit is NaN (the
executor gave NaN weights where the kernel picked by the finite logits). Kernels under the simulator."""

from __future__ import annotations

import numpy as np
import pytest
from support.checks_moe import route as gpu_route
from support.kernels_common import fast_simulator, q8_0, rng  # noqa: F401

from fwdshim import reference as R
from fwdshim.dialects.attributes import GgmlType
from fwdshim.weights import WeightData

F32 = np.float32
E, D = 8, 64
SCALES = [0.3, 0.9, 0.1, 0.7, 0.5, 0.8, 0.2, 0.6]  # distinct: experts rank 1, 5, 3, 7, 4, 0, 6, 2


def route(nan_rows: list[int], top_k: int):
    """The GPU router's and the executor's (experts, weights) for router rows `SCALES[i] * base`, the
    rows in `nan_rows` scaled by NaN (their Q8_0 block scales NaN)."""
    g = rng()
    x = g.standard_normal(D).astype(F32)
    base = g.standard_normal(D).astype(F32)
    if base @ x < 0:
        base = -base
    raw, rq, rd = q8_0(np.stack([base * F32(s) for s in SCALES]).astype(F32))
    raw, rd = raw.copy(), rd.copy().reshape(E, -1)
    for r in nan_rows:
        rd[r] = np.nan
        raw[r].reshape(-1, 34)[:, :2] = np.frombuffer(np.float16(np.nan).tobytes(), np.uint8)  # each block's f16 d
    out = gpu_route(E, D, top_k, "f32", rq, rd.ravel(), {"x": x})
    idx, wts = R.moe_route(x, WeightData("r", GgmlType.Q8_0, (E, D), raw), top_k)
    return (np.asarray(out["idx"]), np.asarray(out["wts"])), (idx, wts)


@pytest.mark.parametrize(
    "nan_rows,top_k,want",
    [
        ([], 3, [1, 5, 3]),
        ([1, 4], 3, [5, 3, 7]),  # NaN rows rank last: the best finite ones are kept
        (list(range(E)), 3, [0, 1, 2]),  # all NaN: three distinct experts, the lowest indices
        ([0, 1, 3, 4, 5, 7], 3, [6, 2, 0]),  # two finite, then the lowest NaN index
        (list(range(E)), E, list(range(E))),
    ],
)
def test_gpu_router_and_executor_follow_one_nan_rule(nan_rows, top_k, want):
    (gi, gw), (ri, rw) = route(nan_rows, top_k)
    assert list(gi) == list(ri) == want, f"GPU {list(gi)}, executor {list(ri)}"
    assert len(set(gi.tolist())) == top_k, "distinct experts"
    kept_nan = any(i in nan_rows for i in want)
    assert np.isnan(gw).all() == np.isnan(rw).all() == kept_nan
    if not kept_nan:
        np.testing.assert_allclose(gw, rw, rtol=0, atol=2e-6)
        assert abs(float(gw.sum()) - 1) < 1e-6
