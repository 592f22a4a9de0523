"""Rope and single-query GQA attention (codegen.rope, codegen.attention) against the reference
executor: GQA ratios 1, 3, 4 and 8, an empty cache (the first token), a full cache, heads not a
multiple of 32 wide (16-byte rows with idle lanes, scalar rows when `hd % 4`, two loads per lane),
block and unroll shapes whose last step is partial, and the quantize epilogue (attn_output_quant) bit
for bit against `numerics.quantize_act` of the kernel's own output and against the storing variant.
The cache append kernel (`attention.kv_append`) against NumPy row copies."""

from __future__ import annotations

import numpy as np
import pytest
from support.checks_attention import F32, check_attention, check_rope
from support.kernels_common import bits_equal, close, fast_simulator, rng  # noqa: F401

from fwdshim import reference as R
from fwdshim.codegen import attention
from fwdshim.codegen.tuning import Tuning


@pytest.mark.parametrize("ratio", [1, 3, 4, 8])
def test_gqa_ratios(ratio):
    check_attention(h=2 * ratio, kv=2, hd=32, l=6, c=4)


def test_first_token_empty_cache():
    check_attention(h=2, kv=1, hd=32, l=5, c=0)


def test_full_cache_and_narrow_heads():
    check_attention(h=4, kv=2, hd=40, l=7, c=6, block=64)


@pytest.mark.parametrize("fmt", ["one_word", "two_words"])
def test_attention_output_quant(fmt):
    check_attention(h=4, kv=2, hd=64, l=4, c=3, quant=fmt)


@pytest.mark.parametrize(
    ("hd", "block", "unroll", "c"),
    [
        (18, 32, 2, 5),  # hd % 4: scalar loads, 32 lanes for 18 dims
        (160, 64, 1, 6),  # 40 vectors: two loads per lane, the second half empty
        (64, 64, 3, 13),  # 16 lanes a position, 2 a warp, 3 deep: a partial last step
        (8, 32, 4, 17),  # 2 lanes a position: 16 positions a warp
    ],
)
def test_attention_row_layouts(hd, block, unroll, c):
    check_attention(h=2, kv=1, hd=hd, l=20, c=c, block=block, unroll=unroll)


@pytest.mark.parametrize(
    ("c", "splits", "active"),
    [
        (0, 6, 1),  # the current position alone: one split, no combine
        (5, 6, 2),  # 6 positions in splits of 4: two active, four blocks return at once
        (22, 6, 6),  # 23 positions in splits of 4: every split active, the last partial
        (22, 3, 3),  # splits of 8: two passes of the block's segments each
    ],
)
def test_attention_splits(c, splits, active):
    """hd 32 at 32 threads: 4 segments a pass, so splits of ceil((c+1)/splits) round up to 4 rows."""
    assert -(-(c + 1) // attention.split_rows(c, splits, 32, 32)) == active
    check_attention(h=3, kv=1, hd=32, l=24, c=c, block=32, unroll=1, splits=splits)


@pytest.mark.parametrize(
    ("c", "splits", "active"),
    [
        (5, 6, 1),  # 6 positions: one step of 8 rows, one split, no combine (two splits of 4 before)
        (22, 6, 3),  # 23 positions: splits of 8 rows, three active (six of 4 before: the same one step)
        (22, 2, 2),  # splits of 16: two steps each
    ],
)
def test_attention_split_rows_are_whole_steps(c, splits, active):
    """hd 32 at 32 threads, unroll 2: a step is 8 rows (two passes of 4 segments), and a split's rows
    round up to whole steps (`limits.split_rows`): no split takes a step more, fewer splits are active."""
    assert attention.split_rows(c, splits, 32, 32, 2) == 8 * -(-(-(-(c + 1) // splits)) // 8)
    assert -(-(c + 1) // attention.split_rows(c, splits, 32, 32, 2)) == active
    check_attention(h=3, kv=1, hd=32, l=24, c=c, block=32, unroll=2, splits=splits)


@pytest.mark.parametrize(("hd", "block", "unroll", "splits", "l"), [(32, 32, 2, 6, 24), (64, 128, 4, 17, 1024), (128, 128, 4, 17, 4096), (64, 64, 4, 1, 40)])
def test_the_kernels_split_rows_are_the_hosts(hd, block, unroll, splits, l):  # noqa: E741
    """The kernel computes its rows a split on the device from `c`; the host sizes the score row and
    the tests' expectations by `limits.split_rows`: the generated line agrees with it at every `c`."""
    k = attention.attention(4, 2, hd, l, block=block, unroll=unroll, splits=splits)
    line = next(t.strip() for t in k.source.splitlines() if t.strip().startswith("rows = "))
    for c in range(l):
        assert eval(line.split("=", 1)[1], {"c": c}) == attention.split_rows(c, splits, block, hd, unroll), (line, c)


@pytest.mark.parametrize("fmt", ["one_word", "two_words"])
def test_attention_splits_quant(fmt):
    check_attention(h=2, kv=1, hd=32, l=24, c=19, quant=fmt, block=64, unroll=2, splits=5)


@pytest.mark.parametrize(
    ("c", "quant", "splits", "l"),
    [(5, None, 6, 24), (22, None, 6, 24), (19, "two_words", 6, 24), (75, None, 20, 96), (63, "one_word", 20, 96)],
)
def test_attention_combine_registers_equal_the_loop(c, quant, splits, l):  # noqa: E741
    """Up to `Tuning.combine_registers` splits the last block of a head holds every split's max, sum
    and output in registers (loads issued together, splits past `active` read in range and unused);
    more go through shared memory, the outputs `combine_batch` splits a step. Same operations, same
    order: the same bits (2 or 6 of 6 splits active; 19 or 16 of 20: batches of 8 with a part one)."""
    g = rng()
    h, kv, hd = 3, 1, 32
    given = dict(
        q=g.standard_normal(h * hd).astype(F32), k=g.standard_normal(kv * hd).astype(F32),
        v=g.standard_normal(kv * hd).astype(F32), k_cache=g.standard_normal((l - 1, kv * hd)).astype(F32),
        v_cache=g.standard_normal((l - 1, kv * hd)).astype(F32), pos=np.array([c], np.int32),
    )  # fmt: skip

    def run(tuning):
        kern = attention.attention(h, kv, hd, l, quant=quant, store_y=True, block=32, unroll=1, splits=splits, tuning=tuning)
        return kern, kern.run(**given)

    k_reg, reg = run(Tuning())
    k_loop, loop = run(Tuning(combine_registers=0))
    assert "for t in range(active)" not in k_reg.source and "for t in range(active)" in k_loop.source
    assert "m0 = part_ml" in k_reg.source and "m0 = part_ml" not in k_loop.source
    for key in [k for k in ("y", "yq", "yd", "ys") if k in reg]:
        bits_equal(reg[key], loop[key], f"{key}: registers == loop")
    want = R.attention(given["q"], given["k"], given["v"], given["k_cache"][:c], given["v_cache"][:c], h, kv, hd)
    close(reg["y"], want, 2e-6 * (1 + np.abs(want)) * np.sqrt(hd), "attention y")


def test_attention_split_counts_reset_between_launches():
    """The count the last split resets serves the next launch: two launches on the same arrays."""
    from numba import cuda

    g = rng()
    h, kv, hd, l = 2, 1, 32, 24  # noqa: E741
    kern = attention.attention(h, kv, hd, l, block=32, unroll=1, splits=4)
    given = dict(
        q=g.standard_normal(h * hd).astype(F32), k=g.standard_normal(kv * hd).astype(F32),
        v=g.standard_normal(kv * hd).astype(F32), k_cache=g.standard_normal((l - 1) * kv * hd).astype(F32),
        v_cache=g.standard_normal((l - 1) * kv * hd).astype(F32),
    )  # fmt: skip
    arrays = kern.host_arrays(**given, pos=np.array([17], np.int32))
    dev = [cuda.to_device(a) for a in arrays]
    names = kern.param_names
    for c in (17, 9):
        dev[names.index("pos")] = cuda.to_device(np.array([c], np.int32))
        kern.fn[kern.grid, kern.block](*dev)
        y = dev[names.index("y")].copy_to_host()
        kc, vc = (given[n].reshape(l - 1, -1)[:c] for n in ("k_cache", "v_cache"))
        want = R.attention(given["q"], given["k"], given["v"], kc, vc, h, kv, hd)
        close(y, want, 2e-6 * (1 + np.abs(want)) * np.sqrt(hd), f"launch at c={c}")
        assert not dev[names.index("count")].copy_to_host().any()


def test_default_launch_follows_the_cache():
    assert attention.default_block(64, 4096) == 128 and attention.default_block(64, 6) == 64
    assert attention.default_block(8, 20) == 32  # 16 positions a warp: one warp covers the cache
    assert attention.default_unroll(64) == 4 and attention.default_unroll(256) == 2
    assert attention.layout(64) == (4, 16, 1) and attention.layout(18) == (1, 32, 1) and attention.layout(160) == (4, 32, 2)
    # a split per SPLIT_ROWS (60) rows, at most MAX_SPLITS (17), whatever the heads
    assert attention.default_splits(9, 64, 512, 128) == 9 and attention.default_splits(32, 128, 512, 128) == 9
    assert attention.default_splits(9, 64, 1024, 128) == 17 and attention.default_splits(32, 128, 4096, 128) == 17
    assert attention.default_splits(2, 32, 61, 32) == 1 and attention.default_splits(2, 32, 62, 32) == 2
    # no more splits than passes of the block's lane segments: 1024 rows a pass at heads of 4
    assert attention.default_splits(2, 4, 2000, 1024) == 2
    k = attention.attention(9, 3, 64, 4096)
    assert k.grid == (153,) and k.block == (128,) and k.name == "attention_h9kv3d64_l4096_b128u4s17"
    assert k.param_names[-3:] == ("part_o", "part_ml", "count")


def test_attention_bounds():
    attention.attention(1, 1, 32, 12256)  # 4*l + 128 == 48 KiB: fits
    with pytest.raises(ValueError, match="score row of l = 12257 exceeds the 48 KiB"):
        attention.attention(1, 1, 32, 12257)
    with pytest.raises(ValueError, match="32 partial rows of 512 exceeds the 48 KiB"):
        attention.attention(1, 1, 512, 8, block=1024)
    with pytest.raises(ValueError, match="whole 32-value blocks"):
        attention.attention(2, 1, 40, 8, quant="one_word")
    k = attention.attention(32, 8, 128, 4096)
    assert k.grid == (32 * 17,) and "cuda.shared.array(512, float32)" in k.source  # 4 partial rows of 128
    one = attention.attention(32, 8, 128, 64, splits=1)
    assert one.param_names == ("q", "k", "v", "k_cache", "v_cache", "pos", "y")


@pytest.mark.parametrize("hd,half", [(64, 32), (48, 16)])
@pytest.mark.parametrize("items", [None, 1, 2])
def test_rope(hd, half, items):
    """One pair a thread, or `items` (None: all 96 or 96 pairs and copies in one block of 64, two a
    thread; 2 also over two blocks with a partial last pass at 5 heads): the same bits."""
    heads = 5 if items == 2 else 3
    y = check_rope(heads, hd, half, items=items)
    if items != 1:
        bits_equal(y, check_rope(heads, hd, half, items=1), "rope: items a thread == one")


def test_kv_append_copies_rows_at_the_cache_length():
    g = rng()
    caches = ((24, 5), (8, 3), (24, 5))
    kern = attention.kv_append(caches)
    assert kern.grid == (3,) and kern.block == (32,) and kern.param_names[-1] == "pos"
    given = {}
    for i, (w, r) in enumerate(caches):
        given |= {f"k{i}": g.standard_normal(w).astype(F32), f"v{i}": g.standard_normal(w).astype(F32)}
        given |= {f"k_cache{i}": g.standard_normal(r * w).astype(F32), f"v_cache{i}": g.standard_normal(r * w).astype(F32)}
    for c in (0, 2, 3, 4, 5):  # 3 and more: the second cache is full; 5: every cache is
        out = kern.run(**given, pos=np.array([c], np.int32))
        for i, (w, r) in enumerate(caches):
            for x in "kv":
                want = given[f"{x}_cache{i}"].reshape(r, w).copy()
                if c < r:
                    want[c] = given[f"{x}{i}"]
                bits_equal(out[f"{x}_cache{i}"], want.ravel(), f"kv_append {x}_cache{i} at c={c}")


def test_kv_append_bounds():
    with pytest.raises(ValueError, match="1..16 a launch"):
        attention.kv_append(((8, 3),) * 17)
    assert attention.kv_append(((192, 4095),) * 15).name == "kv_append_15x192_r4095"
    assert attention.kv_append(((8, 3), (16, 3))).name.startswith("kv_append_2_")


def test_attention_launch_bounds():
    """`min_blocks` becomes CUDA launch bounds (block, min blocks an SM) on a GPU (the simulator's
    `cuda.jit` takes none, so the source is the same here); a negative count is refused."""
    from fwdshim.codegen.attention import attention

    with pytest.raises(ValueError, match="launch bounds of -1 blocks an SM"):
        attention(4, 2, 32, 8, min_blocks=-1)
