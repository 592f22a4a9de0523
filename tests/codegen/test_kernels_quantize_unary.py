"""The quantize stage (both formats) bit for bit against `numerics.quantize_act`; silu, elementwise
and transpose against the reference executor (elementwise bit for bit: single float32 operations)."""

from __future__ import annotations

import numpy as np
import pytest
from support.checks_quantize_unary import F32, check_elementwise, check_quantize, check_transpose
from support.kernels_common import bits_equal, close, fast_simulator, rng  # noqa: F401

from fwdshim import reference as R
from fwdshim.codegen import quantize, unary


@pytest.mark.parametrize("fmt", ["one_word", "two_words"])
@pytest.mark.parametrize("rows,n,items", [(2, 96, None), (3, 50, None), (2, 96, 1), (3, 50, 4)])
def test_quantize_stage_matches_numerics_exactly(rows, n, fmt, items):
    """A warp per block of 32, or `items` of them (None: the 6 blocks in one CUDA block of two warps,
    three a warp; 4: the last warp's blocks past the end)."""
    check_quantize(rows, n, fmt, items=items)


def test_quantize_rounds_halves_away_from_zero():
    # amax 127 gives d = 1 exactly: x / d = x, and the halves must round away from zero
    x = np.zeros(32, F32)
    x[:6] = [127, 2.5, -2.5, 0.5, -0.5, 1.4999999]
    out = quantize.quantize(32, 1, "one_word", block=32).run(x=x)
    assert out["d"][0] == 1 and list(out["q"][:6]) == [127, 3, -3, 1, -1, 1]


@pytest.mark.parametrize("n,items", [(700, None), (700, 1), (700, 4)])
def test_fused_elementwise_kernel_items(n, items):
    """The fused chain silu(a)·b (the gate/up epilogue) one index a thread or `items` (None: 700 over
    blocks of 64, 8 a thread: `HELD_FLOATS` // 2 inputs, two blocks; 4: three blocks, the last
    partial) against the reference, bit for bit across item counts."""
    from fwdshim.codegen.fused import ElementwiseSpec, Step, elementwise_kernel

    g = rng()
    a = (g.standard_normal(n) * 4).astype(F32)
    b = g.standard_normal(n).astype(F32)
    spec = ElementwiseSpec("elementwise_chains", n, 2, (Step("silu", (("x", 0),)), Step("mul", (("t", 0), ("x", 1)))), (1,))
    k = elementwise_kernel(spec, block=64, items=items)
    y = k.run(a0=a, a1=b)["y0"]
    want = R.elementwise("mul", R.silu(a), b)
    close(y, want, 4e-7 * (1 + np.abs(want)), "silu·mul")
    if items != 1:
        bits_equal(y, elementwise_kernel(spec, block=64, items=1).run(a0=a, a1=b)["y0"], "items a thread == one")
    assert k.grid == (-(-n // (64 * (items or 8))),)


def test_elementwise_and_silu():
    check_elementwise(100)


def test_transpose_partial_tiles():
    check_transpose(40, 35, block_rows=4)


def test_binary_expr_spells_rounding():
    assert unary.binary_expr("mul", "a", "b") == "fmul_rn(a, b)"
    with pytest.raises(ValueError, match="not one of"):
        unary.binary_expr("pow", "a", "b")
