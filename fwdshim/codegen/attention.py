"""Single-query GQA attention over a cache, the score row in static shared memory.

`attention(h, kv, hd, l, quant=None, store_y=None, block=None, unroll=None) -> Kernel`, one CUDA
block per query head:

params `q f32 [h*hd]`, `k f32 [kv*hd]`, `v f32 [kv*hd]` (the current position's own key and value),
`k_cache f32 [(l-1)*kv*hd]`, `v_cache f32 [(l-1)*kv*hd]` (the cache allocation, row-major
`[l-1, kv*hd]`), `pos int32 [1]` (c: how many cache rows are written, `0 <= c <= l-1`, read on the
device so one compiled kernel and one captured graph serve every step), then the outputs `y f32
[h*hd]` (unless `store_y=False`) and, with `quant` (`one_word`/`two_words`, needs `hd % 32 == 0`),
`yq`/`yd`(/`ys`) of the quantized `y` (`codegen.quantize`; the class `attn_output_quant`).

Query head `j` reads kv head `j // (h/kv)`; the keys are cache rows `0..c-1` then `k`; scores
`q·key / √hd` into `sc` (shared), softmax over the `c+1` positions, `y = Σ p v`.

Static shared memory is one float32 row `sc[max(l, warps*hd)]` plus one 32-float reduction row:
`4*max(l, warps*hd) + 128` bytes, within the 48 KiB every architecture grants (the seed's bound;
`l <= 12256`; FlashDecode's split over blocks is a refused class). The block's threads all work:

- a head's row is read as `hd/4` 16-byte vectors (`ld_f32x4`; scalars when `hd % 4`) by a segment of
  `S` lanes (`S` the power of two >= `hd/4`, at most 32), so a warp takes `32/S` positions at a
  time and `unroll` of them per lane per step (the loads issued before any use: `unroll` 16-byte
  reads in flight per thread); scores: each segment's dot, reduced over its lanes (`shfl_xor`);
- softmax: the block's max and sum (`block_reduce`) over `sc`, `sc[p]` becoming `exp(s_p - max)`;
- output: each lane accumulates its dims over its positions, reading V rows the same coalesced way;
  the segments of a warp are combined by `shfl_xor`, the warps' partial rows through `sc` (reused
  once every score is read), summed per dim in warp order by one thread per dim, divided by the
  softmax sum, then stored and/or quantized (the epilogue: a warp holds one block of 32 dims).

The order of every sum depends on `(hd, block, unroll)` and `c` only, so the stored and quantizing
variants agree bit for bit (`fused: EXACT`). The default `block` (`default_block`) and `unroll`
(`default_unroll`) follow the cache length `l` and the head width.

`kv_append(caches) -> Kernel`: the cache maintenance of a decode step, one launch at the end of the
plan (`codegen.plan`, inside the captured graph): for each attention `i` with a cache of `rows_i`
rows of `width_i` (`caches = ((width_i, rows_i), ...)`), params `k{i} f32 [width_i]`, `v{i}`,
`k_cache{i} f32 [rows_i*width_i]` (inout), `v_cache{i}`, then `pos int32 [1]` (c); block `i` copies
`k{i}`, `v{i}` into row `c` of its caches when `0 <= c < rows_i` (a full cache is left as it is).
Numba passes a 1-D array as 56 bytes of kernel parameters, so one launch takes at most
`APPEND_LAYERS` attentions (4 KiB of parameters on every architecture); the plan launches it once per
`APPEND_LAYERS` attentions.
"""

from __future__ import annotations

import functools
import hashlib
import math

from fwdshim.codegen.compile import Kernel, Param, block_reduce, build, check_block, f32, indent, simulating
from fwdshim.codegen.quantize import check_format, epilogue, qact_params

STATIC_SHARED_BYTES = 48 * 1024
APPEND_LAYERS = 16
"""Attentions per `kv_append` launch: 4 arrays of 56 bytes each, plus `pos`, within 4 KiB."""


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def layout(hd: int) -> tuple[int, int, int]:
    """(W, S, C) for heads of `hd`: elements per load (4: a 16-byte vector, or 1 when `hd % 4`),
    lanes per position, loads per lane per row."""
    w = 4 if hd % 4 == 0 else 1
    nv = hd // w
    s = min(32, _pow2_at_least(nv))
    return w, s, -(-nv // s)


def shared_floats(hd: int, l: int, block: int) -> int:  # noqa: E741
    """The floats of the score row: `l` scores, or the warps' partial output rows if more."""
    return max(l, (block // 32) * hd)


def default_block(hd: int, l: int) -> int:  # noqa: E741
    """Threads per block: about one per 4 positions, 64..1024, kept within the shared-memory bound."""
    b = min(1024, max(64, _pow2_at_least(-(-l // 4))))
    while b > 32 and 4 * shared_floats(hd, l, b) + 128 > STATIC_SHARED_BYTES:
        b //= 2
    return b


def default_unroll(hd: int) -> int:
    """Positions per lane per step: eight 16-byte loads in flight per thread (the fastest of 2, 4, 8
    at 512 and 1024 threads on the H200, SmolLM2's heads at 4000 rows: bench/RESULTS.md), fewer
    for wide heads."""
    _, _, c = layout(hd)
    return max(1, 8 // c)


@functools.cache
def attention(
    h: int, kv: int, hd: int, l: int, *, quant: str | None = None, store_y: bool | None = None,
    block: int | None = None, unroll: int | None = None,
) -> Kernel:  # fmt: skip
    """The single-query GQA attention kernel (see the module docstring)."""
    if min(h, kv, hd) <= 0 or l < 1 or h % kv:
        raise ValueError(f"attention of {h} query heads over {kv} kv heads of {hd}, l = {l}")
    block = check_block(block if block is not None else default_block(hd, l))
    unroll = unroll if unroll is not None else default_unroll(hd)
    if unroll < 1:
        raise ValueError(f"attention unrolled {unroll} times")
    ns = shared_floats(hd, l, block)
    if 4 * ns + 4 * 32 > STATIC_SHARED_BYTES:
        what = f"score row of l = {l}" if ns == l else f"{block // 32} partial rows of {hd}"
        raise ValueError(f"attention {what} exceeds the 48 KiB of static shared memory")
    if quant is not None:
        check_format(quant)
        if hd % 32:
            raise ValueError(f"attention quantizes its result only in whole 32-value blocks, not heads of {hd}")
    store_y = quant is None if store_y is None else store_y
    if not store_y and quant is None:
        raise ValueError("an attention that neither stores nor quantizes its result")
    g = h // kv
    warps = block // 32
    row = kv * hd
    w, s, nc = layout(hd)
    nv = hd // w
    segs = 32 // s
    per_warp = segs * unroll
    per_block = warps * per_warp
    zero = "float32(0.0)"

    def valid(j: int) -> str | None:
        """The condition that chunk `j` of this lane is in the row (None: always)."""
        return None if s * (j + 1) <= nv else f"{lane_vec(j)} < {nv}"

    def both(*conds: str | None) -> str:
        cs = [c for c in conds if c]
        return " and ".join(cs) if cs else "True"

    def lane_vec(j: int) -> str:
        return f"(sl + {s * j})" if j else "sl"

    def elem(j: int, t: int) -> str:
        return f"{lane_vec(j)} * {w} + {t}" if w > 1 else lane_vec(j)

    def guarded(cond: str | None, stmt: str) -> str:
        return stmt if cond is None else f"if {cond}:\n    {stmt}"

    def pick(cond: str | None, value: str) -> str:
        return value if cond is None else f"{value} if {cond} else {zero}"

    def load(dst: str, arr: str, base: str, j: int, cond: str) -> str:
        """Statements loading chunk `j` of the row at `base` into `dst{t}` (zeros unless `cond`)."""
        names = [f"{dst}{t}" for t in range(w)]
        text = "\n".join(f"{n} = {zero}" for n in names) + f"\nif {cond}:\n"
        if w == 4:
            text += f"    {', '.join(names)} = ld_f32x4({arr}, {base} + {lane_vec(j)} * 4)\n"
        else:
            text += f"    {names[0]} = {arr}[{base} + {lane_vec(j)}]\n"
        return text

    def seg_sum(var: str, masks) -> str:
        return "\n".join(f"{var} = fadd_rn({var}, shfl_xor({var}, {m}))" for m in masks)

    down = [s >> (i + 1) for i in range(s.bit_length() - 1)]  # S/2 .. 1: within a segment
    up = [m for m in (1, 2, 4, 8, 16) if m >= s]  # S .. 16: across a warp's segments
    regs = [(j, t) for j in range(nc) for t in range(w)]

    qload = "\n".join(
        f"q{j}_{t} = {pick(valid(j), f'q[qo + {elem(j, t)}]')}" for j, t in regs
    )

    def dot(src: str) -> str:
        return " + ".join(f"q{j}_{t} * {src}{j}_{t}" for j, t in regs)

    # scores of the cache rows: U positions per lane per step, loads first
    score_loads, score_sums = [], []
    for u in range(unroll):
        score_loads.append(f"p{u} = base + {u * segs + 0} + seg\nok{u} = p{u} < c".replace(" + 0 +", " +"))
        for j in range(nc):
            score_loads.append(load(f"k{u}_{j}_", "k_cache", f"p{u} * {row} + ko", j, both(f"ok{u}", valid(j))).rstrip())
    for u in range(unroll):
        score_sums.append(f"s{u} = {dot(f'k{u}_')}")
    for u in range(unroll):
        score_sums.append(seg_sum(f"s{u}", down))
    for u in range(unroll):
        score_sums.append(f"if sl == 0 and ok{u}:\n    sc[p{u}] = fmul_rn(s{u}, {f32(1.0 / math.sqrt(hd))})")
    cur_k = "\n".join(
        f"kc{j}_{t} = {pick(valid(j), f'k[ko + {elem(j, t)}]')}" for j, t in regs
    )
    # the output: accumulators per (chunk, element) of this lane's dims
    acc_init = "\n".join(f"a{j}_{t} = {zero}" for j, t in regs)
    out_loads, out_sums = [], []
    for u in range(unroll):
        out_loads.append(f"p{u} = base + {u * segs} + seg\nok{u} = p{u} < c\nw{u} = sc[p{u}] if ok{u} else {zero}".replace(" + 0 +", " +"))
        for j in range(nc):
            out_loads.append(load(f"v{u}_{j}_", "v_cache", f"p{u} * {row} + ko", j, both(f"ok{u}", valid(j))).rstrip())
    for u in range(unroll):
        out_sums.extend(f"a{j}_{t} += w{u} * v{u}_{j}_{t}" for j, t in regs)
    cur_v = "wc = sc[c]\n" + "\n".join(
        guarded(valid(j), f"a{j}_{t} += wc * v[ko + {elem(j, t)}]") for j, t in regs
    )
    combine = "\n".join(seg_sum(f"a{j}_{t}", up) for j, t in regs if up)
    partials = "\n".join(
        guarded(valid(j), f"sc[warp * {hd} + {elem(j, t)}] = a{j}_{t}") for j, t in regs
    )

    params = [
        Param("q", "float32", h * hd, "in", f"[{h}, {hd}]"),
        Param("k", "float32", row, "in", f"[{kv}, {hd}]"),
        Param("v", "float32", row, "in", f"[{kv}, {hd}]"),
        Param("k_cache", "float32", (l - 1) * row, "in", f"[{l - 1}, {row}]"),
        Param("v_cache", "float32", (l - 1) * row, "in", f"[{l - 1}, {row}]"),
        Param("pos", "int32", 1, "in", "cache rows written, c"),
    ]
    if store_y:
        params.append(Param("y", "float32", h * hd, "out", f"[{h}, {hd}]"))
    if quant:
        params.extend(qact_params(h * hd, 1, quant, prefix="y"))
    names = ", ".join(p.name for p in params)
    store = "if ok:\n    y[qo + dd] = out\n" if store_y else ""
    finish = store + (epilogue("out", "qo + dd", "ok", "(qo + dd) // 32", "ok", quant, prefix="y") if quant else "")
    # with a quantize epilogue a warp works only on dims of its head (hd % 32 == 0): its lanes are one block
    loop = f"for d0 in range(0, {hd}, {block}):\n    dd = d0 + tid\n    ok = dd < {hd}"
    body_indent = 1
    if quant:
        loop += f"\n    if d0 + warp * 32 < {hd}:"
        body_indent = 2
    outer = f"""\
out = {zero}
if ok:
    for wi in range({warps}):
        out += sc[wi * {hd} + dd]
    out = fdiv_rn(out, total)
{finish}"""
    # on a GPU the block size bounds the registers (64 a thread at 1024 threads: the launch never fails
    # for want of them); the simulator's `cuda.jit` takes no launch bounds
    bounds = "" if simulating() else f", launch_bounds={block}"
    body = f"""\
@cuda.jit(cache=True{bounds})
def attention_k({names}):
    sc = cuda.shared.array({ns}, float32)
    red0 = cuda.shared.array(32, float32)
    tid = cuda.threadIdx.x
    lane = tid % 32
    warp = tid // 32
    seg = lane // {s}
    sl = lane % {s}
    head = cuda.blockIdx.x
    kvh = head // {g}
    qo = head * {hd}
    ko = kvh * {hd}
    c = min(max(pos[0], 0), {l - 1})
{indent(qload, 1)}
    for base in range(warp * {per_warp}, c, {per_block}):
{indent(chr(10).join(score_loads), 2)}
{indent(chr(10).join(score_sums), 2)}
    if warp == 0:
{indent(cur_k, 2)}
        s0 = {dot("kc")}
{indent(seg_sum("s0", down), 2)}
        if lane == 0:
            sc[c] = fmul_rn(s0, {f32(1.0 / math.sqrt(hd))})
    cuda.syncthreads()
    m = float32(-math.inf)
    for p in range(tid, c + 1, {block}):
        m = max(m, sc[p])
{indent(block_reduce("m", "max", "red0", warps), 1)}
    cuda.syncthreads()
    total = {zero}
    for p in range(tid, c + 1, {block}):
        e = float32(math.exp(fsub_rn(sc[p], m)))
        sc[p] = e
        total = fadd_rn(total, e)
{indent(block_reduce("total", "sum", "red0", warps), 1)}
    cuda.syncthreads()
{indent(acc_init, 1)}
    for base in range(warp * {per_warp}, c, {per_block}):
{indent(chr(10).join(out_loads), 2)}
{indent(chr(10).join(out_sums), 2)}
    if warp == 0 and seg == 0:
{indent(cur_v, 2)}
{indent(combine, 1)}
    cuda.syncthreads()
    if seg == 0:
{indent(partials, 2)}
    cuda.syncthreads()
{indent(loop, 1)}
{indent(outer, 1 + body_indent)}
"""
    tag = f"_{quant}" if quant else ""
    name = f"attention{tag}_h{h}kv{kv}d{hd}_l{l}_b{block}u{unroll}"
    notes = f"single-query GQA attention, {h} heads over {kv} kv heads of {hd}, l = {l}"
    return build(name, body, "attention_k", (h,), (block,), params, notes)


@functools.cache
def kv_append(caches: tuple[tuple[int, int], ...], block: int | None = None) -> Kernel:
    """The cache append kernel of `caches = ((width, rows), ...)`, one per attention (see the module
    docstring). ValueError for no caches, more than `APPEND_LAYERS`, or an empty row."""
    if not caches or len(caches) > APPEND_LAYERS:
        raise ValueError(f"kv_append of {len(caches)} attentions (1..{APPEND_LAYERS} a launch)")
    if any(w <= 0 or r < 0 for w, r in caches):
        raise ValueError(f"kv_append of caches {list(caches)}")
    widest = max(w for w, _ in caches)
    block = check_block(block if block is not None else min(256, max(32, _pow2_at_least(widest))))
    params: list[Param] = []
    branches = []
    for i, (w, r) in enumerate(caches):
        params += [
            Param(f"k{i}", "float32", w, "in", f"attention {i}'s key row [{w}]"),
            Param(f"v{i}", "float32", w, "in", f"attention {i}'s value row [{w}]"),
            Param(f"k_cache{i}", "float32", r * w, "inout", f"[{r}, {w}], row c written"),
            Param(f"v_cache{i}", "float32", r * w, "inout", f"[{r}, {w}], row c written"),
        ]
        branches.append(f"""{"if" if i == 0 else "elif"} b == {i} and c < {r}:
    for t in range(tid, {w}, {block}):
        k_cache{i}[c * {w} + t] = k{i}[t]
        v_cache{i}[c * {w} + t] = v{i}[t]""")
    params.append(Param("pos", "int32", 1, "in", "cache rows written, c: the row appended"))
    names = ", ".join(p.name for p in params)
    body = f"""@cuda.jit(cache=True)
def kv_append_k({names}):
    b = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    c = pos[0]
    if c < 0:
        return
{indent(chr(10).join(branches), 1)}
"""
    uniform = len(set(caches)) == 1
    if uniform:
        (w, r) = caches[0]
        name = f"kv_append_{len(caches)}x{w}_r{r}"
    else:
        name = f"kv_append_{len(caches)}_{hashlib.sha256(repr(caches).encode()).hexdigest()[:8]}"
    notes = f"append {len(caches)} attentions' k, v rows at row c of their caches"
    return build(name, body, "kv_append_k", (len(caches),), (block,), params, notes)
