"""Row kernels (codegen.norms) against the reference executor, and their fused variants bit for bit
against the unfused composition. Under the simulator every float operation rounds on its own, so the
bit-exact checks test the algorithm (one reduction order for every variant); they count for the
contract's `fused: EXACT` on a GPU, where the `gpu` suite runs them at real sizes."""

from __future__ import annotations

import numpy as np
import pytest
from support.checks_norms import F32, _inputs, check_layer_norm_softmax, check_rms_norm, check_rms_norm_exact
from support.kernels_common import bits_equal, close, fast_simulator, rng  # noqa: F401

from fwdshim import reference as R
from fwdshim.codegen import norms
from fwdshim.codegen.tuning import Tuning


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


@pytest.mark.parametrize("hd,block", [(64, 32), (128, 32)])
def test_a_heads_norm_with_its_rope_is_the_norm_then_the_rope(hd, block):
    """issue 41: an RMS norm of one head a row (a qk-norm) carrying the rope of its rows
    (`norms.rope_variant`, what `codegen.merge` runs in place of the rope launch after it) stores the
    norm's `y` and the rope's `z` bit for bit as the norm kernel then the rope kernel do, and `z` is
    the float64 rope of the float64 norm within float32 rounding."""
    from fwdshim.codegen import rope

    rows, half = 3, hd // 2
    g = rng()
    x = (2.0 * g.standard_normal((rows, hd))).astype(F32)
    w = (1.0 + 0.1 * g.standard_normal(hd)).astype(F32)
    theta = g.uniform(-np.pi, np.pi, half)
    angles = np.concatenate([np.cos(theta), np.sin(theta)]).astype(F32)
    plain = norms.rms_norm(hd, rows, 1e-6, weight=True, block=block)
    fused = norms.rope_variant(plain, hd, half, Tuning())
    assert fused is not None and fused.param_names == ("x", "weight", "y", "angles", "z") and fused.grid == (rows,)
    y = plain.run(x=x, weight=w)["y"]
    z = rope.rope(rows * hd, hd, half).run(x=y, angles=angles)["y"]
    out = fused.run(x=x, weight=w, angles=angles)
    bits_equal(out["y"], y, "y")
    bits_equal(out["z"], z, "z")
    x64 = x.astype(np.float64)
    n64 = x64 / np.sqrt((x64**2).mean(axis=1, keepdims=True) + 1e-6) * w
    a, b = n64[:, :half], n64[:, half:]
    want = np.concatenate([a * angles[:half] - b * angles[half:], a * angles[half:] + b * angles[:half]], axis=1)
    close(out["z"].reshape(rows, hd), want, 1e-5 * (1 + np.abs(want)), "z against float64")


def test_a_norm_takes_a_rope_only_over_its_own_heads():
    """`norms.rope_variant` is None, and `rms_norm(rope=...)` says why, where a thread would need
    values it does not hold or the row is not one head."""
    t = Tuning()
    plain = norms.rms_norm(64, 2, weight=True, block=32)
    assert norms.rope_variant(plain, 128, 64, t) is None  # a row of 64 is not a head of 128
    assert norms.rope_variant(norms.rms_norm(32, 2, weight=True, block=32), 32, 16, t) is None  # pair (i, i+16): two threads
    assert norms.rope_variant(norms.rms_norm(64, 2, residual=True, write_sum=True, block=32), 64, 32, t) is None
    assert norms.rope_variant(norms.rope_variant(plain, 64, 32, t), 64, 32, t) is None  # a rope already
    with pytest.raises(ValueError, match=r"pairs \(i, i \+ 16\) are not in one thread of 32"):
        norms.rms_norm(32, 2, weight=True, block=32, rope=(32, 16))
    with pytest.raises(ValueError, match="is not one head"):
        norms.rms_norm(64, 2, weight=True, block=32, rope=(128, 64))
    with pytest.raises(ValueError, match=r"heads of 64 with 16 pairs: the rope here turns every value"):
        norms.rms_norm(64, 2, weight=True, block=32, rope=(64, 16))
    for bad in ((64,), (64, 32, 1), (64.0, 32.0)):
        with pytest.raises(ValueError, match=r"\(hd, half\), two positive whole numbers"):
            norms.rms_norm(64, 2, weight=True, block=32, rope=bad)
