"""Which GGML weight types the forward's GEMVs read, and the affine sub-block layout they read them in.

One place for the limits (legality's B02, the importer's requantization, the lowering read these):

- `GEMV_TYPES`: the types a matmul's weight may have on the GPU: F32, F16, BF16 (the dense GEMV),
  Q8_0 and the `AFFINE` types (`codegen.gemv`, each through its `codegen.gemv_decode` decoder).
- `INT8_ACT_TYPES`: the types whose GEMV also reads an int8 activation (Q8_0 and `AFFINE`).
- `AFFINE`: every block type whose values are `sc · q + mn` over sub-blocks of 16 or 32 values with
  small unsigned integers `q`: Q4_0, Q4_1, Q5_0, Q5_1 (blocks of 32), Q2_K, Q3_K, Q6_K (sub-blocks of
  16 in super-blocks of 256), Q4_K, Q5_K (sub-blocks of 32 in super-blocks of 256).

The layout (`repack`, at load time; the values are the file's, bit for bit): per row of K values,
- `qs`: the low 4 bits of the quants `q`, 16 bytes per 32 values, byte `b` of a 32-value chunk
  holding value `b` in its low nibble and value `b + 16` in its high one (GGML Q4_0's own order);
- `qh`: for the 5- and 6-bit types, the bits above the nibble, two int32 words per 32-value chunk
  (`pack_planes`): a 5-bit type's bit 4 as one bit plane a word (value `4j + t`'s bit at `8t + j`, so
  one shift and a mask `0x10101010` put the bits of values `4j..4j+3` at their bytes' bit 4); Q6_K's
  bits 4 and 5 as pairs, a word for each half of the chunk (value `4j + t`'s pair at `8t + 2(j mod 4)`
  of word `j // 4`, so one shift and a mask `0x30303030` put the pairs of values `4j..4j+3` at their
  bytes' bits 4 and 5);
- the scales as the file stores them (`SCALES`): its f16 block scales (`d`, `dm`: Q4_0..Q5_1) or
  super-block scales (`dd`) with the sub-blocks' small integer scales and mins (`sm`, `sc8`: int8),
  from which the kernel forms each sub-block's `sc` and `mn` (`d · scale`, `-dmin · min`, `-8 d`, ...).

`sc` and `mn` are gguf's own products formed in float32, where they are exact (an f16 times an
integer of at most 8 bits), so `sc · q + mn` in float32 is exactly `gguf.quants.dequantize` (checked by
the tests for every type). Bytes per 32 weights: 18 (Q4_0), 20 (Q4_1), 22 (Q5_0), 24 (Q5_1), 18.5 (Q4_K),
22.5 (Q5_K), 26.25 (Q6_K) — the file's own sizes or within 3% — and 20.5 (Q2_K), 18.25 (Q3_K): their
2- and 3-bit quants held as nibbles.

The int8-activation product (llama.cpp's MMVQ: the activation quantized in blocks of 32, one scale
each, `x ≈ d_x · q_x`): `y[n] = Σ_sub sc · d_x · Σ_j q_j q_x,j + mn · d_x · Σ_j q_x,j` — the integer
sums exact (dp4a), which is `Σ_j w_j · (d_x q_x,j)` with `w_j` the dequantized weight, re-associated.
The executor computes that value in float64 as `W · (d_x q_x)` (`reference.matmul` of a `QAct`);
`int8_act_dot` computes the block form literally (for kernel tests).
"""

from __future__ import annotations

import numpy as np
from gguf import GGMLQuantizationType as QT

from fwdshim.dialects.attributes import GgmlType, ggml_of

AFFINE: dict[QT, tuple[int, int]] = {
    QT.Q4_0: (0, 32), QT.Q4_1: (0, 32), QT.Q5_0: (1, 32), QT.Q5_1: (1, 32),
    QT.Q2_K: (0, 16), QT.Q3_K: (0, 16), QT.Q4_K: (0, 32), QT.Q5_K: (1, 32), QT.Q6_K: (2, 16),
}  # fmt: skip
"""Each affine type's bit planes above the nibble (0, 1 or 2) and sub-block size `S`."""

DENSE_TYPES = frozenset({QT.F32, QT.F16, QT.BF16})
GEMV_TYPES = frozenset(DENSE_TYPES | {QT.Q8_0} | set(AFFINE))
INT8_ACT_TYPES = frozenset({QT.Q8_0} | set(AFFINE))
GEMV_GGML = frozenset(ggml_of(t) for t in GEMV_TYPES)
"""`GEMV_TYPES` as the dialect's `GgmlType`s."""
INT8_ACT_GGML = frozenset(ggml_of(t) for t in INT8_ACT_TYPES)
AFFINE_GGML: dict[GgmlType, tuple[str, int]] = {ggml_of(t): v for t, v in AFFINE.items()}


def names(types) -> str:
    """`F32, F16, ... and BF16`: the types in GGML's order."""
    out = [QT(t).name for t in sorted(types, key=int)]
    return out[0] if len(out) == 1 else ", ".join(out[:-1]) + " and " + out[-1]


# ---------------------------------------------------------------------------------------------
# unpacking GGML blocks: q (uint8, one per value), sc, mn (float32, one per sub-block)

QK_K = 256


def _f16(b: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(b).view(np.float16).astype(np.float32)


def _split(blocks: np.ndarray, *sizes: int) -> list[np.ndarray]:
    return np.hsplit(blocks, np.cumsum(sizes).tolist())


def _q4_0(b):
    d, qs = _split(b, 2)
    d = _f16(d)
    q = np.concatenate([qs & 0xF, qs >> 4], axis=1)
    return q, d, -8 * d


def _q4_1(b):
    d, m, qs = _split(b, 2, 2)
    q = np.concatenate([qs & 0xF, qs >> 4], axis=1)
    return q, _f16(d), _f16(m)


def _q5(b, has_min: bool):
    if has_min:
        d, m, qh, qs = _split(b, 2, 2, 4)
    else:
        d, qh, qs = _split(b, 2, 4)
    qh = np.ascontiguousarray(qh).view("<u4")  # [nb, 1]
    hi = ((qh >> np.arange(32, dtype=np.uint32)) & 1).astype(np.uint8)
    q = np.concatenate([qs & 0xF, qs >> 4], axis=1) | (hi << 4)
    d = _f16(d)
    return q, d, (_f16(m) if has_min else -16 * d)


def _scale_min_k4(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K/Q5_K's 6-bit scales and mins of the 8 sub-blocks (gguf's `Q4_K.get_scale_min`)."""
    s = scales.reshape(-1, 3, 4)
    d, m, md = s[:, 0], s[:, 1], s[:, 2]
    sc = np.concatenate([d & 0x3F, (md & 0x0F) | ((d >> 2) & 0x30)], axis=-1)
    mn = np.concatenate([m & 0x3F, (md >> 4) | ((m >> 2) & 0x30)], axis=-1)
    return sc, mn


def _q4_k(b):
    d, dmin, scales, qs = _split(b, 2, 2, 12)
    sc, m = _scale_min_k4(scales)
    qs = qs.reshape(-1, 4, 1, 32) >> np.array([0, 4], np.uint8).reshape(1, 1, 2, 1)
    q = (qs & 0xF).reshape(-1, QK_K)
    return q, _f16(d) * sc.astype(np.float32), -(_f16(dmin) * m.astype(np.float32))


def _q5_k(b):
    d, dmin, scales, qh, qs = _split(b, 2, 2, 12, 32)
    sc, m = _scale_min_k4(scales)
    ql = (qs.reshape(-1, 4, 1, 32) >> np.array([0, 4], np.uint8).reshape(1, 1, 2, 1)) & 0xF
    hi = (qh.reshape(-1, 1, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(1, 4, 2, 1)) & 1
    q = (ql | (hi << 4)).reshape(-1, QK_K)
    return q, _f16(d) * sc.astype(np.float32), -(_f16(dmin) * m.astype(np.float32))


def _q6_k(b):
    ql, qh, scales, d = _split(b, 128, 64, 16)
    lo = ((ql.reshape(-1, 2, 1, 64) >> np.array([0, 4], np.uint8).reshape(1, 1, 2, 1)) & 0xF).reshape(-1, 2, 4, 32)
    hi = ((qh.reshape(-1, 2, 1, 32) >> np.array([0, 2, 4, 6], np.uint8).reshape(1, 1, 4, 1)) & 3).reshape(-1, 2, 4, 32)
    q = (lo | (hi << 4)).reshape(-1, QK_K)
    sc = _f16(d) * scales.view(np.int8).astype(np.float32)
    return q, sc, -32 * sc


def _q2_k(b):
    scales, qs, d, dmin = _split(b, 16, 64, 2)
    q = ((qs.reshape(-1, 2, 1, 32) >> np.array([0, 2, 4, 6], np.uint8).reshape(1, 1, 4, 1)) & 3).reshape(-1, QK_K)
    return q, _f16(d) * (scales & 0xF).astype(np.float32), -(_f16(dmin) * (scales >> 4).astype(np.float32))


def _q3_k(b):
    hmask, qs, scales, d = _split(b, 32, 64, 12)
    lsc = (scales[:, :8].reshape(-1, 1, 8) >> np.array([0, 4], np.uint8).reshape(1, 2, 1)).reshape(-1, 16)
    hsc = (scales[:, 8:].reshape(-1, 1, 4) >> np.array([0, 2, 4, 6], np.uint8).reshape(1, 4, 1)).reshape(-1, 16)
    sc = ((lsc & 0x0F) | ((hsc & 3) << 4)).astype(np.float32) - 32
    ql = ((qs.reshape(-1, 2, 1, 32) >> np.array([0, 2, 4, 6], np.uint8).reshape(1, 1, 4, 1)) & 3).reshape(-1, QK_K)
    hb = ((hmask.reshape(-1, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)) & 1).reshape(-1, QK_K)
    dl = _f16(d) * sc
    return ql | (hb << 2), dl, -4 * dl  # gguf: dl * (ql - 4 (1 - hb)) = dl * (ql + 4 hb) - 4 dl


_UNPACK = {
    QT.Q4_0: (_q4_0, 32, 18), QT.Q4_1: (_q4_1, 32, 20), QT.Q5_0: (lambda b: _q5(b, False), 32, 22),
    QT.Q5_1: (lambda b: _q5(b, True), 32, 24), QT.Q2_K: (_q2_k, QK_K, 84), QT.Q3_K: (_q3_k, QK_K, 110),
    QT.Q4_K: (_q4_k, QK_K, 144), QT.Q5_K: (_q5_k, QK_K, 176), QT.Q6_K: (_q6_k, QK_K, 210),
}  # fmt: skip
"""(unpacker, values per block, bytes per block) of each affine type."""
BLOCK_VALUES = {t: per for t, (_, per, _) in _UNPACK.items()}
"""Values per block (or super-block) of each affine type: a row holds whole ones."""


def unpack(raw: np.ndarray, qtype: QT) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GGML blocks `uint8 [..., N, row bytes]` of an affine type -> (`q uint8 [..., N, K]`,
    `sc float32 [..., N, K/S]`, `mn float32 [..., N, K/S]`), value `j` = `sc[j // S] · q[j] + mn[j // S]`."""
    qtype = QT(qtype)
    fn, per, size = _UNPACK[qtype]
    s = AFFINE[qtype][1]
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    lead, row = raw.shape[:-1], raw.shape[-1]
    if row % size:
        raise ValueError(f"{qtype.name} rows of {row} bytes are not whole {size}-byte blocks")
    k = row // size * per
    q, sc, mn = fn(raw.reshape(-1, size))
    return (
        np.ascontiguousarray(q, dtype=np.uint8).reshape(*lead, k),
        np.ascontiguousarray(sc, dtype=np.float32).reshape(*lead, k // s),
        np.ascontiguousarray(mn, dtype=np.float32).reshape(*lead, k // s),
    )


def pack_nibbles(q: np.ndarray) -> np.ndarray:
    """`q` (uint8 < 16) `[..., K]` -> `int8 [..., K/2]`: per 32-value chunk, byte `b` = `q[b] | q[b+16] << 4`."""
    c = q.reshape(*q.shape[:-1], -1, 2, 16)
    return np.ascontiguousarray((c[..., 0, :] | (c[..., 1, :] << 4)).reshape(*q.shape[:-1], -1)).view(np.int8)


# The scales as the kernels read them: the file's own f16 scales and small integer sub-block scales,
# multiplied in-kernel (float32, exact) into each sub-block's `sc` and `mn`. Per type: the parts
# (name, dtype, values per 32 weights) and the statements of the kernel (`i` the chunk of 32 weights,
# counted over the whole matrix; they set `s0`, `m0` and, for sub-blocks of 16, `s1`, `m1`).
SCALES: dict[QT, tuple[tuple[tuple[str, str, float], ...], str]] = {
    QT.Q4_0: ((("d", "float16", 1),), "s0 = float32(d[i])\nm0 = s0 * float32(-8.0)"),
    QT.Q5_0: ((("d", "float16", 1),), "s0 = float32(d[i])\nm0 = s0 * float32(-16.0)"),
    QT.Q4_1: ((("dm", "float16", 2),), "s0 = float32(dm[2 * i])\nm0 = float32(dm[2 * i + 1])"),
    QT.Q5_1: ((("dm", "float16", 2),), "s0 = float32(dm[2 * i])\nm0 = float32(dm[2 * i + 1])"),
    QT.Q4_K: ((("dd", "float16", 0.25), ("sm", "int8", 2)),
              "sb = i // 8\ns0 = float32(dd[2 * sb]) * float32(sm[2 * i])\n"
              "m0 = -(float32(dd[2 * sb + 1]) * float32(sm[2 * i + 1]))"),
    QT.Q6_K: ((("dd", "float16", 0.125), ("sc8", "int8", 2)),
              "dq = float32(dd[i // 8])\ns0 = dq * float32(sc8[2 * i])\nm0 = s0 * float32(-32.0)\n"
              "s1 = dq * float32(sc8[2 * i + 1])\nm1 = s1 * float32(-32.0)"),
    QT.Q3_K: ((("dd", "float16", 0.125), ("sc8", "int8", 2)),
              "dq = float32(dd[i // 8])\ns0 = dq * float32(sc8[2 * i])\nm0 = s0 * float32(-4.0)\n"
              "s1 = dq * float32(sc8[2 * i + 1])\nm1 = s1 * float32(-4.0)"),
    QT.Q2_K: ((("dd", "float16", 0.25), ("sm", "int8", 4)),
              "sb = i // 8\ndq = float32(dd[2 * sb])\ndn = float32(dd[2 * sb + 1])\n"
              "s0 = dq * float32(sm[4 * i])\nm0 = -(dn * float32(sm[4 * i + 1]))\n"
              "s1 = dq * float32(sm[4 * i + 2])\nm1 = -(dn * float32(sm[4 * i + 3]))"),
}  # fmt: skip
SCALES[QT.Q5_K] = SCALES[QT.Q4_K]


def part_specs(qtype: QT, n: int, k: int) -> list[tuple[str, str, int]]:
    """(name, dtype, elements) of each array of an `n x k` weight of `qtype` in the kernels' layout:
    `qs` then the scale parts (`SCALES`)."""
    qtype = QT(qtype)
    planes = AFFINE[qtype][0]
    q = [("qs", "int8", n * k // 2)] + ([("qh", "int32", n * k // 32 * planes)] if planes else [])
    return [*q, *((name, dt, int(n * k // 32 * per)) for name, dt, per in SCALES[qtype][0])]


def _scale_parts(b: np.ndarray, qtype: QT) -> dict[str, np.ndarray]:
    """The scale parts of blocks `b` (`[blocks, bytes]`), one row of values per block."""
    f16 = lambda a: np.ascontiguousarray(a).view(np.float16)  # noqa: E731
    if qtype in (QT.Q4_0, QT.Q5_0):
        return {"d": f16(b[:, :2])}
    if qtype in (QT.Q4_1, QT.Q5_1):
        return {"dm": f16(b[:, :4])}
    if qtype in (QT.Q4_K, QT.Q5_K):
        sc, m = _scale_min_k4(b[:, 4:16])
        return {"dd": f16(b[:, :4]), "sm": np.stack([sc, m], axis=-1).reshape(len(b), -1).view(np.int8)}
    if qtype == QT.Q6_K:
        return {"dd": f16(b[:, 208:210]), "sc8": np.ascontiguousarray(b[:, 192:208]).view(np.int8)}
    if qtype == QT.Q2_K:
        sc = b[:, :16]
        return {"dd": f16(b[:, 80:84]), "sm": np.stack([sc & 15, sc >> 4], axis=-1).reshape(len(b), -1).view(np.int8)}
    assert qtype == QT.Q3_K
    scales = b[:, 96:108]
    lsc = (scales[:, :8].reshape(-1, 1, 8) >> np.array([0, 4], np.uint8).reshape(1, 2, 1)).reshape(-1, 16)
    hsc = (scales[:, 8:].reshape(-1, 1, 4) >> np.array([0, 2, 4, 6], np.uint8).reshape(1, 4, 1)).reshape(-1, 16)
    sc = ((lsc & 0x0F) | ((hsc & 3) << 4)).astype(np.int8) - np.int8(32)
    return {"dd": f16(b[:, 108:110]), "sc8": sc}


def repack(raw: np.ndarray, qtype: QT) -> dict[str, np.ndarray]:
    """The kernels' layout of an affine type (see the module docstring), each part flattened:
    `qs` (nibbles or bytes) and the scale parts of `SCALES` (the file's f16 scales, the sub-blocks'
    integer scales and mins)."""
    qtype = QT(qtype)
    q, _, _ = unpack(raw, qtype)
    _, _, size = _UNPACK[qtype]
    parts = _scale_parts(np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1, size), qtype)
    planes = AFFINE[qtype][0]
    out = {"qs": pack_nibbles(q & 15).reshape(-1)}
    if planes:
        out["qh"] = pack_planes(q, planes).reshape(-1)
    return {**out, **{k: np.ascontiguousarray(v).reshape(-1) for k, v in parts.items()}}


def pack_planes(q: np.ndarray, planes: int) -> np.ndarray:
    """Bits 4.. of `q` `[..., K]` as `int32 [..., K/32 * planes]` (module docstring): per 32-value
    chunk, one plane (`planes` 1) holding bit 4 of value `4j + t` at bit `8t + j`; or (`planes` 2)
    two words, word `h` holding bits 4 and 5 of value `4j + t` (`j` in `4h..4h+3`) at bits
    `8t + 2(j - 4h)` and one above."""
    c = q.reshape(-1, 8, 4).astype(np.uint32)  # [chunk, j, t]
    j = np.arange(8, dtype=np.uint32)[:, None]
    t = np.arange(4, dtype=np.uint32)[None, :]
    if planes == 1:
        h = [(((c >> np.uint32(4)) & np.uint32(1)) << (8 * t + j)[None]).sum(axis=(1, 2), dtype=np.uint32)]
    else:
        pairs = ((c >> np.uint32(4)) & np.uint32(3)) << (8 * t + 2 * (j % 4))[None]  # [chunk, j, t]
        h = [pairs[:, 4 * w : 4 * w + 4].sum(axis=(1, 2), dtype=np.uint32) for w in range(2)]
    return np.stack(h, axis=-1).reshape(*q.shape[:-1], -1).view(np.int32)


def layout_quants(parts: dict[str, np.ndarray], qtype: QT) -> np.ndarray:
    """The quants `uint8 [K total]` read back from `qs` and `qh` as the kernels read them (each word's
    nibbles, then the bits above them shifted in)."""
    planes = AFFINE[QT(qtype)][0]
    b = parts["qs"].view(np.uint8).reshape(-1, 16)
    q = np.concatenate([b & 15, b >> 4], axis=-1).astype(np.uint8)  # [chunk, 32]
    if planes:
        h = parts["qh"].view(np.uint32).reshape(-1, planes)
        v = np.arange(32)
        j, t = v // 4, v % 4
        if planes == 1:
            q |= (((h[:, :1] >> (8 * t + j).astype(np.uint32)) & 1) << 4).astype(np.uint8)
        else:
            word = np.take_along_axis(h, np.broadcast_to(j // 4, (len(h), 32)), axis=1)
            q |= (((word >> (8 * t + 2 * (j % 4)).astype(np.uint32)) & 3) << 4).astype(np.uint8)
    return q.reshape(-1)


def layout_scales(parts: dict[str, np.ndarray], qtype: QT) -> tuple[np.ndarray, np.ndarray]:
    """`(sc, mn)` float32 per sub-block, computed from the scale parts by the kernels' own statements
    (`SCALES`, run here in NumPy float32: the tests check them against `unpack`)."""
    qtype = QT(qtype)
    s = AFFINE[qtype][1]
    n_chunks = len(parts["qs"]) * 2 // 32
    env = dict(parts)
    env["float32"] = np.float32
    sc, mn = [], []
    for i in range(n_chunks):
        env["i"] = i
        exec(SCALES[qtype][1], env)  # noqa: S102 - the generated statements themselves
        sc.append(env["s0"])
        mn.append(env["m0"])
        if s == 16:
            sc.append(env["s1"])
            mn.append(env["m1"])
    return np.array(sc, np.float32), np.array(mn, np.float32)


def affine_values(q: np.ndarray, sc: np.ndarray, mn: np.ndarray) -> np.ndarray:
    """`sc · q + mn` per value, float32 (each sub-block's scale and offset repeated over its values)."""
    s = q.shape[-1] // sc.shape[-1]
    return np.repeat(sc, s, axis=-1) * q.astype(np.float32) + np.repeat(mn, s, axis=-1)


def int8_act_dot(raw: np.ndarray, qtype: QT, xq: np.ndarray, xd: np.ndarray) -> np.ndarray:
    """The int8-activation GEMV of an affine type, literally (module docstring): `y [M, N]`, float64,
    the integer sums exact, over `xq int8 [M, K]` with one scale `xd [M, K/32]` per 32 values."""
    q, sc, mn = unpack(raw, qtype)
    n, k = q.shape
    s = AFFINE[QT(qtype)][1]
    xq = np.asarray(xq, np.int64).reshape(-1, k // s, s)
    dx = np.repeat(np.asarray(xd, np.float64).reshape(-1, k // 32), 32 // s, axis=-1)  # [M, K/S]
    qsum = np.einsum("nbs,mbs->mnb", q.reshape(n, k // s, s).astype(np.int64), xq)  # Σ q q_x per sub-block
    xsum = xq.sum(axis=-1)  # Σ q_x per sub-block [M, K/S]
    return np.einsum("nb,mnb->mn", sc.astype(np.float64), qsum * dx[:, None, :]) + (
        (xsum * dx) @ mn.astype(np.float64).T
    )


_F16_FIELDS = {QT.Q2_K: (80, 82), QT.Q3_K: (108,), QT.Q4_K: (0, 2), QT.Q5_K: (0, 2), QT.Q6_K: (208,)}
"""Byte offsets of the f16 scales in a block of the types gguf cannot quantize."""


def random_raw(qtype: QT, n: int, k: int, rng: np.random.Generator, scale: float = 0.02) -> np.ndarray:
    """Random GGML blocks `uint8 [n, row bytes]` of `qtype` (rows of `k` values): gguf's own quantizer
    of normal values where it has one (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0), else random bytes whose f16
    scales are finite (`scale · U(0.5, 1.5)`, so values stay near `scale` times a small integer) —
    test and benchmark data."""
    qtype = QT(qtype)
    if qtype in _F16_FIELDS:
        _, per, size = _UNPACK[qtype]
        raw = rng.integers(0, 256, (n * k // per, size), dtype=np.uint8)
        for off in _F16_FIELDS[qtype]:
            d = (scale * rng.uniform(0.5, 1.5, raw.shape[0])).astype(np.float16)
            raw[:, off : off + 2] = d.view(np.uint8).reshape(-1, 2)
        return raw.reshape(n, -1)
    from gguf.quants import quantize

    return quantize((rng.standard_normal((n, k)) * scale * 8).astype(np.float32), qtype)
