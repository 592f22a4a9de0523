"""The small kernels' shapes of work, drawn at random: rope, quantize and the fused elementwise
kernel taking several indices a thread (`items`, `source.small_items`), and the RMS norm held in
registers, loaded in chunks (`Tuning.norm_held_floats`) or looped (`norm_unroll_items`), the attention's
split combine in registers or looped (`Tuning.combine_registers`). Each form is bit
for bit the one-index (or looped) form over random sizes, blocks and item counts (partial last passes,
blocks past the end), and the reference within float32 rounding. Seeds fixed per test (tests/support/seeds.py)."""

from __future__ import annotations

import numpy as np
import pytest
from support.kernels_common import bits_equal, close, fast_simulator, rng  # noqa: F401

from fwdshim import reference as R
from fwdshim.codegen import norms, quantize, rope
from fwdshim.codegen.fused import ElementwiseSpec, Step, elementwise_kernel
from fwdshim.codegen.tuning import Tuning
from fwdshim.int8 import quantize_act

F32 = np.float32
DRAWS = 4


def test_rope_items_random_shapes():
    g = rng()
    for _ in range(DRAWS):
        hd = int(g.choice([16, 32, 48, 64]))
        half = int(g.choice([h for h in (hd // 2, hd // 4, 8) if 0 < h and 2 * h <= hd]))
        heads, block, items = int(g.integers(1, 6)), int(g.choice([32, 64])), int(g.integers(2, 6))
        x = g.standard_normal(heads * hd).astype(F32)
        ang = R.rope_angles(float(g.integers(0, 500)), half, hd=hd).ravel()
        many = rope.rope(heads * hd, hd, half, block=block, items=items).run(x=x, angles=ang)["y"]
        one = rope.rope(heads * hd, hd, half, block=block, items=1).run(x=x, angles=ang)["y"]
        what = f"rope {heads}x{hd} half {half} block {block} items {items}"
        bits_equal(many, one, what)
        want = R.rope(x, ang.reshape(2, half), hd, half)
        close(many, want, 4e-7 * (1 + np.abs(want)), what)


@pytest.mark.parametrize("fmt", ["one_word", "two_words"])
def test_quantize_items_random_shapes(fmt):
    g = rng()
    for _ in range(DRAWS):
        rows, n, block, items = int(g.integers(1, 4)), int(g.integers(1, 200)), int(g.choice([32, 64])), int(g.integers(2, 5))
        x = (g.standard_normal((rows, n)) * g.uniform(0.01, 50)).astype(F32)
        many = quantize.quantize(n, rows, fmt, block=block, items=items).run(x=x)
        one = quantize.quantize(n, rows, fmt, block=block, items=1).run(x=x)
        ref = quantize_act(x, fmt)
        what = f"quantize {rows}x{n} block {block} items {items}"
        for key, want in (("q", ref.q), ("d", ref.d), ("s", ref.s)):
            if want is not None:
                bits_equal(many[key], one[key], f"{what} {key}")
                bits_equal(many[key], want.ravel(), f"{what} {key} == numerics")


def test_elementwise_items_random_shapes():
    g = rng()
    spec_of = {
        "silu_mul": (2, (Step("silu", (("x", 0),)), Step("mul", (("t", 0), ("x", 1)))), (1,)),
        "add_mul_max": (3, (Step("add", (("x", 0), ("x", 1))), Step("mul", (("t", 0), ("x", 2))), Step("max", (("t", 1), ("x", 0)))), (0, 2)),
    }  # fmt: skip
    for _ in range(DRAWS):
        kind = str(g.choice(list(spec_of)))
        inputs, steps, outputs = spec_of[kind]
        n, block, items = int(g.integers(1, 700)), int(g.choice([32, 64, 128])), int(g.integers(2, 9))
        spec = ElementwiseSpec("elementwise_chains", n, inputs, steps, outputs)
        args = {f"a{j}": (g.standard_normal(n) * 3).astype(F32) for j in range(inputs)}
        many = elementwise_kernel(spec, block=block, items=items).run(**args)
        one = elementwise_kernel(spec, block=block, items=1).run(**args)
        for key in one:
            bits_equal(many[key], one[key], f"{kind} over {n}, block {block}, items {items}: {key}")


@pytest.mark.parametrize("quant", [None, "one_word"])
def test_rms_norm_registers_chunks_and_loop_random_shapes(quant):
    """Held whole (the default budget), in chunks (a budget of 4 values), looped (no unrolling): the
    same bits over random rows, widths and blocks."""
    g = rng()
    for _ in range(DRAWS):
        rows, n, block = int(g.integers(1, 3)), int(g.integers(1, 400)), int(g.choice([32, 64]))
        x = (g.standard_normal((rows, n)) * 3).astype(F32)
        r = g.standard_normal((rows, n)).astype(F32)
        w = g.standard_normal(n).astype(F32)
        outs = []
        for held, unroll in ((48, 32), (4, 32), (48, 0)):
            tuning = Tuning(norm_held_floats=held, norm_unroll_items=unroll)
            k = norms.rms_norm(n, rows, 1e-5, weight=True, residual=True, write_sum=True, quant=quant, store_y=True, block=block,
                               tuning=tuning)  # fmt: skip
            outs.append(k.run(x=x, residual=r, weight=w))
        what = f"rms_norm {rows}x{n} block {block}"
        for other in outs[1:]:
            for key in outs[0]:
                bits_equal(other[key], outs[0][key], f"{what}: {key}")
        want = R.rms_norm(x, w, r)
        close(outs[0]["y"], want, 4e-6 * (1 + np.abs(want)), what)


@pytest.mark.parametrize("quant", [None, "one_word", "two_words"])
def test_rms_norm_split_over_blocks_random_shapes(quant):
    """A row split over `cols` blocks (`norms.default_cols`: each block sums the whole row, stores
    its own values) is bit for bit the one-block kernel, held whole or in chunks, with or without a
    weight, a residual and the sum written on, over random rows, widths, blocks and splits."""
    g = rng()
    for _ in range(DRAWS):
        rows, block = int(g.integers(1, 3)), int(g.choice([32, 64]))
        n = int(g.integers(2 * block + 1, 12 * block))
        items = -(-n // block)
        res, wt = bool(g.integers(2)), bool(g.integers(2))
        x = (g.standard_normal((rows, n)) * 3).astype(F32)
        given = {"x": x}
        if res:
            given["residual"] = g.standard_normal((rows, n)).astype(F32)
        if wt:
            given["weight"] = g.standard_normal(n).astype(F32)
        outs = {}
        for held in (48, 4):
            for cols in sorted({1, 2, int(g.integers(2, items + 1)), items}):
                k = norms.rms_norm(n, rows, 1e-5, weight=wt, residual=res, write_sum=res, quant=quant, store_y=True,
                                   block=block, cols=cols, tuning=Tuning(norm_held_floats=held))  # fmt: skip
                assert k.grid == (rows * cols,)
                outs[(held, cols)] = k.run(**given)
        one = outs[(48, 1)]
        for key, out in outs.items():
            for name in one:
                bits_equal(out[name], one[name], f"rms_norm {rows}x{n} block {block} held/cols {key}: {name}")
        want = R.rms_norm(x, given.get("weight"), given.get("residual"))
        close(one["y"], want, 4e-6 * (1 + np.abs(want)), f"rms_norm {rows}x{n}")
    with pytest.raises(ValueError, match="blocks a row"):
        norms.rms_norm(64, 1, block=32, cols=3)


def test_rms_norm_default_cols():
    assert norms.default_cols(4096, 256) == 16  # Llama-3-8B's norms: one block per value a thread
    assert norms.default_cols(576, 256) == 1  # SmolLM2's: one block (a prologue or a tail)
    assert norms.default_cols(8192, 256) == 32 and norms.default_cols(8193, 256) == 1  # past `Tuning.norm_unroll_items`: looped


def test_attention_combine_registers_random_shapes():
    """The attention's combine in registers (`Tuning.combine_registers`) and looped through shared
    memory: the same bits over random heads, caches, fills, splits, blocks and unrolls."""
    from fwdshim.codegen import attention

    g = rng()
    for _ in range(DRAWS):
        kv = int(g.integers(1, 3))
        h = kv * int(g.choice([1, 2, 3]))
        hd = int(g.choice([16, 32, 40]))
        l = int(g.integers(8, 40))  # noqa: E741
        c = int(g.integers(0, l))
        splits, block, unroll = int(g.integers(2, 7)), int(g.choice([32, 64])), int(g.integers(1, 3))
        given = dict(
            q=g.standard_normal(h * hd).astype(F32), k=g.standard_normal(kv * hd).astype(F32),
            v=g.standard_normal(kv * hd).astype(F32), k_cache=g.standard_normal((l - 1, kv * hd)).astype(F32),
            v_cache=g.standard_normal((l - 1, kv * hd)).astype(F32), pos=np.array([c], np.int32),
        )  # fmt: skip
        outs = []
        for regs in (32, 0):
            kern = attention.attention(h, kv, hd, l, block=block, unroll=unroll, splits=splits, tuning=Tuning(combine_registers=regs))
            outs.append(kern.run(**given))
        what = f"attention h {h} kv {kv} hd {hd} l {l} c {c} splits {splits} block {block} unroll {unroll}"
        bits_equal(outs[0]["y"], outs[1]["y"], what)
        want = R.attention(given["q"], given["k"], given["v"], given["k_cache"][:c], given["v_cache"][:c], h, kv, hd)
        close(outs[0]["y"], want, 2e-6 * (1 + np.abs(want)) * np.sqrt(hd), what)
