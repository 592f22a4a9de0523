"""The sparse mixture of experts as three kernels for one `fwd.moe` stage: the top-k router, the
gate-up kernel (SwiGLU) and the down-and-combine kernel. Routing, top-k and renormalization run on
the GPU; the chosen experts' indices stay on the device, and gate-up and down read only those
experts' Q8_0 rows (dequantized in-kernel, `codegen.gemv.q8_dots`).

Weights in the `repack_q8_0` layout, flattened: router `rq int8 [E*d]`, `rd f32 [E*d/32]`; gate and
up `gq`/`uq int8 [E*ff*d]`, `gd`/`ud f32 [E*ff*d/32]`; down `dq int8 [E*d*ff]`, `dd f32 [E*d*ff/32]`
(d and ff multiples of 32). `act`: `f32` reads `x f32 [d]`; `int8` reads a quantized activation
`xq int8 [d]`, `xd f32 [d/32]` (int8-act numerics: the router and gate/up dots are int8 GEMVs).

- `router(e, d, top_k, act=, warps=)`: one block (`warps` default `min(32, e)`), each warp the logits of
  experts `warp + warps*i`, the loads of all of them (two blocks a lane a step) issued at once. Logits `rq · x` into shared memory, top-k over
  the logits by one warp (`top_k` rounds of a warp argmax; ties: the lower expert index; a NaN logit
  ranks below every number, so the kept experts are `top_k` distinct ones even from a row of NaNs),
  then the renormalized softmax of the kept logits, `w_i = exp(l_i - l_max) / Σ_kept exp(l_j - l_max)`
  (the softmax over all experts renormalized over the kept ones, exactly): every weight NaN where a
  kept logit is NaN. `reference.moe_route` follows the same rule. Params `rq, rd, x|xq,xd`, outputs
  `idx int32 [top_k]` (best first), `wts f32 [top_k]`.
- `gate_up(e, d, ff, top_k, act=, rows_per_warp=, warps=)`: `h[k, f] = silu(gate_e·x) * (up_e·x)` for
  `e = idx[k]` (two blocks a lane a step); grid `(ceil(ff / (warps*rows_per_warp)), top_k)`. Params `gq, gd, uq, ud, x|xq,xd,
  idx`, output `h f32 [top_k*ff]`.
- `down(e, d, ff, top_k, rows_per_warp=, warps=)`: `y[j] = Σ_k wts[k] · (down_{idx[k]} · h[k])[j]`,
  the experts summed in the order of `idx` (no atomics); each warp computes `rows_per_warp` rows of
  every chosen expert, their loads issued at once;
  grid `(ceil(d / (warps*rows_per_warp)),)`. Params `dq, dd, h, idx, wts`, output
  `y f32 [d]`.
"""

from __future__ import annotations

from fwdshim.codegen.gemv_lanes import DotRow, q8_dots
from fwdshim.codegen.kernel import Kernel, Param, build, factory
from fwdshim.codegen.source import SharedArray, check_block, indent
from fwdshim.codegen.tuning import DEFAULT, Tuning
from fwdshim.codegen.unary import silu_expr
from fwdshim.limits import MOE_MAX_EXPERTS, MOE_MAX_TOP_K


def _check(e: int, d: int, top_k: int, ff: int | None = None) -> None:
    """ValueError for a mixture the kernels cannot hold (`ff` None: the router's, which has none)."""
    width = "" if ff is None else f", ff = {ff}"
    if min(e, d, top_k, 32 if ff is None else ff) <= 0 or top_k > e:
        raise ValueError(f"a mixture of {e} experts, top {top_k}, d = {d}{width}")
    if d % 32 or (ff or 32) % 32:
        rows = f"rows of {d}" if ff is None else f"rows of {d} and {ff} values"
        raise ValueError(f"a Q8_0 mixture over {rows}: not whole blocks of 32")
    if e > MOE_MAX_EXPERTS:  # legality's B10
        raise ValueError(f"a router over {e} experts (at most {MOE_MAX_EXPERTS})")
    if top_k > MOE_MAX_TOP_K:  # legality's B09 (lane r of one warp keeps the r-th expert)
        raise ValueError(f"a router keeping {top_k} experts (at most {MOE_MAX_TOP_K})")


def _x_params(d: int, act: str) -> tuple[list[Param], str]:
    if act == "f32":
        return [Param("x", "float32", d, "in", f"[{d}]")], "x"
    if act == "int8":
        return [
            Param("xq", "int8", d, "in", f"activation quants [{d}]"),
            Param("xd", "float32", d // 32, "in", f"activation scales [{d // 32}]"),
        ], "xq, xd"
    raise ValueError(f"a mixture over `{act}` activations (f32, int8)")


@factory
def router(e: int, d: int, top_k: int, *, act: str = "f32", warps: int | None = None, tuning: Tuning = DEFAULT) -> Kernel:
    """The top-k router (see the module docstring)."""
    _check(e, d, top_k)
    warps = min(32, e) if warps is None else warps
    check_block(32 * warps)
    xparams, xs = _x_params(d, act)
    names = {"qs": "rq", "dw": "rd", "x": "x" if act == "f32" else "xq"}
    per_lane = -(-e // 32)
    per_warp = -(-e // warps)  # a warp's experts, every load of theirs issued before the first sum
    pick = "\n".join(f"ex{i} = min(warp + {warps * i}, {e - 1})" for i in range(per_warp))
    dots = q8_dots([DotRow(w=f"ex{i} * {d // 32}", x="0") for i in range(per_warp)], d // 32, act, unroll=2, names=names)
    stores = "\n".join(f"if lane == 0 and warp + {warps * i} < {e}:\n    lg[ex{i}] = acc{i}" for i in range(per_warp))
    body = f"""\
@cuda.jit(cache=True)
def router_k(rq, rd, {xs}, idx, wts):
${{shared_lg}}    tid = $tx
    lane = tid % 32
    warp = tid // 32
{indent(pick, 1)}
{indent(dots, 1)}
{indent(stores, 1)}
    cuda.syncthreads()
    if warp == 0:
        taken = int64(0)
        top = float32(0.0)
        myv = float32(-math.inf)
        mye = int64(0)
        for r in range({top_k}):
            # the best untaken candidate: a NaN logit ranks below every number, ties (NaN with NaN
            # too) go to the lower index (reference.moe_route ranks the same); `{e}`: none yet
            v = float32(math.nan)
            ei = int64({e})
            for j in range({per_lane}):
                c = lane + 32 * j
                if c < {e} and (taken >> j) & 1 == 0:
                    lc = lg[c]
                    if ei == {e} or lc > v or (math.isnan(v) and not math.isnan(lc)):
                        v = lc
                        ei = c
            for m in (16, 8, 4, 2, 1):
                ov = shfl_xor(v, m)
                oe = shfl_xor(ei, m)
                nv, no = math.isnan(v), math.isnan(ov)
                if oe < {e} and (ei >= {e} or (nv and not no) or (nv == no and (ov > v or (not (ov < v) and oe < ei)))):
                    v = ov
                    ei = oe
            if ei % 32 == lane:
                taken |= int64(1) << (ei // 32)
            if r == 0:
                top = v
            if lane == r:
                myv = v
                mye = ei
        ex_w = float32(math.exp(fsub_rn(myv, top))) if lane < {top_k} else float32(0.0)
        tot = warp_sum(ex_w)
        if lane < {top_k}:
            idx[lane] = int32(mye)
            wts[lane] = fdiv_rn(ex_w, tot)
"""
    params = [
        Param("rq", "int8", e * d, "in", f"router quants [{e}, {d}]"),
        Param("rd", "float32", e * d // 32, "in", f"router scales [{e}, {d // 32}]"),
        *xparams,
        Param("idx", "int32", top_k, "out", "chosen experts, best first"),
        Param("wts", "float32", top_k, "out", "their renormalized weights"),
    ]
    return build(f"moe_router_{act}_e{e}d{d}k{top_k}", body, "router_k", (1,), (32 * warps,), params, f"MoE top-{top_k} router over {e} experts", pdl=tuning.pdl,
                 shared=[SharedArray("lg", e, "float32")])  # fmt: skip


@factory
def gate_up(e: int, d: int, ff: int, top_k: int, *, act: str = "f32", rows_per_warp: int = 1, warps: int = 4, tuning: Tuning = DEFAULT) -> Kernel:
    """The gate-up SwiGLU kernel over the chosen experts (see the module docstring)."""
    _check(e, d, top_k, ff)
    check_block(32 * warps)
    xparams, xs = _x_params(d, act)
    nb = d // 32
    rows = []
    for r in range(rows_per_warp):
        rows.append(DotRow(w=f"(ex * {ff} + f{r}) * {nb}", x="0", qs="gq", dw="gd"))
        rows.append(DotRow(w=f"(ex * {ff} + f{r}) * {nb}", x="0", qs="uq", dw="ud"))
    names = {"x": "x" if act == "f32" else "xq"}
    pick = "\n".join(f"    f{r} = min(f0_ + {r}, {ff - 1})" for r in range(rows_per_warp))
    stores = "\n".join(
        f"    if lane == 0 and f0_ + {r} < {ff}:\n        g = acc{2 * r}\n"
        f"        h[k * {ff} + f0_ + {r}] = fmul_rn({silu_expr('g')}, acc{2 * r + 1})"
        for r in range(rows_per_warp)
    )
    body = f"""\
@cuda.jit(cache=True)
def gate_up_k(gq, gd, uq, ud, {xs}, idx, h):
    lane = $tx % 32
    f0_ = ($bx * {warps} + $tx // 32) * {rows_per_warp}
    k = $by
    if f0_ >= {ff}:
        return
    ex = int64(idx[k])
{pick}
{indent(q8_dots(rows, nb, act, unroll=2, names=names), 1)}
{stores}
"""
    params = [
        Param("gq", "int8", e * ff * d, "in", f"gate quants [{e}, {ff}, {d}]"),
        Param("gd", "float32", e * ff * nb, "in", f"gate scales [{e}, {ff}, {nb}]"),
        Param("uq", "int8", e * ff * d, "in", f"up quants [{e}, {ff}, {d}]"),
        Param("ud", "float32", e * ff * nb, "in", f"up scales [{e}, {ff}, {nb}]"),
        *xparams,
        Param("idx", "int32", top_k, "in", "chosen experts (router)"),
        Param("h", "float32", top_k * ff, "out", f"SwiGLU rows [{top_k}, {ff}]"),
    ]
    per_block = warps * rows_per_warp
    grid = (-(-ff // per_block), top_k)
    name = f"moe_gate_up_{act}_e{e}d{d}f{ff}k{top_k}"
    return build(name, body, "gate_up_k", grid, (32 * warps,), params, f"MoE gate-up SwiGLU of the top {top_k} of {e} experts", pdl=tuning.pdl)


@factory
def down(e: int, d: int, ff: int, top_k: int, *, rows_per_warp: int = 1, warps: int = 4, tuning: Tuning = DEFAULT) -> Kernel:
    """The down-and-combine kernel (see the module docstring)."""
    _check(e, d, top_k, ff)
    check_block(32 * warps)
    nb = ff // 32
    rpw = rows_per_warp
    # row r of expert k is dot `k * rpw + r`: every expert's loads issued at once, summed in idx's order
    rows = [DotRow(w=f"(ex{k} * {d} + j{r}) * {nb}", x=f"{k * ff}") for k in range(top_k) for r in range(rpw)]
    dots = q8_dots(rows, nb, "f32", unroll=1, names={"qs": "dq", "dw": "dd", "x": "h"})
    pick = "\n".join(f"    j{r} = min(j0 + {r}, {d - 1})" for r in range(rpw))
    pick += "\n" + "\n".join(f"    ex{k} = int64(idx[{k}])" for k in range(top_k))
    init = "\n".join(f"    out{r} = float32(0.0)" for r in range(rpw))
    comb = "\n".join(f"    out{r} = fadd_rn(out{r}, fmul_rn(wts[{k}], acc{k * rpw + r}))" for k in range(top_k) for r in range(rpw))
    stores = "\n".join(
        f"    if lane == 0 and j0 + {r} < {d}:\n        y[j0 + {r}] = out{r}" for r in range(rpw)
    )
    body = f"""\
@cuda.jit(cache=True)
def down_k(dq, dd, h, idx, wts, y):
    lane = $tx % 32
    j0 = ($bx * {warps} + $tx // 32) * {rpw}
    if j0 >= {d}:
        return
{pick}
{init}
{indent(dots, 1)}
{comb}
{stores}
"""
    params = [
        Param("dq", "int8", e * d * ff, "in", f"down quants [{e}, {d}, {ff}]"),
        Param("dd", "float32", e * d * nb, "in", f"down scales [{e}, {d}, {nb}]"),
        Param("h", "float32", top_k * ff, "in", f"SwiGLU rows [{top_k}, {ff}] (gate-up)"),
        Param("idx", "int32", top_k, "in", "chosen experts (router)"),
        Param("wts", "float32", top_k, "in", "their weights (router)"),
        Param("y", "float32", d, "out", f"[{d}]"),
    ]
    grid = (-(-d // (warps * rows_per_warp)),)
    name = f"moe_down_e{e}d{d}f{ff}k{top_k}"
    return build(name, body, "down_k", grid, (32 * warps,), params, f"MoE down-and-combine of the top {top_k} of {e} experts", pdl=tuning.pdl)
