"""The sparse mixture of experts as four launches for one `fwd.moe` stage: the router's logits, its
top-k, the gate-up launch (SwiGLU) and the down-and-combine launch. Routing, top-k and
renormalization run on the GPU; the chosen experts' indices stay on the device, and gate-up and down
read only those experts' rows. All but the top-k are the one GEMV family's kernels
(`codegen.gemv.gemv_blocks`; gate-up and down with `experts`), so the launch shapes, wide loads, block
decoders and merging of the dense GEMVs are theirs too: the norm before the router runs as its
launch's prologue, the top-k as its tail, the residual add after the MoE as down's epilogue.

Weights in the `repack_q8_0` layout, flattened: router `qs int8 [E*d]`, `dw f32 [E*d/32]`; the gate,
up and down stacks as the Q8_0 decoder reads them (`qs int8 [E*ff*d]`, `dw f32 [E*ff*d/32]`; down
`[E*d*ff]`; d and ff multiples of 32). The plan reads Q8_0 mixtures only (the seed's manifest, `fits`
F02); `gate_up` and `down` take another block type's stacks through `weights=` (that type's decoder,
its arrays and its block of values, `gemv_decode`), untested in a plan. `act`: `f32` reads `x f32 [d]`; `int8` reads a quantized
activation `xq int8 [d]`, `xd f32 [d/32]` (int8-act numerics: the router and gate/up dots are int8).

- `logits(e, d, act=)`: `y[i] = router_i · x`, `f32 [e]` (`gemv.blocks`).
- `topk(e, top_k)`: one warp over the logits `lg`: top-k, ties to the lower expert index, a NaN logit
  below every number, then the renormalized softmax of the kept logits (see its docstring;
  `reference.moe_route` follows the same rule); outputs `idx int32 [top_k]` (best first), `wts f32
  [top_k]`.
- `gate_up(e, d, ff, top_k, act=, shape=)`: the gate and up stacks as a pair GEMV over the one row of
  x, `z0[i, f] = silu(gate_e · x) * (up_e · x)` for `e = idx[i]` (`SWIGLU`); grid `(2 ff / rows a
  block, top_k)`. Params `qs, dw, qs2, dw2, x|xq,xd, idx`, outputs `y, y2` (the products) and `z0`,
  each `f32 [top_k, ff]`.
- `down(e, d, ff, top_k, shape=)`: `y[i] = down_{idx[i]} · z0[i]` (x `f32 [top_k, ff]`), then
  `out[j] = Σ_i wts[i] · y[i, j]`, the experts summed in the order of `idx` by the last block of a
  row block to finish (`gemv_blocks`' `combine`; no atomics on the sums); grid `(d / rows a block,
  top_k)`. Params `qs, dw, x, idx`, `y`, `wts`, `ccount` (zeros between launches), `out f32 [d]`.
"""

from __future__ import annotations

from fwdshim.codegen.device import simulating
from fwdshim.codegen.gemv import blocks, gemv_blocks
from fwdshim.codegen.gemv_lanes import DotRow, q8_dots
from fwdshim.codegen.gemv_rows import Pair, Shape
from fwdshim.codegen.kernel import Kernel, Param, build, factory
from fwdshim.codegen.source import SharedArray, check_block, indent
from fwdshim.codegen.tuning import DEFAULT, Tuning
from fwdshim.codegen.unary import silu_expr
from fwdshim.limits import MOE_MAX_EXPERTS, MOE_MAX_TOP_K


def _check(e: int, d: int, top_k: int, ff: int | None = None) -> None:
    """ValueError, naming what is wrong, for a mixture the kernels cannot hold (`ff` None: the
    router's, which has none)."""
    width = "" if ff is None else f", ff = {ff}"
    if min(e, d, top_k, 32 if ff is None else ff) <= 0:
        raise ValueError(f"a mixture of {e} experts, top {top_k}, d = {d}{width}: a size that is not positive")
    if top_k > e:
        raise ValueError(f"a mixture keeping the top {top_k} of {e} experts: top_k > e")
    if d % 32 or (ff or 32) % 32:
        rows = f"rows of {d}" if ff is None else f"rows of {d} and {ff} values"
        raise ValueError(f"a mixture over {rows}: not whole blocks of 32")
    if e > MOE_MAX_EXPERTS:  # legality's B10
        raise ValueError(f"a mixture of {e} experts (at most {MOE_MAX_EXPERTS})")
    if top_k > MOE_MAX_TOP_K:  # legality's B09 (lane r of one warp keeps the r-th expert)
        raise ValueError(f"a mixture keeping {top_k} experts (at most {MOE_MAX_TOP_K})")


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
def logits(e: int, d: int, *, act: str = "f32", tuning: Tuning = DEFAULT) -> Kernel:
    """The router's logits `y[i] = router_i · x`, `f32 [e]` (what `topk` reads as `lg`): the GEMV
    family's Q8_0 GEMV of the router (`gemv.blocks`; params `qs`, `dw`, `x` or `xq, xd`, `y`), so it
    merges as any GEMV does (the norm before it its prologue, `topk` its tail)."""
    _check(e, d, 1)
    _x_params(d, act)
    return blocks("q8_0", e, d, act=act, tuning=tuning)


@factory
def topk(e: int, top_k: int, *, tuning: Tuning = DEFAULT) -> Kernel:
    """The router's choice from its logits `lg f32 [e]` (`logits`), by one warp: top-k over the
    logits (`top_k` rounds of a warp argmax; ties: the lower expert index; a NaN logit ranks below
    every number, so the kept experts are `top_k` distinct ones even from a row of NaNs), then the
    renormalized softmax of the kept logits, `w_i = exp(l_i - l_max) / Σ_kept exp(l_j - l_max)` (the
    softmax over all experts renormalized over the kept ones, exactly): every weight NaN where a
    kept logit is NaN, and every weight NaN where the kept logits hold an infinity (`inf - inf`; the
    executor's too). `reference.moe_route` follows the same rule. Outputs `idx int32 [top_k]`
    (best first), `wts f32 [top_k]`. One warp, no barrier and no shared memory: it runs as a tail of
    the logits' launch (`codegen.merge`)."""
    if min(e, top_k) <= 0 or top_k > e or e > MOE_MAX_EXPERTS or top_k > MOE_MAX_TOP_K:  # legality's B09, B10
        raise ValueError(f"the top {top_k} of {e} experts (at most {MOE_MAX_TOP_K} of at most {MOE_MAX_EXPERTS})")
    per_lane = -(-e // 32)
    body = f"""\
@cuda.jit(cache=True)
def topk_k(lg, idx, wts):
    lane = $tx % 32
    lv = cuda.local.array({per_lane}, float32)  # the lane's logits, read once
    for j in range({per_lane}):
        lv[j] = lg[min(lane + 32 * j, {e - 1})]
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
                lc = lv[j]
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
        Param("lg", "float32", e, "in", f"router logits [{e}]"),
        Param("idx", "int32", top_k, "out", "chosen experts, best first"),
        Param("wts", "float32", top_k, "out", "their renormalized weights"),
    ]
    return build(f"moe_topk_e{e}k{top_k}", body, "topk_k", (1,), (32,), params, f"MoE top-{top_k} of {e} experts' logits", pdl=tuning.pdl)


SWIGLU = Pair(("pz = " + silu_expr("pa"),), ("fmul_rn(pz, pb)",), "silu_mul")
"""The gate-up launch's pair epilogue: `silu(gate) * up`, each operation rounded on its own."""


def expert_shape(n: int, k: int, pair: bool) -> Shape:
    """The launch shape of an expert GEMV of N x K (`gate_up`, `down`): 16-byte pieces, eight warps,
    two rows a warp (a pair: gate's and up's row) or four, two steps' loads at once. Untimed: a first
    choice, to be measured (`bench/decode_step.py --shapes qwen3_30b_a3b`)."""
    del n, k
    return Shape(16, 2 if pair else 4, 8, 2, 1)


@factory
def gate_up(e: int, d: int, ff: int, top_k: int, *, act: str = "f32", weights: str = "q8_0",
            shape: Shape | None = None, tuning: Tuning = DEFAULT) -> Kernel:  # fmt: skip
    """The gate-up SwiGLU launch of the chosen experts: the family's GEMV (`gemv.gemv_blocks`) of the
    gate and up stacks as a pair over the one row of x, `experts=(e, top_k)`, with `SWIGLU` as the
    pair epilogue: `h[i, f] = silu(gate_e · x) * (up_e · x)` for `e = idx[i]` into `z0` (`y`, `y2`:
    the two products). Params: the weight type's arrays of each stack (`qs`, `dw`, then `qs2`, `dw2`
    for Q8_0), `x` or `xq, xd`, `idx`, then `y`, `y2`, `z0` (each `f32 [top_k, ff]`)."""
    _check(e, d, top_k, ff)
    _x_params(d, act)
    return gemv_blocks(ff, d, 1, act, shape or expert_shape(ff, d, True), pair=SWIGLU, weights=weights,
                       experts=(e, top_k), tuning=tuning)  # fmt: skip


@factory
def down(e: int, d: int, ff: int, top_k: int, *, weights: str = "q8_0", shape: Shape | None = None,
         tuning: Tuning = DEFAULT) -> Kernel:  # fmt: skip
    """The down-and-combine launch: the family's GEMV (`gemv.gemv_blocks`) of the down stack over the
    SwiGLU rows, row `i` by chosen expert `idx[i]` (`y f32 [top_k, d]`), with `combine`: `out[j] =
    Σ_i wts[i] · y[i, j]`, the experts summed in the order of `idx` (no atomics on the sums). Params:
    the weight type's arrays (`qs`, `dw` for Q8_0), `x f32 [top_k, ff]` (the SwiGLU rows), `idx`, `y`,
    `wts`, `ccount int32` (zeros between launches), `out f32 [d]`."""
    _check(e, d, top_k, ff)
    return gemv_blocks(d, ff, top_k, "f32", shape or expert_shape(d, ff, False), weights=weights,
                       experts=(e, top_k), combine=True, tuning=tuning)  # fmt: skip
