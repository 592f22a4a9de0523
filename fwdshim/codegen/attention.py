"""Single-query GQA attention over a cache, each head's rows split over blocks (flash-decoding).

`attention(h, kv, hd, l, quant=None, store_y=None, block=None, unroll=None, splits=None) -> Kernel`,
`splits` blocks per query head (grid `h * splits`; block `b` is head `b % h`, split `b // h`):

params `q f32 [h*hd]`, `k f32 [kv*hd]`, `v f32 [kv*hd]` (the current position's own key and value),
`k_cache f32 [(l-1)*kv*hd]`, `v_cache f32 [(l-1)*kv*hd]` (the cache allocation, row-major
`[l-1, kv*hd]`), `pos int32 [1]` (c: how many cache rows are written, `0 <= c <= l-1`, read on the
device so one compiled kernel and one captured graph serve every step), then the outputs `y f32
[h*hd]` (unless `store_y=False`) and, with `quant` (`one_word`/`two_words`, needs `hd % 32 == 0`),
`yq`/`yd`(/`ys`) of the quantized `y` (`codegen.quantize`; the class `attn_output_quant`); with
`splits > 1` three scratch arrays: `part_o f32 [h*splits*hd]` and `part_ml f32 [h*splits*2]` (each
split's unnormalized output, score max and exp-sum) and `count int32 [h]` (splits finished per head:
zero before the first launch, and left zero by every launch).

Query head `j` reads kv head `j // (h/kv)`; the keys are cache rows `0..c-1` then `k`; scores
`q·key / √hd`, softmax over the `c+1` positions, `y = Σ p v`. The `c+1` positions are cut into
`active` splits of `rows` positions (`split_rows`: `ceil((c+1)/splits)` rounded up to a whole step,
`unroll` passes of the block's lane segments; the blocks of the splits past `active` return at once), so a long cache
is read by many SMs: `default_splits` gives a head a split per `SPLIT_ROWS` cache rows. A split's block:

- a head's row is read as `hd/4` 16-byte vectors (`ld_f32x4`; scalars when `hd % 4`) by a segment of
  `S` lanes (`S` the power of two >= `hd/4`, at most 32), so a warp takes `32/S` positions at a
  time, the block's segments consecutive rows, and `unroll` of them per lane per step (the loads
  issued before any use); scores: each segment's dot, reduced over its lanes (`shfl_xor`), into `sc`
  (static shared memory);
- softmax of the split: the block's max `m` and sum (`block_reduce`) over `sc`, `sc[p]` becoming
  `exp(s_p - m)`;
- output: each lane accumulates its dims over its positions, reading V rows the same coalesced way
  (the first step's V rows loaded before the scores, with the K rows: a split of one step is one
  memory round trip); the segments of a warp are combined by `shfl_xor`, the warps' partial rows
  through `sc` (reused once every score is read), summed per dim in warp order by one thread per dim;
- with one split active (a short cache) the block divides by its sum and stores and/or quantizes
  (the epilogue: a warp holds one block of 32 dims). Otherwise it writes its partial row, max and
  sum, fences, and counts itself done (`atomic.add` on `count[head]`); the block that finishes last
  resets the count and combines the head: `M = max m_t`, `y = Σ_t e^(m_t-M) o_t / Σ_t e^(m_t-M) l_t`
  in split order, then stores and/or quantizes as above.

Static shared memory: `sc` of `max(rows of the widest split, warps*hd, 2*splits)` floats, a 32-float
reduction row and a flag. The seed's bound stays: `4*l + 128 <= 48 KiB` (`l <= 12256`, legality's
K18). The order of every sum depends on `(hd, block, unroll, splits)` and `c` only, so the stored and
quantizing variants agree bit for bit (`fused: EXACT`). The default `block` (`default_block`, 128
threads), `unroll` (`default_unroll`) and `splits` follow the head width, `l` and `h`.

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

import hashlib
import math

from fwdshim.codegen.device import simulating
from fwdshim.codegen.kernel import Kernel, Param, build, factory
from fwdshim.codegen.quantize import check_format, epilogue, qact_params
from fwdshim.codegen.source import SharedArray, block_reduce, check_block, count_done, f32, indent, release_import
from fwdshim.codegen.tuning import DEFAULT, Tuning
from fwdshim.limits import (  # noqa: F401 - the attention's launch shape, written once in limits
    SPLIT_ROWS,
    STATIC_SHARED_BYTES,
    _pow2_at_least,
    attention_shared_floats,
    default_block,
    default_splits,
    default_unroll,
    layout,
    split_rows,
)

APPEND_LAYERS = 16
"""Attentions per `kv_append` launch: 4 arrays of 56 bytes each, plus `pos`, within 4 KiB."""

@factory
def attention(
    h: int, kv: int, hd: int, l: int, *, quant: str | None = None, store_y: bool | None = None,
    block: int | None = None, unroll: int | None = None, splits: int | None = None, min_blocks: int | None = None, tuning: Tuning = DEFAULT,
) -> Kernel:  # fmt: skip
    """The single-query GQA attention kernel (see the module docstring). `min_blocks`: the blocks an
    SM must hold at once (CUDA launch bounds: ptxas keeps the registers a thread within them; 0, the
    default, for none: bench/RESULTS.md has the bounds measured)."""
    if min(h, kv, hd) <= 0 or l < 1 or h % kv:
        raise ValueError(f"attention of {h} query heads over {kv} kv heads of {hd}, l = {l}")
    if 4 * l + 4 * 32 > STATIC_SHARED_BYTES:  # the seed's bound (legality's K18), kept with the split
        raise ValueError(f"attention score row of l = {l} exceeds the 48 KiB of static shared memory")
    block = check_block(block if block is not None else default_block(hd, l))
    unroll = unroll if unroll is not None else default_unroll(hd)
    if unroll < 1:
        raise ValueError(f"attention unrolled {unroll} times")
    ns_max = splits if splits is not None else default_splits(h, hd, l, block)
    if ns_max < 1:
        raise ValueError(f"attention split {ns_max} ways")
    warps = block // 32
    w, s, nc = layout(hd)
    segs = 32 // s
    per_pass = warps * segs
    rows_max = split_rows(l - 1, ns_max, block, hd, unroll)
    ns = attention_shared_floats(hd, l, block, ns_max, unroll)
    rows_step = per_pass * unroll if ns_max > 1 else per_pass  # `split_rows`'s rounding
    if 4 * ns + 4 * 32 > STATIC_SHARED_BYTES:  # legality's B08 (`limits.attention_limit`) for the defaults
        what = f"score row of {rows_max} rows" if ns == rows_max else f"{warps} partial rows of {hd}"
        raise ValueError(f"attention {what} exceeds the 48 KiB of static shared memory")
    if quant is not None:
        check_format(quant)
        if hd % 32:
            raise ValueError(f"attention quantizes its result only in whole 32-value blocks, not heads of {hd}")
    store_y = quant is None if store_y is None else store_y
    if not store_y and quant is None:
        raise ValueError("an attention that neither stores nor quantizes its result")
    g = h // kv
    row = kv * hd
    nv = hd // w
    per_block = per_pass * unroll
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

    def position(u: int) -> str:
        """Position `u` of this lane's segment in a step: the block's segments take consecutive rows."""
        offset = f" + {u * per_pass}" if u * per_pass else ""
        return f"p{u} = base{offset} + mine\nok{u} = p{u} < r1"

    # scores of the split's cache rows: U positions per lane per step, loads first
    score_loads, score_sums = [], []
    for u in range(unroll):
        score_loads.append(position(u))
        for j in range(nc):
            score_loads.append(load(f"k{u}_{j}_", "k_cache", f"p{u} * {row} + ko", j, both(f"ok{u}", valid(j))).rstrip())
    for u in range(unroll):
        score_sums.append(f"s{u} = {dot(f'k{u}_')}")
    for u in range(unroll):
        score_sums.append(seg_sum(f"s{u}", down))
    for u in range(unroll):
        score_sums.append(f"if sl == 0 and ok{u}:\n    sc[p{u} - r0] = fmul_rn(s{u}, {f32(1.0 / math.sqrt(hd))})")
    cur_k = "\n".join(
        f"kc{j}_{t} = {pick(valid(j), f'k[ko + {elem(j, t)}]')}" for j, t in regs
    )
    def weight(idx: str) -> str:
        """A position's softmax weight exp(s - m), stored over its score by the block's softmax."""
        return f"sc[{idx}]"

    # the output: accumulators per (chunk, element) of this lane's dims
    acc_init = "\n".join(f"a{j}_{t} = {zero}" for j, t in regs)
    out_loads, out_sums = [], []
    for u in range(unroll):
        out_loads.append(position(u) + f"\nw{u} = {weight(f'p{u} - r0')} if ok{u} else {zero}")
        for j in range(nc):
            out_loads.append(load(f"v{u}_{j}_", "v_cache", f"p{u} * {row} + ko", j, both(f"ok{u}", valid(j))).rstrip())
    for u in range(unroll):
        out_sums.extend(f"a{j}_{t} += w{u} * v{u}_{j}_{t}" for j, t in regs)
    # the output's first step peeled: its V rows loaded with the split's first K rows (before the
    # scores: one memory round trip for a split of one step), its weights read after the softmax
    v_prefetch, first_weights = [], []
    for u in range(unroll):
        v_prefetch.append(position(u))
        for j in range(nc):
            v_prefetch.append(load(f"v{u}_{j}_", "v_cache", f"p{u} * {row} + ko", j, both(f"ok{u}", valid(j))).rstrip())
        first_weights.append(position(u) + f"\nw{u} = {weight(f'p{u} - r0')} if ok{u} else {zero}")
    cur_v = f"wc = {weight('c - r0')}\n" + "\n".join(
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
    if ns_max > 1:
        params += [
            Param("part_o", "float32", h * ns_max * hd, "inout", f"[{h}, {ns_max}, {hd}]: each split's unnormalized output"),
            Param("part_ml", "float32", h * ns_max * 2, "inout", f"[{h}, {ns_max}, 2]: each split's score max and sum"),
            Param("count", "int32", h, "inout", f"[{h}]: splits done per head (0 between launches)"),
        ]
    names = ", ".join(p.name for p in params)
    store = "if ok:\n    y[qo + dd] = out\n" if store_y else ""
    finish = store + (epilogue("out", "qo + dd", "ok", "(qo + dd) // 32", "ok", quant, prefix="y") if quant else "")
    # with a quantize epilogue a warp works only on dims of its head (hd % 32 == 0): its lanes are one block
    loop = f"for d0 in range(0, {hd}, {block}):\n    dd = d0 + tid\n    ok = dd < {hd}"
    body_indent = 1
    if quant:
        loop += f"\n    if d0 + warp * 32 < {hd}:"
        body_indent = 2
    single = f"""\
out = {zero}
if ok:
    for wi in range({warps}):
        out += sc[wi * {hd} + dd]
    out = fdiv_rn(out, total)
{finish}"""
    reg = ns_max <= tuning.combine_registers  # the combine's splits held in registers, their loads issued together
    batch = tuning.combine_batch

    def upto(t: int) -> str:
        return "True" if t == 0 else f"{t} < active"

    def slot_of(t: int) -> str:  # a split past `active` reads the last active one's (in range), unused
        return f"(slot0 + min({t}, active - 1))"

    if reg:
        # every split's weight `w{t}` and output in registers
        o_loads = "\n".join(f"o{t} = part_o[{slot_of(t)} * {hd} + dd]" for t in range(ns_max))
        o_sums = "\n".join(
            guarded(None if t == 0 else upto(t), f"out = fadd_rn(out, fmul_rn(w{t}, o{t}))") for t in range(ns_max)
        )
        merged = f"""\
out = {zero}
if ok:
{indent(o_loads, 1)}
{indent(o_sums, 1)}
    out = fdiv_rn(out, total)
{finish}"""
    else:
        # `combine_batch` splits' outputs loaded together (in range: a split past `active` reads the
        # last active one's, unused), then added in split order
        o_loads = "\n".join(f"o{t} = part_o[(slot0 + min(t0 + {t}, active - 1)) * {hd} + dd]" for t in range(batch))
        o_sums = "\n".join(
            guarded(None if t == 0 else f"t0 + {t} < active", f"out = fadd_rn(out, fmul_rn(sc[t0 + {t}], o{t}))")
            for t in range(batch)
        )
        merged = f"""\
out = {zero}
if ok:
    for t0 in range(0, active, {batch}):
{indent(o_loads, 2)}
{indent(o_sums, 2)}
    out = fdiv_rn(out, total)
{finish}"""
    if reg:
        weights = "\n".join(
            [f"m{t} = part_ml[2 * {slot_of(t)}]\nl{t} = part_ml[2 * {slot_of(t)} + 1]" for t in range(ns_max)]
            + ["m = float32(-math.inf)"]
            + [guarded(None if t == 0 else upto(t), f"m = max(m, m{t})") for t in range(ns_max)]
            + [f"w{t} = float32(math.exp(fsub_rn(m{t}, m)))" for t in range(ns_max)]
            + [f"total = {zero}"]
            + [guarded(None if t == 0 else upto(t), f"total = fadd_rn(total, fmul_rn(w{t}, l{t}))") for t in range(ns_max)]
        )
    else:
        # every split's max and sum into shared memory at once (a thread a split), then read there
        weights = f"""\
for t in range(tid, active, {block}):
    sc[t] = part_ml[2 * (slot0 + t)]
    sc[{ns_max} + t] = part_ml[2 * (slot0 + t) + 1]
cuda.syncthreads()
m = float32(-math.inf)
for t in range(active):
    m = max(m, sc[t])
cuda.syncthreads()
for t in range(tid, active, {block}):
    sc[t] = float32(math.exp(fsub_rn(sc[t], m)))
cuda.syncthreads()
total = {zero}
for t in range(active):
    total = fadd_rn(total, fmul_rn(sc[t], sc[{ns_max} + t]))"""
    counted, acquired = count_done("flag", "count", "head", "tid")
    counted += "\ncuda.syncthreads()"
    if ns_max > 1:
        tail = f"""\
if active == 1:
{indent(loop, 1)}
{indent(single, 1 + body_indent)}
    return
slot = head * {ns_max} + sp
for dd in range(tid, {hd}, {block}):
    out = {zero}
    for wi in range({warps}):
        out += sc[wi * {hd} + dd]
    part_o[slot * {hd} + dd] = out
if tid == 0:
    part_ml[2 * slot] = m
    part_ml[2 * slot + 1] = total
{counted}
if flag[0] != active - 1:
    return
{acquired}slot0 = head * {ns_max}
if tid == 0:
    count[head] = 0
{weights}
{loop}
{indent(merged, body_indent)}"""
    else:
        tail = f"{loop}\n{indent(single, body_indent)}"
    head_loads = "\n".join([
        qload, "base = r0", *v_prefetch, f"for base in range(r0, r1, {per_block}):",
        indent(chr(10).join(score_loads), 1), indent(chr(10).join(score_sums), 1),
    ])  # fmt: skip
    # on a GPU the block size bounds the registers (64 a thread at 1024 threads: the launch never fails
    # for want of them); the simulator's `cuda.jit` takes no launch bounds
    grid = h * ns_max
    min_blocks = 0 if min_blocks is None else min_blocks
    if min_blocks < 0:
        raise ValueError(f"attention launch bounds of {min_blocks} blocks an SM")
    bounds = "" if simulating() else f", launch_bounds=({block}, {min_blocks})" if min_blocks > 1 else f", launch_bounds={block}"
    softmax = f"""\
m = float32(-math.inf)
for p in range(tid, n, {block}):
    m = max(m, sc[p])
{block_reduce("m", "max", "red0", warps)}
cuda.syncthreads()
total = {zero}
for p in range(tid, n, {block}):
    e = float32(math.exp(fsub_rn(sc[p], m)))
    sc[p] = e
    total = fadd_rn(total, e)
{block_reduce("total", "sum", "red0", warps)}
cuda.syncthreads()"""
    shared = [SharedArray("sc", ns, "float32"), SharedArray("red0", 32, "float32"), SharedArray("flag", 1, "int32")]
    body = (release_import() if ns_max > 1 else "") + f"""\
@cuda.jit(cache=True{bounds})
def attention_k({names}):
{"".join(a.decl for a in shared)}    tid = $tx
    lane = tid % 32
    warp = tid // 32
    seg = lane // {s}
    sl = lane % {s}
    mine = warp * {segs} + seg
    head = $bx % {h}
    sp = $bx // {h}
    kvh = head // {g}
    qo = head * {hd}
    ko = kvh * {hd}
    c = min(max(pos[0], 0), {l - 1})
    rows = {rows_step} * ((((c + {ns_max}) // {ns_max}) + {rows_step - 1}) // {rows_step})
    active = (c + rows) // rows
    if sp >= active:
        return
    r0 = sp * rows
    r1 = min(r0 + rows, c)
    last = sp == active - 1
{indent(head_loads, 1)}
    if last and warp == 0:
{indent(cur_k, 2)}
        s0 = {dot("kc")}
{indent(seg_sum("s0", down), 2)}
        if lane == 0:
            sc[c - r0] = fmul_rn(s0, {f32(1.0 / math.sqrt(hd))})
    cuda.syncthreads()
    n = min(r0 + rows, c + 1) - r0
{indent(softmax, 1)}
{indent(acc_init, 1)}
    base = r0
{indent(chr(10).join(first_weights), 1)}
{indent(chr(10).join(out_sums), 1)}
    for base in range(r0 + {per_block}, r1, {per_block}):
{indent(chr(10).join(out_loads), 2)}
{indent(chr(10).join(out_sums), 2)}
    if last and warp == 0 and seg == 0:
{indent(cur_v, 2)}
{indent(combine, 1)}
    cuda.syncthreads()
    if seg == 0:
{indent(partials, 2)}
    cuda.syncthreads()
{indent(tail, 1)}
"""
    tag = f"_{quant}" if quant else ""
    name = f"attention{tag}_h{h}kv{kv}d{hd}_l{l}_b{block}u{unroll}s{ns_max}"
    notes = f"single-query GQA attention, {h} heads over {kv} kv heads of {hd}, l = {l}, {ns_max} splits a head"
    return build(name, body, "attention_k", (grid,), (block,), params, notes, pdl=tuning.pdl, shared=shared)


@factory
def kv_append(caches: tuple[tuple[int, int], ...], block: int | None = None, *, tuning: Tuning = DEFAULT) -> Kernel:
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
    b = $bx
    tid = $tx
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
    return build(name, body, "kv_append_k", (len(caches),), (block,), params, notes, pdl=tuning.pdl)
