"""A Q8_0 GEMV dequantizing on the tensor cores (an experiment of issue 12, not yet a plan's kernel):
`y = W · x` for float32 x, the quants exact as f16 and x split into three f16 pieces, so the dot
products run as `mma.sync.m16n8k16` (f16 inputs, f32 accumulation) instead of an unpack, a bias
subtraction and an FMA per byte on the CUDA cores (the coalesced GEMV's ~4.5 instructions a byte,
`bench/RESULTS.md`, which keep it under 80 % of the read ceiling).

    python bench/gemv_mma.py [--shapes 4096x4096,14336x4096,4096x14336] [--try w4u8,w4u1a6] [--reps 20]

The kernel (`mma_kernel(n, k, warps, unroll)`): a block of `warps` warps takes 16 rows, each warp a
contiguous `1/warps` of the row's Q8_0 blocks (split-K), `unroll` blocks' loads issued before use.
Lane (g, t) = (lane // 4, lane % 4) loads 8 bytes of rows g and g + 8 at byte 8t of each 32-byte
block; one `lop3`, one shift, a second `lop3` and two `sub.f16x2` turn a 4-byte word into two f16x2
registers holding the exact quants (`1152 + q` under the exponent of 1024, minus 1152), the A
fragments of one mma; two mmas (the block's two words) sum the block into a 16 x 8 tile whose
columns 0..2 are x's pieces (the B fragment: lanes g < 3 load 16 bytes of piece g, the rest zero),
and lanes t = 0, 1 add their columns times the block's scale into the row's float32 sum. The pieces
(`split_x`): x times a power of two 2^e putting its largest magnitude near 2^14, then x = h1 + h2 +
h3 with each h the f16 rounding of what is left (33 bits of mantissa for values within 2^-10 of the
largest); y is divided by 2^e at the end (exact). Here they are split on the host; a plan's kernel
would split them in a prologue.

`t` tags (`w16u4t`) read the weights in `tile_q8_0`'s layout, made once at load time for the
fragments: a warp's load of a block is 512 contiguous bytes (the row layout's is 32 bytes of each of
16 rows). `p<n>` tags (`w8u2p2`, `mma_prefetch_source`) read that layout with each loop iteration's
loads `n` groups ahead in registers (ptxas otherwise issues each block's loads after the previous
block's mma: one block in flight a thread). `i` tags (`iw8u4p1`, `imma_source`) are the int8-act
GEMV on int8 tensor cores: a Q8_0 block of 16 rows is one `mma.m16n8k32.s8` (its quants the A
fragment as `tile_q8_0_imma` lays them out, no unpacking), timed against the dp4a GEMV.

H200, 2026-12-01 (twelfth session; `bench/RESULTS.md`): the prefetching tensor-core dequant GEMV
reaches 63-64 / 82.5-83.6 / 83.5-85.6 % of the read ceiling (4096², 14336x4096, 4096x14336; the
coalesced dequant GEMV 57-58 / 75 / 78-79 %); the int8 tensor-core GEMV 65 / 84.5 / 86.3 % (the dp4a
GEMV 68 / 83 / 87 %): both where the int8-act and torch's fp16 GEMVs stop. `d` tags (`dw8u4p1`) are
the dequant GEMV on the int8 tensor cores over x's four int8 pieces (`split_x_i8`, a power-of-two scale
a block): 61.9 / 82.0 / 81.3 % at the float32 GEMV's error (1.1-1.5e-7). Not in any plan: a plan's
kernel needs x's pieces from its producer (splitting them in the GEMV costs more instructions than it
saves; int8 pieces are a quantize format, as int8-act's `xq`/`xd`) and the tiled layout at load time.

Checked against float64 (relative error printed); timed by graph replay over weight copies past 4x
the L2 as `bench/gemv.py`, with the coalesced GEMV's default launch and the read ceiling in the same
run.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

SHAPES = "4096x4096,14336x4096,4096x14336"
_TRY = re.compile(r"w(\d+)u(\d+)(?:a(\d+)(x)?)?(t|p\d*)?$")
_ITRY = re.compile(r"([id])w(\d+)u(\d+)p(\d+)$")

_MMA = ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, "
        "{$10, $11, $12, $13};")
# int8 x int8 -> int32, exact; C is zero (each block's dot is scaled on its own, as the dp4a GEMV does)
_IMMA = ("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, "
         "{0, 0, 0, 0};")
_Q8_F16 = """{
 .reg .b32 t0, t1, c;
 mov.b32 c, 0x64806480;
 lop3.b32 t0, $2, 0x00FF00FF, c, 0x6A;
 shr.b32 t1, $2, 8;
 lop3.b32 t1, t1, 0x00FF00FF, c, 0x6A;
 sub.f16x2 $0, t0, c;
 sub.f16x2 $1, t1, c;
}"""


def _intrinsics():
    """`mma_f16(a0..a3, b0, b1, c0..c3) -> (f32 x 4)`, `q8x4_f16x2(w) -> (lo, hi)` (bytes 0, 2 and 1, 3 of
    w as exact f16 pairs), `ld_i32x2(a, i)` (8 bytes), `ld_f32(a, i)` (global, read-only)."""
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic
    from numba.cuda.typing import signature

    from fwdshim.codegen.intrinsics import _pointer, _tuple

    i32, f32 = ir.IntType(32), ir.FloatType()

    @intrinsic
    def mma_f16(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
        rtype = types.UniTuple(types.float32, 4)

        def codegen(context, builder, sig, args):
            ins = [context.cast(builder, v, t, types.int32) for v, t in zip(args[:6], sig.args[:6])]
            ins += [context.cast(builder, v, t, types.float32) for v, t in zip(args[6:], sig.args[6:])]
            asm = ir.InlineAsm(ir.FunctionType(ir.LiteralStructType([f32] * 4), [i32] * 6 + [f32] * 4), _MMA,
                               "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f")
            res = builder.call(asm, ins)
            return _tuple(context, builder, rtype, [builder.extract_value(res, j) for j in range(4)])

        return signature(rtype, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3), codegen

    @intrinsic
    def q8x4_f16x2(typingctx, w):
        rtype = types.UniTuple(types.int32, 2)

        def codegen(context, builder, sig, args):
            v = context.cast(builder, args[0], sig.args[0], types.int32)
            asm = ir.InlineAsm(ir.FunctionType(ir.LiteralStructType([i32] * 2), [i32]), _Q8_F16, "=r,=r,r")
            res = builder.call(asm, [v])
            return _tuple(context, builder, rtype, [builder.extract_value(res, j) for j in range(2)])

        return signature(rtype, w), codegen

    def ld_v2(elem, ty, kind: str, reg: str):
        """A read-only global load of two `elem`s (8 bytes) at `a[i]`, returned as a pair of `ty`."""

        def typer(typingctx, a, i):
            rtype = types.UniTuple(ty, 2)

            def codegen(context, builder, sig, args):
                ptr = _pointer(context, builder, sig.args[0], args[0], args[1], elem)
                asm = ir.InlineAsm(ir.FunctionType(ir.LiteralStructType([elem] * 2), [elem.as_pointer()]),
                                   f"ld.global.nc.v2.{kind} {{$0, $1}}, [$2];", f"={reg},={reg},l", side_effect=True)
                res = builder.call(asm, [ptr])
                return _tuple(context, builder, rtype, [builder.extract_value(res, j) for j in range(2)])

            return signature(rtype, a, i), codegen

        return intrinsic(typer)

    ld_i32x2 = ld_v2(i32, types.int32, "b32", "r")
    ld_f32x2 = ld_v2(f32, types.float32, "f32", "f")

    @intrinsic
    def ld_f32(typingctx, a, i):
        def codegen(context, builder, sig, args):
            ptr = _pointer(context, builder, sig.args[0], args[0], args[1], f32)
            asm = ir.InlineAsm(ir.FunctionType(f32, [f32.as_pointer()]), "ld.global.nc.f32 $0, [$1];", "=f,l", side_effect=True)
            return builder.call(asm, [ptr])

        return signature(types.float32, a, i), codegen

    @intrinsic
    def mma_s8(typingctx, a0, a1, a2, a3, b0, b1):
        rtype = types.UniTuple(types.int32, 4)

        def codegen(context, builder, sig, args):
            ins = [context.cast(builder, v, t, types.int32) for v, t in zip(args, sig.args)]
            asm = ir.InlineAsm(ir.FunctionType(ir.LiteralStructType([i32] * 4), [i32] * 6), _IMMA,
                               "=r,=r,=r,=r,r,r,r,r,r,r")
            res = builder.call(asm, ins)
            return _tuple(context, builder, rtype, [builder.extract_value(res, j) for j in range(4)])

        return signature(rtype, a0, a1, a2, a3, b0, b1), codegen

    return dict(mma_f16=mma_f16, q8x4_f16x2=q8x4_f16x2, ld_i32x2=ld_i32x2, ld_f32=ld_f32, ld_f32x2=ld_f32x2,
                mma_s8=mma_s8)


def _epilogue(warps: int, shfl: bool = True, scale: str = " * inv[0]") -> str:
    """The kernels' end: lanes t = 0, 1 add their columns (`shfl_xor` 1; not with `shfl=False`, where
    every lane holds its rows' sums), the warps' row sums meet in shared memory in warp order, y = the
    sum `scale`d (over 2^e by default)."""
    add = ("    acc_a += cuda.shfl_xor_sync(0xFFFFFFFF, acc_a, 1)\n"
           "    acc_b += cuda.shfl_xor_sync(0xFFFFFFFF, acc_b, 1)\n") if shfl else ""
    return add + f"""\
    if t == 0:
        red[warp * 16 + g] = acc_a
        red[warp * 16 + g + 8] = acc_b
    cuda.syncthreads()
    if warp == 0 and lane < 16:
        s = red[lane]
        for w in range(1, {warps}):
            s += red[w * 16 + lane]
        y[row0 + lane] = s{scale}
"""


def tile_q8_0(qs: np.ndarray, dw: np.ndarray, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The weights in the layout `mma_source(tiled=True)` reads (made once, at load time): for each
    16-row tile and Q8_0 block, 512 contiguous bytes, lane `g * 4 + t`'s 16 at `16 * lane` (bytes
    `8t .. 8t + 7` of the block in row g, then the same in row g + 8), so a warp's load of a block is one
    coalesced 512-byte read; the scales as `[tile][block][8 g][rows g, g + 8]` float32 (one 8-byte load
    a lane a block)."""
    nb = k // 32
    q = qs.reshape(n // 16, 16, nb, 4, 8)  # tile, row in tile, block, t, 8 bytes
    lanes = np.concatenate([q[:, :8], q[:, 8:]], axis=-1)  # tile, g, block, t, 16 bytes (row g, row g+8)
    tiled = lanes.transpose(0, 2, 1, 3, 4).reshape(-1)  # tile, block, g, t, 16: lane = g * 4 + t
    d = dw.reshape(n // 16, 2, 8, nb)  # tile, half, g, block
    scales = d.transpose(0, 3, 2, 1).reshape(-1)  # tile, block, g, half
    return np.ascontiguousarray(tiled), np.ascontiguousarray(scales)


def mma_source(n: int, k: int, warps: int, unroll: int, tiled: bool = False) -> str:
    """The kernel's source (see the module docstring): params `qs int8 [n*k]`, `dw f32 [n*k/32]`, `xp
    int32 [3*k/2]` (the pieces, `split_x`), `y f32 [n]`, `inv f32 [1]` (2^-e). `tiled`: `qs`, `dw` in
    `tile_q8_0`'s layout (one 16-byte load a lane a block, the warp's 512 bytes contiguous) instead of
    rows (two 8-byte loads a lane a block, 32 bytes of each of 16 rows)."""
    nb = k // 32
    if n % 16 or k % 32 or nb % (warps * unroll):
        raise ValueError(f"{n}x{k}: needs N % 16 == 0 and K/32 a multiple of warps * unroll ({warps * unroll})")
    per = nb // warps
    L = []
    for u in range(unroll):
        if tiled:
            L += [f"        a{u}0, a{u}1, b{u}0, b{u}1 = ld_i32x4(qs, pa + {512 * u})",
                  f"        sa{u}, sb{u} = ld_f32x2(dw, ea + {16 * u})"]
            continue
        L += [f"        a{u}0, a{u}1 = ld_i32x2(qs, pa + {32 * u})",
              f"        b{u}0, b{u}1 = ld_i32x2(qs, pb + {32 * u})",
              f"        sa{u} = ld_f32(dw, ea + {u})",
              f"        sb{u} = ld_f32(dw, eb + {u})"]
    L.append("        if g < 3:")
    for u in range(unroll):
        L.append(f"            x{u}0, x{u}1, x{u}2, x{u}3 = ld_i32x4(xp, px + {16 * u})")
    L.append("        else:")
    for u in range(unroll):
        L.append(f"            x{u}0 = x{u}1 = x{u}2 = x{u}3 = int32(0)")
    for u in range(unroll):
        L += [f"        la, ha = q8x4_f16x2(a{u}0)",
              f"        lb, hb = q8x4_f16x2(b{u}0)",
              f"        d0, d1, d2, d3 = mma_f16(la, lb, ha, hb, x{u}0, x{u}1, z, z, z, z)",
              f"        la, ha = q8x4_f16x2(a{u}1)",
              f"        lb, hb = q8x4_f16x2(b{u}1)",
              f"        d0, d1, d2, d3 = mma_f16(la, lb, ha, hb, x{u}2, x{u}3, d0, d1, d2, d3)",
              f"        acc_a += sa{u} * (d0 + d1)",
              f"        acc_b += sb{u} * (d2 + d3)"]
    body = "\n".join(L)
    if tiled:
        starts = f"qa = cuda.blockIdx.x * {nb * 512} + lane * 16\n    da = cuda.blockIdx.x * {nb * 16} + 2 * g"
        steps = "pa = qa + b * 512\n        ea = da + b * 16"
    else:
        starts = (f"qa = (row0 + g) * {k} + 8 * t\n    qb = (row0 + g + 8) * {k} + 8 * t\n"
                  f"    da = (row0 + g) * {nb}\n    db = (row0 + g + 8) * {nb}")
        steps = "pa = qa + b * 32\n        pb = qb + b * 32\n        ea = da + b\n        eb = db + b"
    return f"""\
@cuda.jit(launch_bounds={32 * warps})
def gemv_mma(qs, dw, xp, y, inv):
    red = cuda.shared.array({16 * warps}, float32)
    lane = cuda.threadIdx.x % 32
    warp = cuda.threadIdx.x // 32
    g = lane >> 2
    t = lane & 3
    row0 = cuda.blockIdx.x * 16
    {starts}
    xo = min(g, 2) * {k // 2} + 4 * t
    z = float32(0.0)
    acc_a = float32(0.0)
    acc_b = float32(0.0)
    for b in range(warp * {per}, warp * {per} + {per}, {unroll}):
        {steps}
        px = xo + b * 16
{body}
""" + _epilogue(warps)


def _tiles(n: int, k: int, warps: int, unroll: int) -> tuple[int, int, int]:
    """(Q8_0 blocks a row, blocks a warp, groups of `unroll` a warp) of a 16-row-tile kernel; ValueError
    for a shape it cannot tile."""
    nb = k // 32
    if n % 16 or k % 32 or nb % (warps * unroll):
        raise ValueError(f"{n}x{k}: needs N % 16 == 0 and K/32 a multiple of warps * unroll ({warps * unroll})")
    return nb, nb // warps, nb // warps // unroll


def _tile_loads(lv: int, at: str, u: int) -> list[str]:
    """A lane's loads of block `at + u` of its tile (level `lv` of `_ahead`): 16 bytes of quants, 8 of
    scales (`tile_q8_0`'s / `tile_q8_0_imma`'s layouts)."""
    return [f"q{lv}_{u}0, q{lv}_{u}1, q{lv}_{u}2, q{lv}_{u}3 = ld_i32x4(qs, qa + ({at} + {u}) * 512)",
            f"s{lv}_{u}a, s{lv}_{u}b = ld_f32x2(dw, da + ({at} + {u}) * 16)"]


def _ahead(loads, regs: list[str], compute: list[str], unroll: int, ahead: int, groups: int, per: int) -> str:
    """The accumulators, prologue and loop of a warp's `per` blocks, its loads `ahead` groups of `unroll` blocks ahead in
    registers: `loads(lv, at)` the lines loading level `lv` (0: the group computed now) from the group
    at block `at`, `regs` the templates (`{lv}`, `{u}`) of the registers a block's loads fill, `compute`
    the lines using level 0; each iteration loads level `ahead`, computes, then shifts the levels down.
    A group index past the warp's last is clamped to it (its loads then repeat, never used)."""

    def last(expr: str) -> str:
        return f"b0 + min({expr}, {groups - 1}) * {unroll}"

    pro = [ln for lv in range(ahead) for ln in loads(lv, last(str(lv)))]
    body = loads(ahead, last(f"it + {ahead}")) + compute
    for lv in range(ahead):
        for u in range(unroll):
            body.append(", ".join(r.format(lv=lv, u=u) for r in regs) + " = " + ", ".join(r.format(lv=lv + 1, u=u) for r in regs))
    return (f"    acc_a = float32(0.0)\n    acc_b = float32(0.0)\n    b0 = warp * {per}\n" + "\n".join("    " + ln for ln in pro)
            + f"\n    for it in range({groups}):\n" + "\n".join("        " + ln for ln in body) + "\n")


_TILE_HEAD = """\
    red = cuda.shared.array({red}, float32)
    lane = cuda.threadIdx.x % 32
    warp = cuda.threadIdx.x // 32
    g = lane >> 2
    t = lane & 3
    row0 = cuda.blockIdx.x * 16
    qa = cuda.blockIdx.x * {qstep} + lane * 16
    da = cuda.blockIdx.x * {dstep} + 2 * g
"""


def mma_prefetch_source(n: int, k: int, warps: int, unroll: int, ahead: int = 1) -> str:
    """The tiled kernel (`tile_q8_0`'s layout) with its loads `ahead` groups ahead in registers: each
    iteration issues the loads of the group `ahead` on (`unroll` blocks: quants 16 bytes a lane, scale
    pairs 8, x pieces 16), then computes the current group, so `ahead` groups are in flight while it
    computes (ptxas places a loop's loads after its mmas; with `ahead` 1 they then overlap only the
    loop's branch). No branch on the lane: lanes g >= 3 load piece 2 again (columns 3..7 of the tile are
    then copies, never read), and lane t = 1 takes its column 2 only (`d1 * m`, m = 0 off lane t = 0)."""
    nb, per, groups = _tiles(n, k, warps, unroll)

    def loads(lv: int, at: str) -> list[str]:
        out = []
        for u in range(unroll):
            out += _tile_loads(lv, at, u) + [f"x{lv}_{u}0, x{lv}_{u}1, x{lv}_{u}2, x{lv}_{u}3 = ld_i32x4(xp, xo + ({at} + {u}) * 16)"]
        return out

    compute = []
    for u in range(unroll):
        compute += [f"la, ha = q8x4_f16x2(q0_{u}0)", f"lb, hb = q8x4_f16x2(q0_{u}2)",
                    f"d0, d1, d2, d3 = mma_f16(la, lb, ha, hb, x0_{u}0, x0_{u}1, z, z, z, z)",
                    f"la, ha = q8x4_f16x2(q0_{u}1)", f"lb, hb = q8x4_f16x2(q0_{u}3)",
                    f"d0, d1, d2, d3 = mma_f16(la, lb, ha, hb, x0_{u}2, x0_{u}3, d0, d1, d2, d3)",
                    f"acc_a += s0_{u}a * (d0 + d1 * m)", f"acc_b += s0_{u}b * (d2 + d3 * m)"]
    regs = [f"{r}{{lv}}_{{u}}{j}" for r in "qx" for j in range(4)] + ["s{lv}_{u}a", "s{lv}_{u}b"]
    loop = _ahead(loads, regs, compute, unroll, ahead, groups, per)
    return f"""\
@cuda.jit(launch_bounds={32 * warps})
def gemv_mma(qs, dw, xp, y, inv):
{_TILE_HEAD.format(red=16 * warps, qstep=nb * 512, dstep=nb * 16)}\
    xo = min(g, 2) * {k // 2} + 4 * t
    m = float32(1.0) if t == 0 else float32(0.0)
    z = float32(0.0)
{loop}""" + _epilogue(warps)

def mma_pipelined_source(n: int, k: int, warps: int, stages: int, xcopy: bool = False) -> str:
    """`mma_source` with the weights, scales and x's pieces through an async-copy pipeline `stages`
    deep (one Q8_0 block a step): each thread copies its 8 bytes of rows g and g + 8, their two scales
    and with `xcopy` (lanes g < 3) its 16 bytes of x's piece g (else read from global, L1-resident,
    at use) into its own shared-memory slots (`cp.async`), `stages - 1` blocks ahead, and waits for
    its own oldest copies only, so the bytes in flight are not held in registers (ptxas interleaves a register loop's loads with the previous step's
    arithmetic: one block in flight a thread)."""
    nb = k // 32
    if n % 16 or k % 32 or nb % warps or stages < 2:
        raise ValueError(f"{n}x{k}: needs N % 16 == 0, K/32 a multiple of warps ({warps}) and 2 stages or more")
    per = nb // warps
    threads = 32 * warps

    def slot(i: int) -> str:
        return f"({i * threads} + tid)"

    def issue(t: str, i: int) -> list[str]:
        return [f"cp_async8(sq, {slot(i)} * 4, qs, pa + ({t}) * 32)",
                f"cp_async8(sq, {slot(i)} * 4 + 2, qs, pb + ({t}) * 32)",
                f"cp_async4(sd, {slot(i)} * 2, dw, ea + ({t}))",
                f"cp_async4(sd, {slot(i)} * 2 + 1, dw, eb + ({t}))"] + (
                ["if g < 3:", f"    cp_async16(sx, {slot(i)} * 4, xp, px + ({t}) * 16)"] if xcopy else [])

    L: list[str] = []
    for t in range(stages - 1):
        if t < per:
            L += issue(str(t), t)
        L.append("cp_async_commit()")
    L.append(f"for t0 in range(0, {per}, {stages}):")
    for i in range(stages):
        body = [f"if t0 + {i + stages - 1} < {per}:"]
        body += ["    " + ln for ln in issue(f"t0 + {i + stages - 1}", (i + stages - 1) % stages)]
        body += ["cp_async_commit()", f"cp_async_wait({stages - 1})",
                 f"a0, a1, b0, b1 = lda_i32x4(sq, {slot(i)} * 4)",
                 f"sa = sd[{slot(i)} * 2]", f"sb = sd[{slot(i)} * 2 + 1]",
                 "if g < 3:", f"    x0, x1, x2, x3 = lda_i32x4(sx, {slot(i)} * 4)" if xcopy else
                 f"    x0, x1, x2, x3 = ld_i32x4(xp, px + (t0 + {i}) * 16)",
                 "else:", "    x0 = x1 = x2 = x3 = int32(0)",
                 "la, ha = q8x4_f16x2(a0)", "lb, hb = q8x4_f16x2(b0)",
                 "d0, d1, d2, d3 = mma_f16(la, lb, ha, hb, x0, x1, z, z, z, z)",
                 "la, ha = q8x4_f16x2(a1)", "lb, hb = q8x4_f16x2(b1)",
                 "d0, d1, d2, d3 = mma_f16(la, lb, ha, hb, x2, x3, d0, d1, d2, d3)",
                 "acc_a += sa * (d0 + d1)", "acc_b += sb * (d2 + d3)"]
        if per % stages and i >= per % stages:
            L.append(f"    if t0 + {i} < {per}:")
            L += ["        " + ln for ln in body]
        else:
            L += ["    " + ln for ln in body]
    body = "\n".join("    " + ln for ln in L)
    return f"""\
@cuda.jit(launch_bounds={threads})
def gemv_mma(qs, dw, xp, y, inv):
    red = cuda.shared.array({16 * warps}, float32)
    sq = cuda.shared.array({4 * stages * threads}, int32, alignment=16)
    sx = cuda.shared.array({4 * stages * threads if xcopy else 4}, int32, alignment=16)
    sd = cuda.shared.array({2 * stages * threads}, float32)
    tid = cuda.threadIdx.x
    lane = tid % 32
    warp = tid // 32
    g = lane >> 2
    t = lane & 3
    row0 = cuda.blockIdx.x * 16
    b0w = warp * {per}
    pa = (row0 + g) * {k} + 8 * t + b0w * 32
    pb = (row0 + g + 8) * {k} + 8 * t + b0w * 32
    ea = (row0 + g) * {nb} + b0w
    eb = (row0 + g + 8) * {nb} + b0w
    px = min(g, 2) * {k // 2} + 4 * t + b0w * 16
    z = float32(0.0)
    acc_a = float32(0.0)
    acc_b = float32(0.0)
{body}
""" + _epilogue(warps)


def mma_kernel(n: int, k: int, warps: int, unroll: int, stages: int = 0, xcopy: bool = False, tiled: bool | str = False):
    """The compiled kernel: `mma_source` (registers; `tiled`: `tile_q8_0`'s layout), `mma_prefetch_source`
    when `tiled` is `"p<ahead>"`, or `mma_pipelined_source` when `stages`."""
    from numba import cuda, float32, int32

    from fwdshim.codegen import intrinsics as I

    ns = dict(cuda=cuda, float32=float32, int32=int32, ld_i32x4=I.ld_i32x4, lda_i32x4=I.lda_i32x4,
              cp_async4=I.cp_async4, cp_async16=I.cp_async16, cp_async8=I.intrinsic(I._cp_async(8, "cp_async8")),
              cp_async_commit=I.cp_async_commit, cp_async_wait=I.cp_async_wait, **_intrinsics())
    if stages:
        src = mma_pipelined_source(n, k, warps, stages, xcopy)
    elif str(tiled).startswith("p"):
        src = mma_prefetch_source(n, k, warps, unroll, int(tiled[1:] or 1))
    else:
        src = mma_source(n, k, warps, unroll, bool(tiled))
    exec(compile(src, f"<gemv_mma {n}x{k} w{warps}u{unroll}a{stages}>", "exec"), ns)  # noqa: S102
    return ns["gemv_mma"]


def tile_q8_0_imma(qs: np.ndarray, dw: np.ndarray, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The weights in the layout `imma_source` reads: for each 16-row tile and Q8_0 block, 512
    contiguous bytes, lane `g * 4 + t`'s 16 at `16 * lane` — its A fragment of `mma.m16n8k32.s8`
    (bytes 4t..4t+3 of row g, the same of row g + 8, then bytes 16+4t..16+4t+3 of rows g and g + 8);
    the scales as `tile_q8_0`'s pairs."""
    nb = k // 32
    q = qs.reshape(n // 16, 2, 8, nb, 2, 4, 4)  # tile, half (row g / g + 8), g, block, k half, t, 4 bytes
    tiled = q.transpose(0, 3, 2, 5, 4, 1, 6).reshape(-1)  # tile, block, g, t, k half, half, 4
    return np.ascontiguousarray(tiled), tile_q8_0(qs, dw, n, k)[1]


def imma_source(n: int, k: int, warps: int, unroll: int, ahead: int = 1, pieces: int = 1) -> str:
    """The int8-act Q8_0 GEMV on the tensor cores: `y[r] = sum_b (dw[r, b] * xd[b]) * (q[r, b] . xq[b])`,
    each block's int32 dot one `mma.sync.m16n8k32.s8` (the 16 rows' quants are its A fragment as
    `tile_q8_0_imma` lays them out, xq's 32 bytes its B fragment in every column, so no unpacking and
    every lane gets its rows' dots), the float sum in the dp4a GEMV's form. Loads `ahead` groups of
    `unroll` blocks ahead in registers, split-K over `warps` warps as `mma_prefetch_source`. Params
    `qs int8 [n*k]` (tiled), `dw f32` (pairs), `xq int8 [k]`, `xd f32 [k/32]`, `y f32 [n]`.

    `pieces=4`: the dequantizing GEMV on the same tensor cores — `xq int8 [4*k]` holds x's four int8
    pieces (`split_x_i8`: x = xd[b] * (p0 + p1/2^7 + p2/2^14 + p3/2^21), xd a power of two), piece j
    the B fragment's column j (lanes g >= 4 load piece 3 again: columns 4..7, never read), so one mma
    gives the four dots; lane t = 0 adds columns 0 and 1 (times 1 and 2^-7), lane t = 1 columns 2
    and 3 (2^-14, 2^-21), summed by `shfl_xor` at the end."""
    if pieces not in (1, 4):
        raise ValueError(f"pieces={pieces}: 1 (int8-act) or 4 (dequant)")
    nb, per, groups = _tiles(n, k, warps, unroll)

    def loads(lv: int, at: str) -> list[str]:
        out = []
        for u in range(unroll):
            out += _tile_loads(lv, at, u) + [
                    f"x{lv}_{u}0 = ld_i32(xq, xo + ({at} + {u}) * 32)",  # piece min(g, 3) with pieces=4
                    f"x{lv}_{u}1 = ld_i32(xq, xo + ({at} + {u}) * 32 + 16)",
                    f"e{lv}_{u} = ld_f32(xd, {at} + {u})"]
        return out

    compute = []
    for u in range(unroll):
        compute.append(f"d0, d1, d2, d3 = mma_s8(q0_{u}0, q0_{u}1, q0_{u}2, q0_{u}3, x0_{u}0, x0_{u}1)")
        if pieces == 1:
            compute += [f"acc_a += (s0_{u}a * e0_{u}) * float32(d0)", f"acc_b += (s0_{u}b * e0_{u}) * float32(d2)"]
        else:
            compute += [f"acc_a += (s0_{u}a * e0_{u}) * (float32(d0) * c0 + float32(d1) * c1)",
                        f"acc_b += (s0_{u}b * e0_{u}) * (float32(d2) * c0 + float32(d3) * c1)"]
    regs = [f"q{{lv}}_{{u}}{j}" for j in range(4)] + ["s{lv}_{u}a", "s{lv}_{u}b", "x{lv}_{u}0", "x{lv}_{u}1", "e{lv}_{u}"]
    loop = _ahead(loads, regs, compute, unroll, ahead, groups, per)
    return f"""\
@cuda.jit(launch_bounds={32 * warps})
def gemv_imma(qs, dw, xq, xd, y):
{_TILE_HEAD.format(red=16 * warps, qstep=nb * 512, dstep=nb * 16)}\
    xo = {"4 * t" if pieces == 1 else f"min(g, 3) * {k} + 4 * t"}
    c0 = float32(1.0) if t == 0 else (float32(2.0 ** -14) if t == 1 else float32(0.0))
    c1 = float32(2.0 ** -7) if t == 0 else (float32(2.0 ** -21) if t == 1 else float32(0.0))
{loop}""" + _epilogue(warps, shfl=pieces == 4, scale="")


def imma_kernel(n: int, k: int, warps: int, unroll: int, ahead: int = 1, pieces: int = 1):
    """The compiled `imma_source` kernel."""
    from numba import cuda, float32, int32

    from fwdshim.codegen import intrinsics as I

    ns = dict(cuda=cuda, float32=float32, int32=int32, ld_i32x4=I.ld_i32x4, ld_i32=I.ld_i32, **_intrinsics())
    exec(compile(imma_source(n, k, warps, unroll, ahead, pieces), f"<gemv_imma {n}x{k} w{warps}u{unroll}p{ahead}x{pieces}>", "exec"), ns)  # noqa: S102
    return ns["gemv_imma"]


_PERM = np.array([0, 2, 1, 3, 4, 6, 5, 7])


def split_x_i8(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pieces int8 [4*K], scales f32 [K/32]): each 32-value block of x as `s * (p0 + p1/2^7 + p2/2^14 +
    p3/2^21)`, s the power of two putting the block's largest magnitude in (63.5, 127], each p the
    rounding of what is left times 2^7 (|p1..p3| <= 64): every step exact, what is left under s * 2^-22
    (the block's largest value to ~2^-28). Piece j at `j * K` (the B fragment's column j)."""
    xb = x.astype(np.float64).reshape(-1, 32)
    top = np.abs(xb).max(1)
    e = np.where(top > 0, np.ceil(np.log2(np.where(top > 0, top, 1.0) / 127.0)), 0.0)
    sc = 2.0**e
    r = xb / sc[:, None]
    ps = []
    for _ in range(4):
        p = np.rint(r)
        ps.append(p)
        r = (r - p) * 128.0
    pieces = np.stack(ps).reshape(4, -1)
    assert np.abs(pieces).max() <= 127
    return np.ascontiguousarray(pieces.astype(np.int8)).reshape(-1), sc.astype(np.float32)


def split_x(x: np.ndarray) -> tuple[np.ndarray, np.float32]:
    """(pieces int32 [3*K/2], 2^-e): x * 2^e = h1 + h2 + h3 (f16 each), each piece's halves in the
    order the B fragments take them (x0 x2 x1 x3 x4 x6 x5 x7 in each 8), packed two to a word."""
    top = float(np.max(np.abs(x))) or 1.0
    e = 14 - int(np.ceil(np.log2(top)))
    v = (x.astype(np.float32) * np.float32(2.0**e)).astype(np.float32)
    hs = []
    for _ in range(3):
        h = v.astype(np.float16)
        hs.append(h)
        v = (v - h.astype(np.float32)).astype(np.float32)
    p = np.stack(hs).reshape(3, -1, 8)[:, :, _PERM].reshape(3, -1)
    return np.ascontiguousarray(p).view(np.int32).reshape(-1), np.float32(2.0**-e)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--shapes", default=SHAPES, help=f"N x K pairs (default {SHAPES})")
    ap.add_argument("--try", dest="tries", default="w8u4p1,w8u2p2,w16u1p4,iw4u8p1,iw16u4p1,iw8u8p1", help="warps, unroll and (async-copy) stages tags, e.g. w4u8, w4u1a6 (x's pieces too: w4u1a6x); "
                    "a `t` suffix reads `tile_q8_0`'s layout (w16u4t), `p<n>` that layout with its loads n groups ahead (w8u2p2); "
                    "an `i` prefix: the int8-act GEMV on int8 tensor cores (iw8u4p1, `imma_source`), a `d` prefix the dequant GEMV "
                    "on them over x's four int8 pieces (dw8u4p1)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--results", type=Path, help="append the table to this markdown file")
    args = ap.parse_args(argv)
    try:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",") if s]
        tags = [t for t in args.tries.split(",") if t]
        itries = [(int(m[2]), int(m[3]), int(m[4])) for m in (_ITRY.match(t) for t in tags if t.startswith("i"))]
        dtries = [(int(m[2]), int(m[3]), int(m[4])) for m in (_ITRY.match(t) for t in tags if t.startswith("d"))]
        tries = [(int(m[1]), int(m[2]), int(m[3] or 0), bool(m[4]), m[5] or "") for m in (_TRY.match(t) for t in tags if t[0] not in "id")]
    except (ValueError, AttributeError, TypeError):
        ap.error(f"--shapes {args.shapes!r} / --try {args.tries!r}: N x K pairs and w<warps>u<unroll> tags")
    from gemv import Timer, Weights, gpu_ceiling, print_table, require_gpu, time_kernel

    require_gpu(ap)
    from numba import cuda

    from fwdshim.codegen import gemv

    rng = np.random.default_rng(0)
    timer = Timer()
    name, ceiling = gpu_ceiling(timer, args.reps)
    print(f"GPU {name}; read ceiling {ceiling:.0f} GB/s", flush=True)
    lines = [f"### `bench/gemv_mma.py` — {name}", "", f"Read ceiling {ceiling:.0f} GB/s.", "",
             "| N x K | kernel | us | of ceiling | max rel err |", "|---|---|---|---|---|"]
    for n, k in shapes:
        w = Weights(n, k, rng)
        xh = w.x.copy_to_host()
        qs0 = w.qs[0].copy_to_host().astype(np.float64).reshape(n, k // 32, 32)
        dw0 = w.dw[0].copy_to_host().astype(np.float64).reshape(n, k // 32)
        ref = ((qs0 * xh.astype(np.float64).reshape(1, -1, 32)).sum(-1) * dw0).sum(-1)
        scale = np.abs(ref).max()
        nbytes = w.nbytes("f32")
        base = gemv.q8_0(n, k)
        ms = time_kernel(timer, base, w, "f32", args.reps)
        base.launch(*w.args(0, "f32"))
        err = np.abs(w.y.copy_to_host() - ref).max() / scale
        lines.append(f"| {n} x {k} | coalesced {gemv.launch_shape(n, k, 'f32').tag} | {ms * 1e3:.2f} | {nbytes / ms / 1e6 / ceiling:.1%} | {err:.1e} |")
        print(lines[-1], flush=True)
        pieces, inv = split_x(xh)
        xp, dinv = cuda.to_device(pieces), cuda.to_device(np.array([inv], np.float32))
        tq, td = (cuda.to_device(a) for a in tile_q8_0(w.qs[0].copy_to_host(), w.dw[0].copy_to_host(), n, k))
        for warps, unroll, stages, xcopy, tiled in tries:
            tag = f"w{warps}u{unroll}" + (f"a{stages}" if stages else "") + ("x" if xcopy else "") + tiled

            def make(warps=warps, unroll=unroll, stages=stages, xcopy=xcopy, tiled=tiled):
                if tiled and stages:
                    raise ValueError("the tiled layout is read in registers (no a<stages>)")
                return mma_kernel(n, k, warps, unroll, stages, xcopy, tiled)

            check = (tq if tiled else w.qs[0], td if tiled else w.dw[0], xp, w.y, dinv)
            _time_row(lines, timer, w, f"mma {tag}", warps, make, check, lambda c, w=w: (w.qs[c], w.dw[c], xp, w.y, dinv),
                      ref, scale, nbytes / ceiling, args.reps)
        if dtries:
            _imma_rows(lines, timer, w, n, k, dtries, ceiling, args.reps, 4, ref, scale)
        if itries:
            _imma_rows(lines, timer, w, n, k, itries, ceiling, args.reps, 1)
        del w
    return print_table(lines, args.results)


def _imma_rows(lines, timer, w, n, k, tries, ceiling, reps, pieces: int, ref=None, scale=None) -> None:
    """Rows of `imma_source` kernels, each `<i|d>w<warps>u<unroll>p<ahead>` of `tries` checked against
    float64 on `tile_q8_0_imma`'s copy and timed over the row-major copies (the same addresses read).
    `pieces=1`: int8-act (x as the bench's `xq`, `xd`; first the dp4a GEMV's default launch, as the
    baseline); `pieces=4`: dequant over `split_x_i8`'s pieces of x against `ref` (its bytes counted as the
    dequant GEMV's)."""
    from gemv import time_kernel
    from numba import cuda

    from fwdshim.codegen import gemv

    qs0 = w.qs[0].copy_to_host()
    if pieces == 1:
        kind, act, prefix = "int8-act", "int8", "i"
        xq, xd = w.xq, w.xd
        xqh, xdh = xq.copy_to_host().astype(np.float64), xd.copy_to_host().astype(np.float64)
        dots = (qs0.astype(np.float64).reshape(n, -1, 32) * xqh.reshape(1, -1, 32)).sum(-1)
        ref = (dots * w.dw[0].copy_to_host().astype(np.float64).reshape(n, -1) * xdh.reshape(1, -1)).sum(-1)
        scale = np.abs(ref).max()
        base = gemv.q8_0_int8(n, k)
        ms = time_kernel(timer, base, w, act, reps)
        base.launch(*w.args(0, act))
        err = np.abs(w.y.copy_to_host() - ref).max() / scale
        lines.append(f"| {n} x {k} | int8-act coalesced {gemv.launch_shape(n, k, act).tag} | {ms * 1e3:.2f} | {w.nbytes(act) / ms / 1e6 / ceiling:.1%} | {err:.1e} |")
        print(lines[-1], flush=True)
    else:
        kind, act, prefix = "dequant", "f32", "d"
        xq, xd = (cuda.to_device(a) for a in split_x_i8(w.x.copy_to_host()))
    nbytes = w.nbytes(act)
    tq, td = (cuda.to_device(a) for a in tile_q8_0_imma(qs0, w.dw[0].copy_to_host(), n, k))
    for warps, unroll, ahead in tries:
        _time_row(lines, timer, w, f"{kind} imma {prefix}w{warps}u{unroll}p{ahead}", warps,
                  lambda warps=warps, unroll=unroll, ahead=ahead: imma_kernel(n, k, warps, unroll, ahead, pieces),
                  (tq, td, xq, xd, w.y), lambda c: (w.qs[c], w.dw[c], xq, xd, w.y), ref, scale, nbytes / ceiling, reps)


def _time_row(lines, timer, w, label: str, warps: int, make, check: tuple, args_of, ref, scale, per_ceiling: float,
              reps: int) -> None:
    """One table row: `make()`'s kernel launched once on `check` (the layout it reads) and compared with
    float64 `ref` (relative to `scale`), then timed by graph replay over `args_of(copy)` for the weight
    copies past L2; `per_ceiling` is the bytes it reads over the read ceiling (GB/s). A kernel that does
    not build or launch is a row saying why."""
    from gemv import launches_for
    from numba import cuda

    n, k = w.n, w.k
    try:
        kern = make()
        kern[n // 16, 32 * warps](*check)
        cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - a variant that does not build is reported
        lines.append(f"| {n} x {k} | {label} | {type(e).__name__}: {str(e)[:120]} | | |")
        print(lines[-1], flush=True)
        return
    err = np.abs(w.y.copy_to_host() - ref).max() / scale
    launches = launches_for(w.copies)

    def record(builder):
        for i in range(launches):
            kern[n // 16, 32 * warps, builder](*args_of(i % w.copies))

    ms = timer.replay_ms(timer.graph(record), reps) / launches
    regs = kern.get_regs_per_thread()
    regs = next(iter(regs.values())) if isinstance(regs, dict) else regs
    lines.append(f"| {n} x {k} | {label} ({regs} regs) | {ms * 1e3:.2f} | {per_ceiling / ms / 1e6:.1%} | {err:.1e} |")
    print(lines[-1], flush=True)

if __name__ == "__main__":
    raise SystemExit(main())
