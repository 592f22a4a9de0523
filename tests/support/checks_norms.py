"""Helpers the tests share (from tests/codegen/test_kernels_norms.py, which imports them from here, as others do)."""

from __future__ import annotations

import numpy as np

from fwdshim import reference as R
from fwdshim.codegen import norms, quantize
from fwdshim.int8 import quantize_act
from support.kernels_common import bits_equal, close, rng

F32 = np.float32


def _inputs(g, rows, n):
    x = g.standard_normal((rows, n)).astype(F32) * F32(3)
    r = g.standard_normal((rows, n)).astype(F32)
    w = g.standard_normal(n).astype(F32)
    b = g.standard_normal(n).astype(F32)
    return x, r, w, b


def check_rms_norm(rows: int, n: int, block: int | None, eps: float = 1e-5) -> None:
    g = rng()
    x, r, w, _ = _inputs(g, rows, n)
    out = norms.rms_norm(n, rows, eps, weight=True, residual=True, write_sum=True, block=block).run(x=x, residual=r, weight=w)
    close(out["y"], R.rms_norm(x, w, r, eps=eps), 4e-6 * (1 + np.abs(R.rms_norm(x, w, r, eps=eps))), "add+norm y")
    bits_equal(out["sum"], (x + r).ravel(), "add+norm writes the float32 sum on")
    plain = norms.rms_norm(n, rows, eps, block=block).run(x=x)["y"]
    close(plain, R.rms_norm(x, eps=eps), 4e-6 * (1 + np.abs(R.rms_norm(x, eps=eps))), "rms_norm y")


def check_rms_norm_exact(rows: int, n: int, block: int | None, fmt: str = "one_word", eps: float = 1e-5) -> None:
    """norm_weight, add_norm and norm_quant fused == their unfused stages, bit for bit."""
    g = rng()
    x, r, w, _ = _inputs(g, rows, n)
    plain = norms.rms_norm(n, rows, eps, block=block).run(x=x)["y"]
    weighted = norms.rms_norm(n, rows, eps, weight=True, block=block).run(x=x, weight=w)["y"]
    bits_equal(weighted, (plain.reshape(rows, n) * w).ravel(), "norm_weight == rms_norm then mul")
    s = (x + r).astype(F32)
    fused = norms.rms_norm(n, rows, eps, weight=True, residual=True, write_sum=True, block=block).run(x=x, residual=r, weight=w)
    unfused = norms.rms_norm(n, rows, eps, weight=True, block=block).run(x=s, weight=w)["y"]
    bits_equal(fused["y"], unfused, "add_norm == add then weighted rms_norm")
    quant = norms.rms_norm(n, rows, eps, weight=True, quant=fmt, store_y=True, block=block).run(x=x, weight=w)
    bits_equal(quant["y"], weighted, "norm_quant stores the norm's y")
    staged = quantize.quantize(n, rows, fmt).run(x=weighted)
    ref = quantize_act(weighted.reshape(rows, n), fmt)
    for key, want in (("q", ref.q), ("d", ref.d), ("s", ref.s)):
        if want is None:
            continue
        bits_equal(quant[key], staged[key], f"norm_quant {key} == rms_norm then quantize")
        bits_equal(quant[key], want.ravel(), f"norm_quant {key} == numerics.quantize_act")
    addq = norms.rms_norm(n, rows, eps, weight=True, residual=True, write_sum=True, quant=fmt, block=block)
    outq = addq.run(x=x, residual=r, weight=w)
    assert "y" not in outq
    bits_equal(outq["q"], quantize_act(unfused.reshape(rows, n), fmt).q.ravel(), "add_norm_quant q")
    bits_equal(outq["d"], quantize_act(unfused.reshape(rows, n), fmt).d.ravel(), "add_norm_quant d")
    bits_equal(outq["sum"], s.ravel(), "add_norm_quant writes the sum on")


def check_layer_norm_softmax(rows: int, n: int, block: int | None) -> None:
    g = rng()
    x, _, w, b = _inputs(g, rows, n)
    y = norms.layer_norm(n, rows, 1e-5, weight=True, bias=True, block=block).run(x=x, weight=w, bias=b)["y"]
    want = R.layer_norm(x, w, None, b)
    close(y, want, 1e-5 * (1 + np.abs(want)), "layer_norm")
    y = norms.softmax(n, rows, block=block).run(x=x)["y"]
    want = R.softmax(x)
    close(y, want, 2e-6 * np.abs(want) + 1e-9, "softmax")
    assert np.allclose(y.reshape(rows, n).sum(axis=1), 1, atol=1e-5)
