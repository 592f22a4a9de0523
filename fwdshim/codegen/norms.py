"""Row kernels: RMS norm (weighted, with a residual, add+norm writing the sum on, quantize epilogue),
layer norm and softmax. One CUDA block per row of `n` values, `rows` rows — except an RMS norm row of
8 to 32 values a thread, split over that many blocks (`default_cols`).

Every factory returns a `Kernel` (`fwdshim.codegen.kernel`); all arrays are 1-D, row-major:

- `rms_norm(n, rows, eps, weight=, residual=, write_sum=, quant=, store_y=, block=, cols=)`:
  `h = x + residual` (`fadd_rn`, if `residual`), `y = h / sqrt(Σh²/n + eps) * weight`.
  Params, in order: `x f32 [rows*n]`, `residual f32 [rows*n]`?, `weight f32 [n]`?, then the outputs
  `y f32 [rows*n]` (unless `store_y=False`), `q`, `d`(, `s`) of the quantized `y` (if `quant` is
  `one_word`/`two_words`, see `codegen.quantize`), `sum f32 [rows*n]` (the `h` written on, if
  `write_sum`: the add+norm kernel of class `add_norm`, where the residual stream reads the sum).
  Grid `rows * cols`: block `b` is row `b // cols`, column block `b % cols` (`cols` default
  `default_cols`; each column block sums the whole row and writes its own values).
  `rope=(hd, half)` (`rope_variant`: a row is one head of `hd = 2 * half` values, as a qk-norm's
  rows are): after `y`, the rope of the row (`codegen.rope`'s operations on the stored `y`) to `z`,
  params `angles f32 [2*half]`, `z f32 [rows*n]` after `y` — what `codegen.merge` runs in place of a
  rope launch after the norm (Qwen3's per-head norms, then their ropes).
- `layer_norm(n, rows, eps, weight=, bias=, residual=, block=)`: `h` as above,
  `y = (h - mean) / sqrt(var + eps) * weight + bias` (population variance). Params `x`,
  `residual`?, `weight`?, `bias`?, `y`.
- `softmax(n, rows, block=)`: `y = exp(x - max) / Σ exp(x - max)`. Params `x`, `y`.

Bit-exact variants (the contract's `fused: EXACT`): every float operation is spelled rounded
(`fadd_rn`, `fmul_rn`, `fdiv_rn`, `fsqrt_rn`), and the sum of squares runs in one order that depends on
`n` and `block` only, so for the same `block` the weighted, unweighted, residual, add+norm and
quantizing kernels agree bit for bit with their unfused composition: `rms_norm(weight=True)` ==
`rms_norm()` then `fmul_rn(y, w)`; `rms_norm(residual=True, write_sum=True)` == `fadd_rn(x, r)` then
`rms_norm()`; `rms_norm(quant=f)` == `rms_norm()` then `quantize(f)`. The default `block` depends on
`n` alone (`source.block_threads`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fwdshim.codegen.kernel import Kernel, KernelSpec, Param, build, factory
from fwdshim.codegen.quantize import check_format, epilogue, qact_params
from fwdshim.codegen.source import (
    SharedArray,
    block_reduce,
    block_threads,
    check_block,
    f32,
    indent,
    name_number,
)
from fwdshim.codegen.tuning import DEFAULT, Tuning


def _check(n: int, rows: int, block: int | None) -> int:
    if n <= 0 or rows <= 0:
        raise ValueError(f"a row kernel over {rows} rows of {n} values")
    return check_block(block if block is not None else block_threads(n))


def _eps_tag(eps: float) -> list[str]:
    """The part of a norm kernel's name that says its `eps` (`eps1em06`), none for the default one
    (`fwd.DEFAULT_EPS`, in f32): the name holds every constant the kernel bakes in, so two norms of
    different eps are two kernels (two rows in `fwdshim profile`)."""
    from fwdshim.dialects.fwd import DEFAULT_EPS

    return [] if np.float32(eps) == np.float32(DEFAULT_EPS) else [f"eps{name_number(eps)}"]


def _reds(reductions: int) -> tuple[SharedArray, ...]:
    """The shared arrays of a row kernel's block reductions (`block_reduce`), one each."""
    return tuple(SharedArray(f"red{j}", 32, "float32") for j in range(reductions))


def _head(block: int, reductions: int, row: str = "$bx") -> str:
    return (
        "".join(a.decl for a in _reds(reductions))
        + "    tid = $tx\n"
        + "    lane = tid % 32\n"
        + "    warp = tid // 32\n"
        + f"    row = {row}\n"
    )


@dataclass(frozen=True)
class NormSpec(KernelSpec):
    """An RMS norm kernel's spec (`rms_norm`'s arguments, defaults resolved): `rows` rows of `n`
    values, `cols` blocks a row (`default_cols`: `codegen.merge` runs a row split over blocks as no
    launch's tail), `block` threads a block."""

    family = "norm"
    n: int
    rows: int
    eps: float
    weight: bool
    residual: bool
    write_sum: bool
    quant: str | None
    store_y: bool
    block: int
    cols: int
    rope: tuple[int, int] | None = None


@factory
def rms_norm(
    n: int, rows: int = 1, eps: float = 1e-5, *, weight: bool = False, residual: bool = False,
    write_sum: bool = False, quant: str | None = None, store_y: bool | None = None, block: int | None = None,
    cols: int | None = None, rope: tuple[int, int] | None = None, tuning: Tuning = DEFAULT,
) -> Kernel:  # fmt: skip
    """The RMS norm row kernel and its fused variants (see the module docstring); `cols` blocks a row
    (default `default_cols`). ValueError for a `rope` a thread cannot turn from its own values (see
    `rope_variant`)."""
    block = _check(n, rows, block)
    if quant is not None:
        check_format(quant)
    store_y = quant is None if store_y is None else store_y
    if not store_y and quant is None:
        raise ValueError("an RMS norm that neither stores nor quantizes its result")
    if write_sum and not residual:
        raise ValueError("an RMS norm writing the sum on needs a residual to add")
    warps = block // 32
    nb = -(-n // 32)
    h = "fadd_rn(x[o + i], residual[o + i])" if residual else "x[o + i]"
    yv = "fmul_rn(fdiv_rn(hv, r), weight[i])" if weight else "fdiv_rn(hv, r)"
    params = [Param("x", "float32", rows * n, "in", f"[{rows}, {n}]")]
    if residual:
        params.append(Param("residual", "float32", rows * n, "in", f"added to x, [{rows}, {n}]"))
    if weight:
        params.append(Param("weight", "float32", n, "in", f"[{n}]"))
    if store_y:
        params.append(Param("y", "float32", rows * n, "out", f"normed rows [{rows}, {n}]"))
    if quant:
        params.extend(qact_params(n, rows, quant))
    if write_sum:
        params.append(Param("sum", "float32", rows * n, "out", f"x + residual [{rows}, {n}]"))
    items = -(-n // block)
    unroll = tuning.norm_unroll_items
    cols = default_cols(n, block, tuning) if cols is None else cols
    if cols < 1 or (cols > 1 and (items > unroll or cols > items)):
        raise ValueError(f"{cols} blocks a row of {n} values at {block} threads (at most {min(items, unroll)})")
    if rope is not None:
        if not (isinstance(rope, tuple) and len(rope) == 2 and all(isinstance(v, int) and v > 0 for v in rope)):
            raise ValueError(f"rope={rope!r}: (hd, half), two positive whole numbers")
        why = _rope_refusal(n, block, items, rope, residual, weight, write_sum, quant, store_y, cols, tuning)
        if why:
            raise ValueError(f"an RMS norm of rows of {n} at {block} threads with a rope of heads of {rope[0]}: {why}")
        params += [Param("angles", "float32", 2 * rope[1], "in", f"[2, {rope[1]}] cos row, sin row"),
                   Param("z", "float32", rows * n, "out", f"rope of y [{rows}, {n}]")]  # fmt: skip
    names = ", ".join(p.name for p in params)
    if items <= unroll:
        body = _rms_unrolled(n, block, eps, items, residual, weight, write_sum, store_y, quant, names, warps, nb, cols,
                             tuning.norm_held_floats, rope)  # fmt: skip
    else:
        body = _rms_looped(n, block, eps, h, yv, write_sum, store_y, quant, names, warps, nb)
    tags = [t for t, on in (("res", residual), ("w", weight), ("sum", write_sum)) if on]
    tags += [quant] if quant else []
    tags += [f"rope{rope[0]}h{rope[1]}"] if rope else []
    name = "_".join(["rms_norm", *tags, f"{rows}x{n}", *_eps_tag(eps), *([f"c{cols}"] if cols > 1 else []), f"b{block}"])
    what = f"RMS norm of {rows} rows of {n}, eps {eps}" + (f", {cols} blocks a row" if cols > 1 else "")
    what += ", then the rope of each row" if rope else ""
    spec = NormSpec(n, rows, eps, weight, residual, write_sum, quant, store_y, block, cols, rope)
    return build(name, body, "rms_norm_k", (rows * cols,), (block,), params, what, pdl=tuning.pdl, spec=spec, shared=_reds(1))


def _rope_refusal(n, block, items, rope, residual, weight, write_sum, quant, store_y, cols, tuning) -> str:
    """Why an RMS norm of these arguments cannot turn its rows by a rope of `(hd, half)` (`rms_norm`'s
    `rope`), or "": a row must be one whole head (`n == hd == 2 * half`), each thread must hold both
    values of its pairs (`half` a multiple of `block`, `n` of `block`, all of a thread's values in
    registers at once), and the norm a plain one storing `y` in one block a row."""
    hd, half = rope
    if 2 * half != hd:
        return f"heads of {hd} with {half} pairs: the rope here turns every value (hd = 2 * half)"
    if hd != n:
        return f"a row of {n} is not one head of {hd}"
    if half % block or n % block:
        return f"pairs (i, i + {half}) are not in one thread of {block}"
    if residual or write_sum or quant or not store_y or cols != 1:
        return "only a norm storing y, one block a row, takes a rope"
    if items > tuning.norm_unroll_items or items * (1 + weight) > tuning.norm_held_floats:
        return f"{items} values a thread are not all held at once"
    return ""


def rope_variant(kern: Kernel, hd: int, half: int, tuning: Tuning) -> Kernel | None:
    """RMS norm `kern` (`rms_norm`) with the rope of each of its rows as its epilogue (`rms_norm`'s
    `rope`), or None where that cannot be (`_rope_refusal`; another kernel, or one carrying a rope)."""
    s = kern.spec
    if not isinstance(s, NormSpec) or s.rope is not None:
        return None
    items = -(-s.n // s.block)
    if _rope_refusal(s.n, s.block, items, (hd, half), s.residual, s.weight, s.write_sum, s.quant, s.store_y, s.cols, tuning):
        return None
    return rms_norm(s.n, s.rows, s.eps, weight=s.weight, block=s.block, cols=s.cols, rope=(hd, half), tuning=tuning)


def default_cols(n: int, block: int, tuning: Tuning = DEFAULT) -> int:
    """The blocks an RMS norm row is split over: one per value a thread (`ceil(n / block)`) when there
    are at least `tuning.norm_cols_items` of them (and at most `norm_unroll_items`), else 1. Each block computes the
    whole row's sum of squares (every block the same order, so the same bits) and then normalizes,
    stores and quantizes only its own values: the per-value work after the reduction (a division, and
    under a quantize epilogue a warp max and two more) runs on `cols` SMs instead of one (its
    measurements: `bench/RESULTS.md`, "default_cols")."""
    items = -(-n // block)
    return items if tuning.norm_cols_items <= items <= tuning.norm_unroll_items else 1


def _idx(j: int, block: int) -> str:
    return f"tid + {j * block}" if j else "tid"


def _rms_unrolled(n, block, eps, items, residual, weight, write_sum, store_y, quant, names, warps, nb, cols, held, rope=None) -> str:
    """The RMS norm with each thread's values `i = tid + j*block` (`items` of them) loaded before
    their first use: all at once when they fit `held` registers (`Tuning.norm_held_floats`) (the second pass reuses
    them), else in chunks that do (the second pass loads its chunk again). The same float operations
    in the same order as the looped kernel, so the same bits. With `cols` blocks a row, block `c` of
    the row (`col`) writes the sum and outputs of values `j` with `j * cols // items == c` only (it
    still loads and sums them all). With `rope` (`rms_norm`), the stores of `y` are followed by each
    thread's pairs `(j, j + half / block)` turned into `z`."""
    mine = {j: j * cols // items for j in range(items)}
    guard = {j: (f"tid + {j * block} < {n}" if (j + 1) * block > n else None) for j in range(items)}

    def cond(j, stmt, other="float32(0.0)"):
        return stmt if guard[j] is None else f"{stmt} if {guard[j]} else {other}"

    def loads(js, with_w):
        out = []
        for j in js:
            i = _idx(j, block)
            out.append(f"x{j} = " + cond(j, f"x[o + {i}]"))
            if residual:
                out.append(f"r{j} = " + cond(j, f"residual[o + {i}]"))
            if weight and with_w:
                out.append(f"w{j} = " + cond(j, f"weight[{i}]"))
        out += [f"h{j} = fadd_rn(x{j}, r{j})" if residual else f"h{j} = x{j}" for j in js]
        return out

    def sums(js):
        out = []
        for j in js:
            stmts = []
            if write_sum:
                stmts.append(f"sum[o + {_idx(j, block)}] = h{j}" if cols == 1 else f"if col == {mine[j]}:\n    sum[o + {_idx(j, block)}] = h{j}")
            stmts.append(f"ss = fadd_rn(ss, fmul_rn(h{j}, h{j}))")
            stmts = [ln for t in stmts for ln in t.splitlines()]
            if guard[j] is None:
                out.extend(stmts)
            else:
                out.append(f"if {guard[j]}:")
                out.extend("    " + t for t in stmts)
        return out

    def outputs(js):
        out = []
        for j in js:
            yv = f"fmul_rn(fdiv_rn(h{j}, r), w{j})" if weight else f"fdiv_rn(h{j}, r)"
            if quant is None:
                out.append(f"y[o + {_idx(j, block)}] = {yv}" if guard[j] is None else f"if {guard[j]}:\n    y[o + {_idx(j, block)}] = {yv}")
                continue
            ok = guard[j] or "True"
            out.append(f"ok = {ok}\ni = {_idx(j, block)}\nyv = {yv} if ok else float32(0.0)")
            if store_y:
                out.append("if ok:\n    y[o + i] = yv")
            out.append(epilogue("yv", "o + i", "ok", f"row * {nb} + i // 32", f"{j * block} + warp * 32 < {n}", quant).rstrip())
        return out

    def chunks(per):
        c = max(1, held // per)
        return [range(a, min(a + c, items)) for a in range(0, items, c)]

    per1 = 1 + residual
    fits = items * (per1 + weight) <= held
    if cols > 1:  # every block loads and sums every value; each writes the outputs of its own values
        if fits:
            first = loads(range(items), True) + sums(range(items))
        else:
            first = [t for js in chunks(per1) for t in loads(js, False) + sums(js)]
        second = []
        for c in range(cols):
            js = [j for j in range(items) if mine[j] == c]
            stmts = outputs(js) if fits else loads(js, True) + outputs(js)
            second += [f"if col == {c}:"] + [indent(t, 1) for t in stmts]
    elif fits:
        first = loads(range(items), True) + sums(range(items))
        second = outputs(range(items))
        if rope is not None:
            second = _roped(items, block, rope[1], weight)
    else:
        first = [t for js in chunks(per1) for t in loads(js, False) + sums(js)]
        second = [t for js in chunks(per1 + weight) for t in loads(js, True) + outputs(js)]
    where = "$bx" if cols == 1 else f"$bx // {cols}\n    col = $bx % {cols}"
    return f"""\
@cuda.jit(cache=True)
def rms_norm_k({names}):
{_head(block, 1, where)}    o = row * {n}
    ss = float32(0.0)
{indent(chr(10).join(first), 1)}
{indent(block_reduce("ss", "sum", "red0", warps), 1)}
    r = fsqrt_rn(fadd_rn(fdiv_rn(ss, float32({n}.0)), {f32(eps)}))
{indent(chr(10).join(second), 1)}
"""


def _roped(items: int, block: int, half: int, weight: bool) -> list[str]:
    """The stores of a norm whose thread holds every value `j` of its row (`i = tid + j*block`), then
    the rope of its pairs `(j, j + half/block)` into `z`, in `codegen.rope`'s operations."""
    out = []
    for j in range(items):
        yv = f"fmul_rn(fdiv_rn(h{j}, r), w{j})" if weight else f"fdiv_rn(h{j}, r)"
        out += [f"y{j} = {yv}", f"y[o + {_idx(j, block)}] = y{j}"]
    step = half // block
    for j in range(step):
        i, a, b = _idx(j, block), f"y{j}", f"y{j + step}"
        out += [f"c{j} = angles[{i}]", f"s{j} = angles[{half} + {i}]",
                f"z[o + {i}] = fsub_rn(fmul_rn({a}, c{j}), fmul_rn({b}, s{j}))",
                f"z[o + {i} + {half}] = fadd_rn(fmul_rn({a}, s{j}), fmul_rn({b}, c{j}))"]  # fmt: skip
    return out


def _rms_looped(n, block, eps, h, yv, write_sum, store_y, quant, names, warps, nb) -> str:
    """The RMS norm looping over each thread's values (rows wider than `Tuning.norm_unroll_items` a thread)."""
    first = "        hv = " + h + "\n"
    if write_sum:
        first += "        sum[o + i] = hv\n"
    first += "        ss = fadd_rn(ss, fmul_rn(hv, hv))\n"
    if quant is None:
        second = f"""\
    for i in range(tid, {n}, {block}):
        hv = {h}
        y[o + i] = {yv}
"""
    else:
        npad = -(-n // block) * block
        store = "        if ok:\n            y[o + i] = yv\n" if store_y else ""
        second = f"""\
    for i0 in range(0, {npad}, {block}):
        i = i0 + tid
        ok = i < {n}
        yv = float32(0.0)
        if ok:
            hv = {h}
            yv = {yv}
{store}{indent(epilogue("yv", "o + i", "ok", f"row * {nb} + i // 32", f"i0 + warp * 32 < {n}", quant), 2)}
"""
    return f"""\
@cuda.jit(cache=True)
def rms_norm_k({names}):
{_head(block, 1)}    o = row * {n}
    ss = float32(0.0)
    for i in range(tid, {n}, {block}):
{first}{indent(block_reduce("ss", "sum", "red0", warps), 1)}
    r = fsqrt_rn(fadd_rn(fdiv_rn(ss, float32({n}.0)), {f32(eps)}))
{second}"""


@factory
def layer_norm(
    n: int, rows: int = 1, eps: float = 1e-5, *, weight: bool = False, bias: bool = False,
    residual: bool = False, block: int | None = None, tuning: Tuning = DEFAULT,
) -> Kernel:  # fmt: skip
    """The layer norm row kernel (see the module docstring)."""
    block = _check(n, rows, block)
    warps = block // 32
    h = "fadd_rn(x[o + i], residual[o + i])" if residual else "x[o + i]"
    y = "fdiv_rn(fsub_rn(hv, mean), r)"
    if weight:
        y = f"fmul_rn({y}, weight[i])"
    if bias:
        y = f"fadd_rn({y}, bias[i])"
    params = [Param("x", "float32", rows * n, "in", f"[{rows}, {n}]")]
    if residual:
        params.append(Param("residual", "float32", rows * n, "in", f"added to x, [{rows}, {n}]"))
    if weight:
        params.append(Param("weight", "float32", n, "in", f"[{n}]"))
    if bias:
        params.append(Param("bias", "float32", n, "in", f"[{n}]"))
    params.append(Param("y", "float32", rows * n, "out", f"[{rows}, {n}]"))
    names = ", ".join(p.name for p in params)
    body = f"""\
@cuda.jit(cache=True)
def layer_norm_k({names}):
{_head(block, 2)}    o = row * {n}
    acc = float32(0.0)
    for i in range(tid, {n}, {block}):
        acc = fadd_rn(acc, {h})
{indent(block_reduce("acc", "sum", "red0", warps), 1)}
    mean = fdiv_rn(acc, float32({n}.0))
    var = float32(0.0)
    for i in range(tid, {n}, {block}):
        c = fsub_rn({h}, mean)
        var = fadd_rn(var, fmul_rn(c, c))
{indent(block_reduce("var", "sum", "red1", warps), 1)}
    r = fsqrt_rn(fadd_rn(fdiv_rn(var, float32({n}.0)), {f32(eps)}))
    for i in range(tid, {n}, {block}):
        hv = {h}
        y[o + i] = {y}
"""
    tags = [t for t, on in (("res", residual), ("w", weight), ("b", bias)) if on]
    name = "_".join(["layer_norm", *tags, f"{rows}x{n}", *_eps_tag(eps), f"b{block}"])
    return build(name, body, "layer_norm_k", (rows,), (block,), params, f"layer norm of {rows} rows of {n}, eps {eps}", pdl=tuning.pdl,
                 shared=_reds(2))  # fmt: skip


@factory
def softmax(n: int, rows: int = 1, *, block: int | None = None, tuning: Tuning = DEFAULT) -> Kernel:
    """The softmax row kernel (see the module docstring)."""
    block = _check(n, rows, block)
    warps = block // 32
    body = f"""\
@cuda.jit(cache=True)
def softmax_k(x, y):
{_head(block, 2)}    o = row * {n}
    m = float32(-math.inf)
    for i in range(tid, {n}, {block}):
        m = max(m, x[o + i])
{indent(block_reduce("m", "max", "red0", warps), 1)}
    acc = float32(0.0)
    for i in range(tid, {n}, {block}):
        e = float32(math.exp(fsub_rn(x[o + i], m)))
        y[o + i] = e
        acc = fadd_rn(acc, e)
{indent(block_reduce("acc", "sum", "red1", warps), 1)}
    for i in range(tid, {n}, {block}):
        y[o + i] = fdiv_rn(y[o + i], acc)
"""
    params = [
        Param("x", "float32", rows * n, "in", f"[{rows}, {n}]"),
        Param("y", "float32", rows * n, "out", f"[{rows}, {n}]"),
    ]
    return build(f"softmax_{rows}x{n}_b{block}", body, "softmax_k", (rows,), (block,), params, f"softmax of {rows} rows of {n}", pdl=tuning.pdl,
                 shared=_reds(2))  # fmt: skip
