"""Row kernels (codegen.norms) against the reference executor, and their fused variants bit for bit
against the unfused composition. Under the simulator every float operation rounds on its own, so the
bit-exact checks test the algorithm (one reduction order for every variant); they count for the
contract's `fused: EXACT` on a GPU, where the `gpu` suite runs them at real sizes."""

from __future__ import annotations

import numpy as np
import pytest
from kernels_common import bits_equal, close, fast_simulator, rng  # noqa: F401

from fwdshim import reference as R
from fwdshim.codegen import norms, quantize
from fwdshim.codegen.tuning import Tuning
from fwdshim.int8 import quantize_act

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


@pytest.mark.parametrize("rows,n,block", [(3, 100, 64), (2, 64, 32)])
def test_rms_norm_matches_reference(rows, n, block):
    check_rms_norm(rows, n, block)


@pytest.mark.parametrize("fmt", ["one_word", "two_words"])
def test_rms_norm_variants_bit_exact(fmt):
    check_rms_norm_exact(3, 80, 64, fmt)


@pytest.mark.parametrize("fmt", [None, "two_words"])
@pytest.mark.parametrize("n", [200, 1100])
def test_rms_norm_registers_equal_the_loop(fmt, n):
    """A row of up to `Tuning.norm_unroll_items` values a thread is unrolled (loads first: 200 at 64 threads, 4
    values a thread, all held; 1100, 18 a thread, 54 values with residual and weight, in chunks of
    `Tuning.norm_held_floats`, the second pass loading again); wider rows loop. All compute the same bits: the
    same operations in the same order (a partial last pass)."""
    rows, block = 2, 64
    g = rng()
    x, r, w, _ = _inputs(g, rows, n)

    def run(tuning):
        k = norms.rms_norm(n, rows, 1e-5, weight=True, residual=True, write_sum=True, quant=fmt, store_y=True, block=block,
                           tuning=tuning)  # fmt: skip
        return k, k.run(x=x, residual=r, weight=w)

    k_reg, reg = run(Tuning())
    k_loop, loop = run(Tuning(norm_unroll_items=0))
    assert "for i in range" not in k_reg.source and "for i in range" in k_loop.source
    assert (k_reg.source.count("x0 = ") == 2) == (n == 1100), "the chunked form loads its first value twice"
    assert set(reg) == set(loop)
    for key in reg:
        bits_equal(reg[key], loop[key], f"{key}: registers == loop")
    close(reg["y"], R.rms_norm(x, w, r), 4e-6 * (1 + np.abs(R.rms_norm(x, w, r))), "add+norm y")


def test_quant_epilogue_all_zero_block_gives_zero_scale():
    x = rng().standard_normal((1, 96)).astype(F32)
    w = np.ones(96, F32)
    w[32:64] = 0  # the middle block of y is all zero
    out = norms.rms_norm(96, 1, 1e-5, weight=True, quant="two_words", block=64).run(x=x, weight=w)
    assert out["d"][1] == 0 and out["s"][1] == 0 and not out["q"][32:64].any()
    assert np.isfinite(out["d"]).all() and out["d"][0] > 0


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


@pytest.mark.parametrize("rows,n,block", [(2, 100, 64)])
def test_layer_norm_and_softmax_match_reference(rows, n, block):
    check_layer_norm_softmax(rows, n, block)


def test_row_kernel_params_are_documented():
    k = norms.rms_norm(4096, 1, 1e-6, weight=True, residual=True, write_sum=True, quant="one_word")
    assert k.param_names == ("x", "residual", "weight", "q", "d", "sum")
    assert k.grid == (16,) and k.block == (256,) and k.name.endswith("_c16_b256")  # norms.default_cols
    assert "fdiv_rn(h0, r)" in k.source and "for i in range" not in k.source and "def rms_norm_k(" in k.source
    assert k.signature == "void(float32[::1], float32[::1], float32[::1], int8[::1], float32[::1], float32[::1])"
    with pytest.raises(ValueError, match="writing the sum on needs a residual"):
        norms.rms_norm(64, write_sum=True)


def test_a_norms_name_holds_its_eps():
    """A kernel's name holds every constant it bakes in: two RMS (or layer) norms of different eps are
    two kernels, two rows in `fwdshim profile` (issue 43); the default eps (`fwd.DEFAULT_EPS`, also as
    the IR's f32 holds it) adds nothing, so the common names stay as they were."""
    from fwdshim.codegen import norms

    a, b = norms.rms_norm(576, eps=1e-5, weight=True), norms.rms_norm(576, eps=1e-6, weight=True)
    assert a.name == "rms_norm_w_1x576_b256" and b.name == "rms_norm_w_1x576_eps1em06_b256" and a.source != b.source
    assert norms.rms_norm(576, eps=float(np.float32(1e-5)), weight=True).name == a.name
    assert norms.layer_norm(576, eps=2.5e-3).name == "layer_norm_1x576_eps0p0025_b256"
