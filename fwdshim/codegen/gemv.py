"""Matrix-vector products: the Q8_0 GEMV dequantizing in-kernel, the int8-activation GEMV, and the
dense f32/f16/bf16 GEMV. `y[m, n] = Σ_k W[n, k] x[m, k]` for `m < M` rows of x (a decode step: M = 1).

Q8_0 weights are read in the aligned layout of `fwdshim.weights.repack_q8_0`: `qs int8 [N*K]` (row
n's quants at `n*K`) and `dw float32 [N*K/32]` (one scale per block of 32), K a multiple of 32.

- `q8_0(n, k, m=1, rows_per_warp=, warps=, unroll=)`: y = W · x with x float32. Params `qs`, `dw`,
  `x f32 [M*K]`, `y f32 [M*N]`. Each lane reads one whole block of 32 quants per step (two 16-byte
  loads), its scale, and the 32 x values (eight 16-byte loads, L1-resident); the quants are unpacked
  to exact floats by `s8x4_f32` and dotted in float32, times the block scale.
- `q8_0_int8(n, k, m=1, ...)`: the int8-activation GEMV: `y[n] = Σ_b dw[n,b] · xd[b] · Σ_{j∈b}
  qs[n,j] xq[j]`, the block sum in int32 (`dp4a`), float32 accumulation. Params `qs`, `dw`,
  `xq int8 [M*K]`, `xd f32 [M*K/32]` (the `q`, `d` of a quantized activation, either format), `y`.
- `dense(n, k, m=1, dtype=)`: W `float32`, `float16` or `bfloat16` (given as `uint16` bits) `[N*K]`,
  any K. Params `w`, `x f32 [M*K]`, `y f32 [M*N]`.

Launch: `warps` warps per block in groups of `split` warps; each group computes `rows_per_warp` rows
of W (a block computes `warps / split * rows_per_warp` rows; grid `(ceil(N / that), M)`). A row's
blocks of 32 are dealt to the group's `32 * split` threads (`K/32` need not be a multiple of that:
the last step runs on the first `(K/32) % (32 * split)` threads), and with `split > 1` the warps'
parts are summed through shared memory in warp order; `unroll` steps are loaded before they are
used. The defaults (`launch_shape`) are the fastest launch shapes measured on an H200
(`bench/gemv.py --sweep`). 16-byte loads need `qs`, `x`
and `xq` on 16-byte aligned allocations (every device allocation is).

`q8_dots` emits the row-dot statements themselves, for the MoE kernels (`codegen.moe`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from fwdshim.codegen.kernel import Kernel, Param, build, check_block, indent


@dataclass(frozen=True)
class DotRow:
    """One row of a `q8_dots` emission: `w` the row's first block in its quants/scales arrays (an
    expression, in blocks), `x` the first value of its vector (an expression, in elements, a multiple
    of 32); `qs`, `dw` name the row's arrays when they are not the emission's own."""

    w: str
    x: str
    qs: str | None = None
    dw: str | None = None


def _groups(rows: list[DotRow]) -> list[tuple[str, list[int]]]:
    out: dict[str, list[int]] = {}
    for r, row in enumerate(rows):
        out.setdefault(row.x, []).append(r)
    return list(out.items())


def _step(rows: list[DotRow], us: list[str], act: str, names: dict[str, str]) -> str:
    """Statements for the blocks `us` (block-index variable names, one per unrolled step) of every row:
    all weight loads first, then per step the x loads and the dot products into `acc{r}`."""
    x, xd = names["x"], names["xd"]
    lines: list[str] = []
    for u, b in enumerate(us):
        for r, row in enumerate(rows):
            qs, dw = row.qs or names["qs"], row.dw or names["dw"]
            wb = f"(({row.w}) + {b}) * 32"
            lines.append(f"q{r}_{u}_0, q{r}_{u}_1, q{r}_{u}_2, q{r}_{u}_3 = ld_i32x4({qs}, {wb})")
            lines.append(f"q{r}_{u}_4, q{r}_{u}_5, q{r}_{u}_6, q{r}_{u}_7 = ld_i32x4({qs}, {wb} + 16)")
            lines.append(f"s{r}_{u} = {dw}[({row.w}) + {b}]")
    for u, b in enumerate(us):
        for g, (xo, members) in enumerate(_groups(rows)):
            xb = f"({xo}) + {b} * 32"
            if act == "f32":
                for j in range(8):
                    vs = ", ".join(f"x{g}_{4 * j + i}" for i in range(4))
                    lines.append(f"{vs} = ld_f32x4({x}, {xb} + {4 * j})")
            else:
                lines.append(f"xq{g}_0, xq{g}_1, xq{g}_2, xq{g}_3 = ld_i32x4({x}, {xb})")
                lines.append(f"xq{g}_4, xq{g}_5, xq{g}_6, xq{g}_7 = ld_i32x4({x}, {xb} + 16)")
                lines.append(f"xs{g} = {xd}[({xo}) // 32 + {b}]")
            for r in members:
                lines.extend(_dot(r, u, g, act))
    return "\n".join(lines)


def _dot(r: int, u: int, g: int, act: str) -> list[str]:
    if act == "int8":
        return [
            f"i0 = dp4a(q{r}_{u}_0, xq{g}_0, dp4a(q{r}_{u}_1, xq{g}_1, dp4a(q{r}_{u}_2, xq{g}_2, dp4a(q{r}_{u}_3, xq{g}_3, int32(0)))))",
            f"i1 = dp4a(q{r}_{u}_4, xq{g}_4, dp4a(q{r}_{u}_5, xq{g}_5, dp4a(q{r}_{u}_6, xq{g}_6, dp4a(q{r}_{u}_7, xq{g}_7, int32(0)))))",
            f"acc{r} += (s{r}_{u} * xs{g}) * float32(int32(i0 + i1))",
        ]
    out = []
    for j in range(8):
        c = ", ".join(f"c{i}" for i in range(4))
        out.append(f"{c} = s8x4_f32(q{r}_{u}_{j})")
        terms = " + ".join(f"c{i} * x{g}_{4 * j + i}" for i in range(4))
        out.append(f"p{j % 2} += {terms}" if j >= 2 else f"p{j} = {terms}")
    out.append(f"acc{r} += s{r}_{u} * (p0 + p1)")
    return out


def q8_dots(
    rows: list[DotRow], nb: int, act: str, *, unroll: int = 2, names: dict[str, str] | None = None,
    lane: str = "lane", width: int = 32,
) -> str:  # fmt: skip
    """Statements leaving in `acc0..acc{R-1}` (float32, every lane of the warp) the warp's part of the
    dot products of Q8_0 rows with their vectors, over `nb` blocks of 32 (see the module docstring).
    `act`: `f32` (x float32) or `int8` (x int8 quants with block scales `xd`). `names` renames the
    arrays (`qs`, `dw`, `x`, `xd`). The blocks are dealt to `width` threads (a multiple of 32: the
    warps splitting the rows' K), the thread's index among them being the expression `lane`; with
    `width` 32 the warp's sum is the whole dot product. Every lane of the warp must run them."""
    if act not in ("f32", "int8"):
        raise ValueError(f"a Q8_0 dot over `{act}` activations")
    names = {"qs": "qs", "dw": "dw", "x": "x", "xd": "xd", **(names or {})}
    steps, tail = divmod(nb, width)
    main = steps - steps % unroll
    lines = [f"acc{r} = float32(0.0)" for r in range(len(rows))]
    if main:
        lines.append(f"for st in range(0, {main * width}, {unroll * width}):")
        us = [f"b{u}" for u in range(unroll)]
        lines += [f"    b{u} = st + {u * width} + {lane}" for u in range(unroll)]
        lines.append(indent(_step(rows, us, act, names), 1))
    for st in range(main, steps):
        lines.append(f"b0 = {st * width} + {lane}")
        lines.append(_step(rows, ["b0"], act, names))
    if tail:
        lines.append(f"if {lane} < {tail}:")
        lines.append(f"    b0 = {steps * width} + {lane}")
        lines.append(indent(_step(rows, ["b0"], act, names), 1))
    lines += [f"acc{r} = warp_sum(acc{r})" for r in range(len(rows))]
    return "\n".join(lines)


def _check_q8(n: int, k: int, m: int, rows_per_warp: int, warps: int, unroll: int, split: int) -> None:
    if n <= 0 or k <= 0 or m <= 0:
        raise ValueError(f"a GEMV of {n}x{k} over {m} rows")
    if k % 32:
        raise ValueError(f"Q8_0 rows of {k} values are not whole blocks of 32")
    if rows_per_warp < 1 or unroll < 1:
        raise ValueError("rows_per_warp and unroll are at least 1")
    if split < 1 or warps % split:
        raise ValueError(f"{split} warps splitting a row group do not divide a block of {warps} warps")
    check_block(32 * warps)


def _q8_kernel(n, k, m, rows_per_warp, warps, unroll, split, act) -> Kernel:
    _check_q8(n, k, m, rows_per_warp, warps, unroll, split)
    nb = k // 32
    groups = warps // split
    per_block = groups * rows_per_warp
    rows = [DotRow(w=f"r{r} * {nb}", x=f"m * {k}") for r in range(rows_per_warp)]
    xs = "x" if act == "f32" else "xq, xd"
    names = {"x": "x" if act == "f32" else "xq"}
    pick = "\n".join(f"    r{r} = min(row0 + {r}, {n - 1})" for r in range(rows_per_warp))
    dots = q8_dots(rows, nb, act, unroll=unroll, names=names, lane="kl", width=32 * split)
    if split == 1:
        guard = f"    if row0 >= {n}:\n        return\n"
        stores = "\n".join(
            f"    if lane == 0 and row0 + {r} < {n}:\n        y[m * {n} + row0 + {r}] = acc{r}"
            for r in range(rows_per_warp)
        )
    else:  # the group's warps each hold a part of every row: summed in warp order through shared memory
        guard = ""
        keep = "\n".join(f"        red[warp * {rows_per_warp} + {r}] = acc{r}" for r in range(rows_per_warp))
        sums = "\n".join(
            f"        t = red[grp * {split * rows_per_warp} + {r}]\n"
            + "".join(f"        t = fadd_rn(t, red[(grp * {split} + {i}) * {rows_per_warp} + {r}])\n" for i in range(1, split))
            + f"        if row0 + {r} < {n}:\n            y[m * {n} + row0 + {r}] = t"
            for r in range(rows_per_warp)
        )
        stores = f"    if lane == 0:\n{keep}\n    cuda.syncthreads()\n    if lane == 0 and j == 0:\n{sums}"
    shared = f"    red = cuda.shared.array({warps * rows_per_warp}, float32)\n" if split > 1 else ""
    body = f"""\
@cuda.jit(cache=True)
def gemv_k(qs, dw, {xs}, y):
{shared}    lane = cuda.threadIdx.x % 32
    warp = cuda.threadIdx.x // 32
    grp = warp // {split}
    j = warp % {split}
    kl = j * 32 + lane
    row0 = (cuda.blockIdx.x * {groups} + grp) * {rows_per_warp}
    m = cuda.blockIdx.y
{guard}{pick}
{indent(dots, 1)}
{stores}
"""
    params = [
        Param("qs", "int8", n * k, "in", f"Q8_0 quants [{n}, {k}]"),
        Param("dw", "float32", n * nb, "in", f"Q8_0 scales [{n}, {nb}]"),
    ]
    if act == "f32":
        params.append(Param("x", "float32", m * k, "in", f"[{m}, {k}]"))
    else:
        params.append(Param("xq", "int8", m * k, "in", f"activation quants [{m}, {k}]"))
        params.append(Param("xd", "float32", m * nb, "in", f"activation scales [{m}, {nb}]"))
    params.append(Param("y", "float32", m * n, "out", f"[{m}, {n}]"))
    grid = (-(-n // per_block), m)
    tag = "q8_0" if act == "f32" else "q8_0_int8"
    name = f"gemv_{tag}_{m}x{n}x{k}_r{rows_per_warp}w{warps}u{unroll}s{split}"
    what = "dequantizing in-kernel" if act == "f32" else "int8 activations"
    return build(name, body, "gemv_k", grid, (32 * warps,), params, f"Q8_0 GEMV {n}x{k} ({what}) over {m} rows")


def launch_shape(n: int, k: int, act: str) -> tuple[int, int, int, int]:
    """The default (rows_per_warp, warps, unroll, split) of a Q8_0 GEMV of N x K: the fastest shapes
    of `bench/gemv.py --sweep` on an H200 (2026-11-29) at 4096x4096, 14336x4096 and 4096x14336 —
    long rows (K >= 8192) split over warps; under int8 activations short matrices too."""
    if act == "f32":
        return (4, 8, 1, 2) if k >= 8192 else (4, 8, 2, 1)
    if k >= 8192:
        return (2, 8, 2, 4)
    return (2, 4, 2, 2) if n <= 4096 else (2, 4, 2, 1)


def _shape(n, k, act, rows_per_warp, warps, unroll, split) -> tuple[int, int, int, int]:
    given = (rows_per_warp, warps, unroll, split)
    return tuple(d if g is None else g for g, d in zip(given, launch_shape(n, k, act)))  # type: ignore[return-value]


@functools.cache
def q8_0(
    n: int, k: int, m: int = 1, *, rows_per_warp: int | None = None, warps: int | None = None,
    unroll: int | None = None, split: int | None = None,
) -> Kernel:  # fmt: skip
    """The Q8_0 GEMV dequantizing in-kernel (see the module docstring); unset launch shape values
    come from `launch_shape`."""
    return _q8_kernel(n, k, m, *_shape(n, k, "f32", rows_per_warp, warps, unroll, split), "f32")


@functools.cache
def q8_0_int8(
    n: int, k: int, m: int = 1, *, rows_per_warp: int | None = None, warps: int | None = None,
    unroll: int | None = None, split: int | None = None,
) -> Kernel:  # fmt: skip
    """The int8-activation Q8_0 GEMV (see the module docstring); unset launch shape values come from
    `launch_shape`."""
    return _q8_kernel(n, k, m, *_shape(n, k, "int8", rows_per_warp, warps, unroll, split), "int8")


_LOAD = {
    "float32": "w[o + j]",
    "float16": "float32(w[o + j])",
    "bfloat16": "bf16_f32(w[o + j])",
}
_STORE_DTYPE = {"float32": "float32", "float16": "float16", "bfloat16": "uint16"}


@functools.cache
def dense(n: int, k: int, m: int = 1, *, dtype: str = "float32", warps: int = 4) -> Kernel:
    """The dense GEMV over float32/float16/bfloat16 weights (see the module docstring); one warp a row."""
    if dtype not in _LOAD:
        raise ValueError(f"a dense GEMV over {dtype} weights (float32, float16, bfloat16)")
    if n <= 0 or k <= 0 or m <= 0:
        raise ValueError(f"a GEMV of {n}x{k} over {m} rows")
    check_block(32 * warps)
    body = f"""\
@cuda.jit(cache=True)
def dense_k(w, x, y):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * {warps} + cuda.threadIdx.x // 32
    m = cuda.blockIdx.y
    if row >= {n}:
        return
    o = row * {k}
    xo = m * {k}
    acc = float32(0.0)
    for j in range(lane, {k}, 32):
        acc += {_LOAD[dtype]} * x[xo + j]
    acc = warp_sum(acc)
    if lane == 0:
        y[m * {n} + row] = acc
"""
    params = [
        Param("w", _STORE_DTYPE[dtype], n * k, "in", f"{dtype} weights [{n}, {k}]"),
        Param("x", "float32", m * k, "in", f"[{m}, {k}]"),
        Param("y", "float32", m * n, "out", f"[{m}, {n}]"),
    ]
    grid = (-(-n // warps), m)
    return build(f"gemv_dense_{dtype}_{m}x{n}x{k}", body, "dense_k", grid, (32 * warps,), params, f"{dtype} GEMV {n}x{k} over {m} rows")
