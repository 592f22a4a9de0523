"""The Q8_0 GEMV with whole-block lanes (`Shape.vec` 32, the kernel before issue 12, kept where it
measured faster: two int8-activation shapes) and `q8_dots`, the whole-block row-dot statements it and
the MoE kernels (`codegen.moe`) are written with.

`q8_dots(rows, nb, act, ...)`: statements accumulating, for each `DotRow`, the dot of a row of Q8_0
blocks with an activation row, lane `l` of the warp taking blocks `l, l + width, ...` (two 16-byte
loads of quants a block, the scale, and x as f32 or int8 blocks); `_q8_kernel`: the GEMV of those
rows, a group of `split` warps a row group, its stores and epilogues those of `codegen.gemv_rows`."""

from __future__ import annotations

from dataclasses import dataclass

from fwdshim.codegen.gemv_rows import (
    GemvSpec,
    Pair,
    _pair_of_rows,
    _pair_rows,
    _q8_params,
    _row_stores,
    _with_pair_params,
    _with_rope_params,
    _written_out,
    binary_params,
)
from fwdshim.codegen.kernel import Kernel, build
from fwdshim.codegen.source import check_block, indent, late_wait, ld
from fwdshim.codegen.tuning import Tuning


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
    loads, rest = _step_parts_q8(rows, us, act, names)
    return "\n".join(loads + rest)


def _step_parts_q8(rows: list[DotRow], us: list[str], act: str, names: dict[str, str], tag: str = "") -> tuple[list[str], list[str]]:
    """`_step` as (its weight loads, the rest); `tag` tells the registers of steps held at once apart."""
    x, xd = names["x"], names["xd"]
    loads: list[str] = []
    for u, b in enumerate(us):
        for r, row in enumerate(rows):
            qs, dw = row.qs or names["qs"], row.dw or names["dw"]
            wb = f"(({row.w}) + {b}) * 32"
            q = f"q{r}_{tag}{u}"
            loads.append(f"{q}_0, {q}_1, {q}_2, {q}_3 = ld_i32x4({qs}, {wb})")
            loads.append(f"{q}_4, {q}_5, {q}_6, {q}_7 = ld_i32x4({qs}, {wb} + 16)")
            loads.append(f"s{r}_{tag}{u} = {dw}[({row.w}) + {b}]")
    lines: list[str] = []
    for u, b in enumerate(us):
        for g, (xo, members) in enumerate(_groups(rows)):
            xb = f"({xo}) + {b} * 32"
            if act == "f32":
                for j in range(8):
                    vs = ", ".join(f"x{g}_{4 * j + i}" for i in range(4))
                    lines.append(f"{vs} = " + ld("f32x4", x, f"{xb} + {4 * j}"))
            else:
                lines.append(f"xq{g}_0, xq{g}_1, xq{g}_2, xq{g}_3 = " + ld("i32x4", x, xb))
                lines.append(f"xq{g}_4, xq{g}_5, xq{g}_6, xq{g}_7 = " + ld("i32x4", x, f"{xb} + 16"))
                lines.append(f"xs{g} = {xd}[({xo}) // 32 + {b}]")
            for r in members:
                lines.extend(_dot(r, u, g, act, tag))
    return loads, lines


def _dot(r: int, u: int, g: int, act: str, tag: str = "") -> list[str]:
    q, sc = f"q{r}_{tag}{u}", f"s{r}_{tag}{u}"
    if act == "int8":
        return [
            f"i0 = dp4a({q}_0, xq{g}_0, dp4a({q}_1, xq{g}_1, dp4a({q}_2, xq{g}_2, dp4a({q}_3, xq{g}_3, int32(0)))))",
            f"i1 = dp4a({q}_4, xq{g}_4, dp4a({q}_5, xq{g}_5, dp4a({q}_6, xq{g}_6, dp4a({q}_7, xq{g}_7, int32(0)))))",
            f"acc{r} += ({sc} * xs{g}) * float32(int32(i0 + i1))",
        ]
    out = []
    for j in range(8):
        c = ", ".join(f"c{i}" for i in range(4))
        out.append(f"{c} = s8x4_f32({q}_{j})")
        terms = " + ".join(f"c{i} * x{g}_{4 * j + i}" for i in range(4))
        out.append(f"p{j % 2} += {terms}" if j >= 2 else f"p{j} = {terms}")
    out.append(f"acc{r} += {sc} * (p0 + p1)")
    return out


def q8_dots(
    rows: list[DotRow], nb: int, act: str, *, unroll: int = 2, names: dict[str, str] | None = None,
    lane: str = "lane", width: int = 32, early: list[str] | None = None,
) -> str:  # fmt: skip
    """Statements leaving in `acc0..acc{R-1}` (float32, every lane of the warp) the warp's part of the
    dot products of Q8_0 rows with their vectors, over `nb` blocks of 32 (see the module docstring).
    `act`: `f32` (x float32) or `int8` (x int8 quants with block scales `xd`). `names` renames the
    arrays (`qs`, `dw`, `x`, `xd`). The blocks are dealt to `width` threads (a multiple of 32: the
    warps splitting the rows' K), the thread's index among them being the expression `lane`; with
    `width` 32 the warp's sum is the whole dot product. Every lane of the warp must run them.

    With `early` (a list) every step is written out, its weight loads appended to `early` (the
    caller places them before its wait, `PRE_WAIT_LOADS`) and the rest returned: the same adds in
    the same order."""
    if act not in ("f32", "int8"):
        raise ValueError(f"a Q8_0 dot over `{act}` activations")
    names = {"qs": "qs", "dw": "dw", "x": "x", "xd": "xd", **(names or {})}
    steps, tail = divmod(nb, width)
    main = steps - steps % unroll
    lines = [f"acc{r} = float32(0.0)" for r in range(len(rows))]
    if early is not None:
        loads, rest = _written_out(lambda us, tag: _step_parts_q8(rows, us, act, names, tag), steps, tail, width, lane, "b")
        early += loads
        lines += rest
        return "\n".join(lines + [f"acc{r} = warp_sum(acc{r})" for r in range(len(rows))])
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


def _check_q8(n: int, k: int, m: int, rows_per_warp: int, warps: int, unroll: int, split: int, weights: str = "q8_0") -> None:
    if n <= 0 or k <= 0 or m <= 0:
        raise ValueError(f"a GEMV of {n}x{k} over {m} rows")
    if k % 32:
        raise ValueError(f"{weights.upper()} rows of {k} values are not whole blocks of 32")
    if rows_per_warp < 1 or unroll < 1:
        raise ValueError("rows_per_warp and unroll are at least 1")
    if split < 1 or warps % split:
        raise ValueError(f"{split} warps splitting a row group do not divide a block of {warps} warps")
    check_block(32 * warps)


def _q8_kernel(n, k, m, rows_per_warp, warps, unroll, split, act, rope: tuple[int, int] | None,
               pair: Pair | None, tuning: Tuning, spec: GemvSpec, binary: tuple[str, bool] | None = None) -> Kernel:  # fmt: skip
    _check_q8(n, k, m, rows_per_warp, warps, unroll, split)
    nb = k // 32
    groups = warps // split
    per_block = groups * rows_per_warp
    nv = 2 * n if pair else n  # a group's rows: both matrices' under a pair epilogue
    rows = [DotRow(w=f"r{r} * {nb}", x=f"m * {k}", **({"qs": "qs2", "dw": "dw2"} if pair and r % 2 else {}))
            for r in range(rows_per_warp)]  # fmt: skip
    xs = "x" if act == "f32" else "xq, xd"
    names = {"x": "x" if act == "f32" else "xq"}
    if rope is not None:
        pick = indent(_pair_rows(n, rows_per_warp, *rope), 1) + "\n" + "\n".join(f"    r{r} = rr{r}" for r in range(rows_per_warp))
    elif pair is not None:
        pick = indent(_pair_of_rows(n, rows_per_warp), 1) + "\n" + "\n".join(f"    r{r} = rr{r}" for r in range(rows_per_warp))
    else:
        pick = "\n".join(f"    r{r} = min(row0 + {r}, {n - 1})" for r in range(rows_per_warp))
    early: list[str] | None = [] if _hoists_blocks(*divmod(nb, 32 * split), rows_per_warp, tuning) else None
    dots = q8_dots(rows, nb, act, unroll=unroll, names=names, lane="kl", width=32 * split, early=early)
    if early is not None:  # the weight loads before the wait (`Tuning.pre_wait_loads`)
        dots = "\n".join(early + [*late_wait(tuning.pdl), dots])
    # with split > 1 the group's warps each hold a part of every row: summed in warp order through shared memory
    shared, guard, stores = _row_stores(nv, rows_per_warp, warps, split, rope, pair, binary=binary)
    if early is not None and nv % per_block == 0:
        guard = ""  # no group of the grid starts past the rows: the kernel never returns early
    # after `y`: an elementwise epilogue's operands, then a rope's (which turns the epilogue's result)
    ropes = (", ep_in, ep_out" if binary else "") + (", angles, z" if rope else "")
    two = ", qs2, dw2" if pair else ""
    if pair:
        ropes = ", y2, " + pair.outputs()
    body = f"""\
@cuda.jit(cache=True)
def gemv_k(qs, dw{two}, {xs}, y{ropes}):
{"".join(a.decl for a in shared)}    lane = $tx % 32
    warp = $tx // 32
    grp = warp // {split}
    j = warp % {split}
    kl = j * 32 + lane
    row0 = ($bx * {groups} + grp) * {rows_per_warp}
    m = $by
{guard}{pick}
{indent(dots, 1)}
{stores}
"""
    params = _q8_params(n, k, m, act)
    grid = (-(-nv // per_block), m)
    tag = "q8_0" if act == "f32" else "q8_0_int8"
    name = f"gemv_{tag}_{m}x{n}x{k}_r{rows_per_warp}w{warps}u{unroll}s{split}"
    what = "dequantizing in-kernel" if act == "f32" else "int8 activations"
    notes = f"Q8_0 GEMV {n}x{k} ({what}) over {m} row{'s' if m != 1 else ''}"
    if binary is not None:
        params, name, notes = binary_params(params, name, notes, binary)
    if rope is not None:
        params, name, notes = _with_rope_params(params, name, notes, n, *rope)
    if pair is not None:
        params, name, notes = _with_pair_params(params, name, notes, n, k, pair)
    return build(name, body, "gemv_k", grid, (32 * warps,), params, notes, pdl=tuning.pdl, spec=spec, shared=shared)


def _hoists_blocks(steps: int, tail: int, rows: int, tuning: Tuning) -> bool:
    """Whether a whole-block-lane GEMV (vec 32) of `steps` full steps a warp group (and a `tail`) over
    `rows` rows a group loads its weights before its wait (`Tuning.pre_wait_loads`, `pre_wait_blocks`)."""
    held = (steps + (tail > 0)) * rows
    loads = tuning.pre_wait_loads
    return 0 < loads and tuning.pdl != "off" and steps <= loads and held <= tuning.pre_wait_blocks


