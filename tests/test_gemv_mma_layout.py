"""`bench/gemv_mma.py`'s tensor-core GEMV, checked without a GPU: the split of x into three f16 pieces
and the fragment layout (which bytes of which rows each lane's mma registers hold, and which x halves
its B registers hold), by a NumPy model of `mma.sync.m16n8k16` over the kernel's own index arithmetic."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def mma():
    sys.path.insert(0, str(BENCH))
    try:
        import gemv_mma
    finally:
        sys.path.remove(str(BENCH))
    return gemv_mma


def _halves(word) -> np.ndarray:
    return np.array([word], np.uint32).view(np.float16).astype(np.float64)


def _q8x4_f16x2(w):
    """The kernel's `q8x4_f16x2`: bytes 0, 2 and 1, 3 of a word as f16 pairs 1152 + q, less 1152."""
    c = np.uint32(0x64806480)
    lo = (np.uint32(w) & np.uint32(0x00FF00FF)) ^ c
    hi = ((np.uint32(w) >> np.uint32(8)) & np.uint32(0x00FF00FF)) ^ c
    return _halves(lo) - _halves(c), _halves(hi) - _halves(c)


def test_split_x_pieces_sum_to_x(mma):
    x = np.random.default_rng(3).standard_normal(4096).astype(np.float32) * np.float32(7.5)
    pieces, inv = mma.split_x(x)
    h = pieces.view(np.float16).reshape(3, -1, 8)[:, :, np.argsort(mma._PERM)].reshape(3, -1).astype(np.float64)
    top = np.abs(x).max()
    assert np.abs(h[0]).max() <= 2.0**14 * 1.001 and np.abs(h[0]).max() > 2.0**13
    back = h.sum(0) * float(inv)
    assert np.abs(back - x).max() <= top * 2.0**-30, np.abs(back - x).max() / top


@pytest.mark.parametrize("copies", [False, True], ids=["zero-columns", "copied-columns"])
def test_fragment_layout_computes_the_gemv(mma, copies):
    """`copies`: as `mma_prefetch_source`, lanes g >= 3 load piece 2 again (no branch) and lane t = 1
    takes its column 2 only (`d1 * m`)."""
    g = np.random.default_rng(4)
    n, k = 32, 128
    qs = g.integers(-127, 128, size=(n, k)).astype(np.int8)
    dw = g.random((n, k // 32)).astype(np.float32)
    x = g.standard_normal(k).astype(np.float32)
    words = qs.reshape(-1).view(np.uint32)
    xp = mma.split_x(x)[0].view(np.uint32)
    inv = float(mma.split_x(x)[1])
    y = np.zeros(n)
    for row0 in range(0, n, 16):
        acc = np.zeros((32, 2))
        for b in range(k // 32):
            d = np.zeros((16, 8))
            for wi in range(2):  # the block's two words: two mmas, the second accumulating
                a, bm = np.zeros((16, 16)), np.zeros((16, 8))
                for lane in range(32):
                    r, t = lane >> 2, lane & 3
                    la, ha = _q8x4_f16x2(words[((row0 + r) * k + b * 32 + 8 * t) // 4 + wi])
                    lb, hb = _q8x4_f16x2(words[((row0 + r + 8) * k + b * 32 + 8 * t) // 4 + wi])
                    a[r, 2 * t : 2 * t + 2], a[r + 8, 2 * t : 2 * t + 2] = la, lb
                    a[r, 2 * t + 8 : 2 * t + 10], a[r + 8, 2 * t + 8 : 2 * t + 10] = ha, hb
                    if r < 3 or copies:
                        xo = min(r, 2) * (k // 2) + 4 * t + b * 16
                        bm[2 * t : 2 * t + 2, r] = _halves(xp[xo + 2 * wi])
                        bm[2 * t + 8 : 2 * t + 10, r] = _halves(xp[xo + 2 * wi + 1])
                d = a @ bm + d
            for lane in range(32):
                r, t = lane >> 2, lane & 3
                m = 1.0 if (t == 0 or not copies) else 0.0
                acc[lane, 0] += dw[row0 + r, b] * (d[r, 2 * t] + d[r, 2 * t + 1] * m)
                acc[lane, 1] += dw[row0 + r + 8, b] * (d[r + 8, 2 * t] + d[r + 8, 2 * t + 1] * m)
        for r in range(8):  # lanes t = 0, 1 hold the row's columns (shfl_xor 1)
            y[row0 + r] = (acc[4 * r, 0] + acc[4 * r + 1, 0]) * inv
            y[row0 + r + 8] = (acc[4 * r, 1] + acc[4 * r + 1, 1]) * inv
    ref = ((qs.astype(np.float64).reshape(n, -1, 32) * x.astype(np.float64).reshape(1, -1, 32)).sum(-1) * dw).sum(-1)
    assert np.abs(y - ref).max() <= 1e-12 * np.abs(ref).max()


def test_kernel_source_refuses_shapes_it_cannot_tile(mma):
    assert "mma_f16(la, lb, ha, hb, x0_0" not in mma.mma_source(32, 128, 2, 2)  # x{u}{j} names
    assert "mma_f16(la, lb, ha, hb, x00, x01, z, z, z, z)" in mma.mma_source(32, 128, 2, 2)
    with pytest.raises(ValueError, match="multiple of warps \\* unroll"):
        mma.mma_source(4096, 14336, 32, 4)


def test_tiled_layout_gives_each_lane_its_rows_bytes(mma):
    """`tile_q8_0` and the tiled kernel's indexing (`qa = tile * nb * 512 + lane * 16`, a block 512 bytes
    on; scale pairs at `tile * nb * 16 + 2g` + 16 a block, row g then row g + 8): each lane's 16 bytes are the
    8 bytes at 8t of its block in rows g and g + 8, as the row-major kernel loads them."""
    g_ = np.random.default_rng(5)
    n, k = 48, 96
    nb = k // 32
    qs = g_.integers(-127, 128, size=n * k).astype(np.int8)
    dw = g_.random(n * nb).astype(np.float32)
    tq, td = mma.tile_q8_0(qs, dw, n, k)
    assert tq.shape == qs.shape and td.shape == dw.shape
    rows = qs.reshape(n, k)
    for tile in range(n // 16):
        for b in range(nb):
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                pa = tile * nb * 512 + lane * 16 + b * 512
                want = np.concatenate([rows[tile * 16 + g, b * 32 + 8 * t : b * 32 + 8 * t + 8],
                                       rows[tile * 16 + g + 8, b * 32 + 8 * t : b * 32 + 8 * t + 8]])
                assert (tq[pa : pa + 16] == want).all(), (tile, b, lane)
                ea = tile * nb * 16 + 2 * g + b * 16
                assert td[ea] == dw[(tile * 16 + g) * nb + b] and td[ea + 1] == dw[(tile * 16 + g + 8) * nb + b]
    assert "ld_i32x4(qs, pa + 512)" in mma.mma_source(n, k, 1, 3, tiled=True)
    src = mma.mma_prefetch_source(n, k, 1, 1, ahead=2)
    assert "da = cuda.blockIdx.x * 48 + 2 * g" in src and "ld_f32x2(dw, da + (b0 + min(it + 2, 2) * 1 + 0) * 16)" in src


def test_imma_fragments_compute_the_int8_gemv(mma):
    """`tile_q8_0_imma` and `imma_source`'s indexing, by a NumPy model of `mma.m16n8k32.row.col.s8`
    (A: a0 row g k 4t.., a1 row g + 8, a2 row g k 16 + 4t.., a3 row g + 8; B: b0 k 4t.. col g, b1 k
    16 + 4t..; D: d0 row g col 2t, d2 row g + 8): every lane's d0 and d2 are its rows' exact dots."""
    g_ = np.random.default_rng(6)
    n, k = 32, 96
    nb = k // 32
    qs = g_.integers(-127, 128, size=n * k).astype(np.int8)
    dw = g_.random(n * nb).astype(np.float32)
    xq = g_.integers(-127, 128, size=k).astype(np.int8)
    xd = g_.random(nb).astype(np.float32)
    tq, td = mma.tile_q8_0_imma(qs, dw, n, k)
    y = np.zeros(n)
    for tile in range(n // 16):
        acc = np.zeros((32, 2))
        for b in range(nb):
            a, bm = np.zeros((16, 32)), np.zeros((32, 8))
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                qa = tile * nb * 512 + lane * 16 + b * 512
                frag = tq[qa : qa + 16].astype(np.float64)
                a[g, 4 * t : 4 * t + 4], a[g + 8, 4 * t : 4 * t + 4] = frag[0:4], frag[4:8]
                a[g, 16 + 4 * t : 20 + 4 * t], a[g + 8, 16 + 4 * t : 20 + 4 * t] = frag[8:12], frag[12:16]
                xo = 4 * t + b * 32
                bm[4 * t : 4 * t + 4, g], bm[16 + 4 * t : 20 + 4 * t, g] = xq[xo : xo + 4], xq[xo + 16 : xo + 20]
            d = a @ bm
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                da = tile * nb * 16 + 2 * g + b * 16
                acc[lane, 0] += float(td[da]) * float(xd[b]) * d[g, 2 * t]
                acc[lane, 1] += float(td[da + 1]) * float(xd[b]) * d[g + 8, 2 * t]
        for g in range(8):
            assert (acc[4 * g : 4 * g + 4, 0] == acc[4 * g, 0]).all()  # every t holds the row's sum
            y[tile * 16 + g], y[tile * 16 + g + 8] = acc[4 * g]
    dots = (qs.astype(np.float64).reshape(n, nb, 32) * xq.astype(np.float64).reshape(1, nb, 32)).sum(-1)
    ref = (dots * dw.reshape(n, nb) * xd.reshape(1, nb)).sum(-1)
    assert np.abs(y - ref).max() <= 1e-12 * np.abs(ref).max()
    src = mma.imma_source(n, k, 1, 1, ahead=1)
    assert "ld_i32(xq, xo + (b0 + min(it + 1, 2) * 1 + 0) * 32 + 16)" in src and "mma_s8(q0_00, q0_01, q0_02, q0_03" in src


def test_int8_pieces_of_x_and_the_dequant_imma(mma):
    """`split_x_i8` gives x back to 2^-22 of each block's scale, and `imma_source(pieces=4)`'s fragments
    (piece min(g, 3) in column g, lanes t = 0, 1 weighting columns 0..3 by 1, 2^-7, 2^-14, 2^-21, summed
    by `shfl_xor` 1) compute the dequant GEMV: a NumPy model of the kernel against float64."""
    g_ = np.random.default_rng(7)
    n, k = 16, 64
    nb = k // 32
    x = (g_.standard_normal(k) * np.exp(g_.uniform(-6, 6, k))).astype(np.float32)
    pieces, sc = mma.split_x_i8(x)
    p = pieces.astype(np.float64).reshape(4, k)
    back = (p[0] + p[1] / 2**7 + p[2] / 2**14 + p[3] / 2**21).reshape(nb, 32) * sc.astype(np.float64)[:, None]
    assert np.all(np.abs(back - x.reshape(nb, 32)) <= sc[:, None].astype(np.float64) * 2.0**-22)
    assert np.all(np.log2(sc) == np.round(np.log2(sc)))  # powers of two
    qs = g_.integers(-127, 128, size=n * k).astype(np.int8)
    dw = g_.random(n * nb).astype(np.float32)
    tq, td = mma.tile_q8_0_imma(qs, dw, n, k)
    acc = np.zeros((32, 2))
    for b in range(nb):
        a, bm = np.zeros((16, 32)), np.zeros((32, 8))
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            frag = tq[b * 512 + lane * 16 : b * 512 + lane * 16 + 16].astype(np.float64)
            a[g, 4 * t : 4 * t + 4], a[g + 8, 4 * t : 4 * t + 4] = frag[0:4], frag[4:8]
            a[g, 16 + 4 * t : 20 + 4 * t], a[g + 8, 16 + 4 * t : 20 + 4 * t] = frag[8:12], frag[12:16]
            xo = min(g, 3) * k + 4 * t + b * 32
            bm[4 * t : 4 * t + 4, g] = pieces[xo : xo + 4]
            bm[16 + 4 * t : 20 + 4 * t, g] = pieces[xo + 16 : xo + 20]
        d = a @ bm
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            c0, c1 = {0: (1.0, 2.0**-7), 1: (2.0**-14, 2.0**-21)}.get(t, (0.0, 0.0))
            da = 2 * g + b * 16
            e = float(sc[b])
            acc[lane, 0] += float(td[da]) * e * (d[g, 2 * t] * c0 + d[g, 2 * t + 1] * c1)
            acc[lane, 1] += float(td[da + 1]) * e * (d[g + 8, 2 * t] * c0 + d[g + 8, 2 * t + 1] * c1)
    y = np.zeros(n)
    for g in range(8):
        y[g], y[g + 8] = acc[4 * g] + acc[4 * g + 1]
    ref = ((qs.astype(np.float64).reshape(n, nb, 32) * x.astype(np.float64).reshape(1, nb, 32)).sum(-1) * dw.reshape(n, nb)).sum(-1)
    assert np.abs(y - ref).max() <= 2.0**-20 * np.abs(ref).max()
    src = mma.imma_source(n, k, 1, 1, pieces=4)
    assert "xo = min(g, 3) * 64 + 4 * t" in src and "acc_a += cuda.shfl_xor_sync(0xFFFFFFFF, acc_a, 1)" in src
    assert "shfl_xor" not in mma.imma_source(n, k, 1, 1)
