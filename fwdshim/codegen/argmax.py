"""The greedy pick of a decode step on the device, and the step's position advanced.

`argmax(n, positions, block=256, per_thread=16) -> Kernel`, the last launch of the device-resident
decode loop (`codegen.loop`), inside the captured graph:

params `logits float32 [n]`, `pos int32 [1]` (inout: the step's position `p`, the plan's
`%cache_len`; left at `min(p+1, positions)` for the next step), `ids int32 [positions+1]` (inout: the
token at each position), `given int32 [1]` (the first position whose token the device may write:
the host's prompt ends there), the outputs `out_id int32 [positions+1]` and `out_val float32
[positions+1]` (slot `p+1`: the pick after position `p` and its logit, what the host reads back: a
mapped host array on the GPU), then the scratch `part_v float32 [grid]`, `part_i int32 [grid]`,
`count int32 [1]` (zero before the first launch, left zero by each).

The pick is NumPy's `argmax`: the first index of the largest logit, or of the first NaN when there
is one. It is a total order on `(value, index)` (NaN above every number, ties to the lower index),
so the result does not depend on the order of the reduction: each block reduces its stretch
(`per_thread` strided values a thread, then the warps by shuffles, then the block's warps), writes
its pair, fences and counts itself done; the last block reduces the blocks' pairs, writes `out_id`,
`out_val`, `ids[p+1]` (when `p+1 >= given`), advances `pos` and resets `count`.
"""

from __future__ import annotations

from fwdshim.codegen.kernel import Kernel, Param, build, factory
from fwdshim.codegen.source import SharedArray, check_block
from fwdshim.codegen.tuning import DEFAULT, Tuning

_BETTER = """\
@cuda.jit(device=True, inline=True)
def better(av, ai, bv, bi):
    # whether (av, ai) comes before (bv, bi) in NumPy's argmax order
    if av != av:
        return bv == bv or ai < bi
    if bv != bv:
        return False
    return av > bv or (av == bv and ai < bi)


@cuda.jit(device=True, inline=True)
def warp_best(v, i):
    # the best (value, index) pair of the warp, in every lane (xor butterfly)
    ov = shfl_xor(v, 16)
    oi = shfl_xor(i, 16)
    if better(ov, oi, v, i):
        v = ov
        i = oi
    ov = shfl_xor(v, 8)
    oi = shfl_xor(i, 8)
    if better(ov, oi, v, i):
        v = ov
        i = oi
    ov = shfl_xor(v, 4)
    oi = shfl_xor(i, 4)
    if better(ov, oi, v, i):
        v = ov
        i = oi
    ov = shfl_xor(v, 2)
    oi = shfl_xor(i, 2)
    if better(ov, oi, v, i):
        v = ov
        i = oi
    ov = shfl_xor(v, 1)
    oi = shfl_xor(i, 1)
    if better(ov, oi, v, i):
        v = ov
        i = oi
    return v, i
"""


@factory
def argmax(n: int, positions: int, block: int = 256, per_thread: int = 16, *, tuning: Tuning = DEFAULT) -> Kernel:
    """The greedy-pick kernel over `n` logits (see the module docstring)."""
    if n <= 0 or positions <= 0 or per_thread <= 0:
        raise ValueError(f"argmax of {n} logits over {positions} positions")
    check_block(block)
    warps = block // 32
    chunk = block * per_thread
    grid = -(-n // chunk)
    params = [
        Param("logits", "float32", n, "in", f"[{n}]"),
        Param("pos", "int32", 1, "inout", "the step's position; advanced by one"),
        Param("ids", "int32", positions + 1, "inout", "the token at each position; p+1 written"),
        Param("given", "int32", 1, "in", "the first position the device may write in ids"),
        Param("out_id", "int32", positions + 1, "out", "slot p+1: the pick after position p"),
        Param("out_val", "float32", positions + 1, "out", "slot p+1: its logit"),
        Param("part_v", "float32", grid, "inout", "each block's best logit"),
        Param("part_i", "int32", grid, "inout", "each block's best index"),
        Param("count", "int32", 1, "inout", "blocks done (0 between launches)"),
    ]
    names = ", ".join(p.name for p in params)
    shared = [SharedArray("rv", 32, "float32"), SharedArray("ri", 32, "int32"), SharedArray("flag", 1, "int32")]
    body = f"""\
{_BETTER}

@cuda.jit(cache=True)
def argmax_k({names}):
{"".join(a.decl for a in shared)}    tid = $tx
    lane = tid % 32
    warp = tid // 32
    b = $bx
    p = pos[0]
    bv = float32(-math.inf)
    bi = int32({n})
    for t in range({per_thread}):
        i = int32(b * {chunk} + t * {block} + tid)
        if i < {n}:
            v = logits[i]
            if better(v, i, bv, bi):
                bv = v
                bi = i
    bv, bi = warp_best(bv, bi)
    if lane == 0:
        rv[warp] = bv
        ri[warp] = bi
    cuda.syncthreads()
    if warp == 0:
        bv = rv[lane] if lane < {warps} else float32(-math.inf)
        bi = ri[lane] if lane < {warps} else int32({n})
        bv, bi = warp_best(bv, bi)
        if lane == 0:
            part_v[b] = bv
            part_i[b] = bi
            cuda.threadfence()
            flag[0] = cuda.atomic.add(count, 0, 1)
    cuda.syncthreads()
    if flag[0] != {grid - 1}:
        return
    cuda.threadfence()
    if warp == 0:
        bv = float32(-math.inf)
        bi = int32({n})
        for j in range(lane, {grid}, 32):
            v = part_v[j]
            i = part_i[j]
            if better(v, i, bv, bi):
                bv = v
                bi = i
        bv, bi = warp_best(bv, bi)
        if lane == 0:
            count[0] = 0
            q = min(max(p, 0), {positions - 1}) + 1
            out_id[q] = bi
            out_val[q] = bv
            if q >= given[0]:
                ids[q] = bi
            pos[0] = min(p + 1, {positions})
"""
    name = f"argmax_{n}_p{positions}_b{block}t{per_thread}"
    notes = f"greedy pick over {n} logits, the step's position advanced"
    return build(name, body, "argmax_k", (grid,), (block,), params, notes, pdl=tuning.pdl, shared=shared)
