"""Helpers the tests share (from tests/codegen/test_kernels_quantize_unary.py, which imports them from here, as others do)."""

from __future__ import annotations

import numpy as np

from fwdshim import reference as R
from fwdshim.codegen import quantize, unary
from fwdshim.int8 import quantize_act
from support.kernels_common import bits_equal, close, rng

F32 = np.float32


def check_quantize(rows: int, n: int, fmt: str, block: int = 64, items: int | None = None) -> None:
    g = rng()
    x = (g.standard_normal((rows, n)) * g.uniform(0.01, 100)).astype(F32)
    x[0, : min(32, n)] = 0  # an all-zero block: d = 0, q = 0, never NaN
    if n > 40:
        x[-1, 37] = F32(-1e-30)  # a tiny value beside ordinary ones
    out = quantize.quantize(n, rows, fmt, block=block, items=items).run(x=x)
    ref = quantize_act(x, fmt)
    bits_equal(out["q"], ref.q.ravel(), "q")
    bits_equal(out["d"], ref.d.ravel(), "d")
    if fmt == "two_words":
        bits_equal(out["s"], ref.s.ravel(), "s = d * sum q")
    assert out["d"][0] == 0 and not out["q"][: min(32, n)].any()


def check_elementwise(n: int, block: int = 64) -> None:
    g = rng()
    a = g.standard_normal(n).astype(F32)
    b = g.standard_normal(n).astype(F32) + F32(0.5)
    for kind in unary.KINDS:
        y = unary.elementwise(kind, n, block=block).run(a=a, b=b)["y"]
        bits_equal(y, R.elementwise(kind, a, b), f"elementwise {kind}")
    y = unary.silu(n, block=block).run(x=a * F32(8))["y"]
    want = R.silu(a * F32(8))
    close(y, want, 4e-7 * (1 + np.abs(want)), "silu")


def check_transpose(rows: int, cols: int, block_rows: int = 8) -> None:
    x = rng().standard_normal((rows, cols)).astype(F32)
    y = unary.transpose(rows, cols, block_rows=block_rows).run(x=x)["y"]
    bits_equal(y, R.transpose(x), "transpose")
