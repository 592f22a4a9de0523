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

import functools
import hashlib
import math

from fwdshim.codegen import kernel as _kernel
from fwdshim.codegen.kernel import (
    Kernel,
    Param,
    block_reduce,
    build,
    check_block,
    count_done,
    f32,
    indent,
    release_import,
    simulating,
)
from fwdshim.codegen.quantize import check_format, epilogue, qact_params
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

COMBINE_REGISTERS = 32
"""The most splits a head's combine holds in registers: each thread loads every split's max, sum and
output value at once (one L2 round trip each). More splits go through shared memory: a thread a
split stores every split's max and sum there at once, and the output loops over the splits
`COMBINE_BATCH` at a time, their loads issued together (a loop of one split a step waited on each
load in turn: 33 splits of Llama-3-8B's heads took 14.6 us where 17 in registers took 9.2). The same
operations in the same order either way."""

COMBINE_BATCH = 8
"""Splits' outputs a combine past `COMBINE_REGISTERS` loads together per step."""

COMBINE_EARLY = False
"""Whether a combine of at most `COMBINE_REGISTERS` splits whose head fits the block (`hd <= block`)
holds only the splits' outputs in registers — loaded first, a thread a dim — and their weights in
shared memory (a thread a split loads its max and sum, read back at constant indices), instead of
every thread loading every split's max, sum and output. The loads are one L2 round trip either way
and the sums the same operations in the same order (the same bits); the kernel's registers become its
cache loop's (ptxas 13.0, sm_90, 17 splits: Llama-3-8B's heads 128 -> 72 a thread at `unroll` 4, 128
-> 96 at 8; SmolLM2's 128 -> 72). Off: measured on the H200 (2026-12-02, `bench/attention.py
--no-torch --quant --try`, one call, µs stored / quantizing, default launch -> this) it loses at the
default unroll — Llama-3-8B fill 512 8.87 / 9.44 -> 9.24 / 9.67, fill 1000 10.45 / 10.63 -> 13.71 /
14.20; SmolLM2 5.57 / 5.94 -> 6.68 / 7.08, 6.87 / 7.31 -> 9.46 / 9.85 — and wins only for Llama-3-8B's
heads at `unroll` 8 and fill 512 (`b128u8s17`: 7.87 / 8.27, one step of 32 rows in one wave of 5
blocks an SM), 10.60 / 11.11 at fill 1000."""


WARP_SOFTMAX = False
"""Whether each warp of a split's block reduces the split's scores itself — their max and the sum of
their exponentials, a lane every 32nd score, then the warp butterfly — and the output computes each
position's weight `exp(s - m)` where it reads it, instead of the block's two reductions through shared
memory (four barriers) and the exponentials stored over the scores. The weights are the same bits
(the same max, the same `exp(fsub_rn(s, m))`); the sum's order is the lanes' (the block's threads'
before): other bits, the same for the storing and quantizing forms. Aimed at the softmax stage's
0.7-0.8 us a split (`bench/stages.py`, H200, 2026-12-02). ptxas 13.0, sm_90, the int8-act form: 5
barriers where there were 9, and Llama-3-8B's heads 135 registers (128 before: 3 blocks an SM where 4
fit, so try it with `MIN_BLOCKS=4`), SmolLM2's 127. Off: measured on the H200 (2026-12-02,
`bench/attention.py --quant --stages`, fill 512, with `MIN_BLOCKS=4`, against the default in the same
call) its softmax stage 0.73-0.75 -> 0.55-0.66 us (Llama-3-8B) and 0.66 -> 0.45 (SmolLM2), but its
scores stage slower (1.9-2.0 -> 2.4-2.5 / 0.65-0.93 -> 0.87-1.16): a launch 8.82 / 9.32 -> 8.51 / 9.21 us
(stored / quantizing, Llama-3-8B's heads), 5.53 / 6.09 -> 5.85 / 6.35 (SmolLM2's)."""

RELEASE_COUNT = True
"""Whether a split's block counts itself done with one acquire-release atomic of thread 0 after the
block's barrier (`intrinsics.atomic_add_acq_rel`) instead of `cuda.threadfence()` in every thread, a
relaxed `atomic.add` and, in the head's last block, `cuda.threadfence()` again: one GPU-scope fence
and L2 round trip fewer on the chain of every split and of the combine (the stage stamps of
`bench/stages.py` put the partial row's count at 1.0-1.1 us and the combine's first reads at 0.85-1.0
on the H200, 2026-12-02: bench/RESULTS.md). The same values either way. On: measured on the H200
(2026-12-02, `bench/attention.py --quant --stages`, fill 512, int8-act form) 9.32 -> 8.90 us a launch
(Llama-3-8B's heads), 6.09 -> 5.76 (SmolLM2's), the combine's first reads 0.86-0.94 -> 0.61-0.67 us;
with `merge.RELEASE_COUNT` in Llama-3-8B's step (`bench/decode_step.py`, one call) 3072.6 -> 3055.8 us
a token (dequant), 2781.9 -> 2764.2 (int8-act)."""

PRE_WAIT = False
"""Whether the attention issues its first step's cache loads (the split's first K and V rows) before
it waits for the launches before it (`kernel.pdl_lines`, the kernel marked `kernel.LATE_WAIT`), then
reads `q`, `k`, `v` — the Q/K/V launch's results — after the wait. The cache rows and `pos` are written
two launches back or more (the last step's `kv_append`, the device loop's argmax), which have finished
once this launch's blocks run under `FWDSHIM_PDL=ahead`. The scores are the same (each row's dot alone).
Off: measured on the H200 (2026-12-01, `bench/decode_step.py --no-torch --steps 32`, fill 512, with
`gemv.PRE_WAIT_LOADS` and `merge.PRE_WAIT_PROLOGUE` on, us a token, off -> on, two runs of one machine)
it is within run-to-run noise: SmolLM2 dequant 514.3 -> 510.6, int8-act 584.2 -> 580.2; Llama-3-8B
int8-act 2780.9 -> 2778.9, dequant 3134.0 -> 3172.4 (that run's measured read ceiling was 1.6 %
lower). One attention launch of a step's 5-8 a layer saves at most its one DRAM round trip."""

MIN_BLOCKS = 0
"""The blocks an SM must hold at once by default (CUDA launch bounds: ptxas keeps a thread's
registers within them; 0 for none). Measured on the H200 (2026-12-01, `bench/attention.py --try`,
Llama-3-8B's heads, 544 blocks of 128 threads, fill 512): without bounds ptxas gives the kernel 116
registers (137 quantizing), 4 (3) blocks an SM, 528 (396) a wave; bounds of 4, 5, 6, 7 blocks an SM
took 8.60, 9.01, 9.14, 9.48 us against 8.94 without (quantizing: 9.11, 10.12, 9.16, 9.23 against
9.36), SmolLM2's heads 5.76 without and 5.81-6.95 with: the one-wave grid is not what the kernel
waits on (each block's chain of loads and its combine is), so none."""


@functools.cache
def attention(
    h: int, kv: int, hd: int, l: int, *, quant: str | None = None, store_y: bool | None = None,
    block: int | None = None, unroll: int | None = None, splits: int | None = None, min_blocks: int | None = None,
) -> Kernel:  # fmt: skip
    """The single-query GQA attention kernel (see the module docstring). `min_blocks`: the blocks an
    SM must hold at once (CUDA launch bounds: ptxas keeps the registers a thread within them; 0 for
    none), by default `MIN_BLOCKS`."""
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
        return f"p{u} = base + {u * per_pass} + mine\nok{u} = p{u} < r1".replace(" + 0 +", " +")

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
        """A position's softmax weight exp(s - m): stored over its score (the block's softmax), or
        computed where it is used (`WARP_SOFTMAX`: the scores stay as they are)."""
        return f"float32(math.exp(fsub_rn(sc[{idx}], m)))" if WARP_SOFTMAX else f"sc[{idx}]"

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
    reg = ns_max <= COMBINE_REGISTERS  # the combine's splits held in registers, their loads issued together

    def upto(t: int) -> str:
        return "True" if t == 0 else f"{t} < active"

    def slot_of(t: int) -> str:  # a split past `active` reads the last active one's (in range), unused
        return f"(slot0 + min({t}, active - 1))"

    early = reg and COMBINE_EARLY and hd <= block
    if reg:
        # `early`: each split's output for this thread's dim (a dim past the head reads the last one,
        # unused) loaded before the weights, one round trip with the splits' max and sum; the weights
        # then in shared memory. Otherwise every split's weight `w{t}` and output in registers.
        o_loads = "\n".join(f"o{t} = part_o[{slot_of(t)} * {hd} + {'dc' if early else 'dd'}]" for t in range(ns_max))
        weight = "sc[{t}]" if early else "w{t}"
        o_sums = "\n".join(
            guarded(None if t == 0 else upto(t), f"out = fadd_rn(out, fmul_rn({weight.format(t=t)}, o{t}))") for t in range(ns_max)
        )
        early_loads, loads_here = (o_loads, "") if early else ("", indent(o_loads, 1) + "\n")
        merged = f"""\
out = {zero}
if ok:
{loads_here}{indent(o_sums, 1)}
    out = fdiv_rn(out, total)
{finish}"""
    else:
        # COMBINE_BATCH splits' outputs loaded together (in range: a split past `active` reads the
        # last active one's, unused), then added in split order
        o_loads = "\n".join(f"o{t} = part_o[(slot0 + min(t0 + {t}, active - 1)) * {hd} + dd]" for t in range(COMBINE_BATCH))
        o_sums = "\n".join(
            guarded(None if t == 0 else f"t0 + {t} < active", f"out = fadd_rn(out, fmul_rn(sc[t0 + {t}], o{t}))")
            for t in range(COMBINE_BATCH)
        )
        merged = f"""\
out = {zero}
if ok:
    for t0 in range(0, active, {COMBINE_BATCH}):
{indent(o_loads, 2)}
{indent(o_sums, 2)}
    out = fdiv_rn(out, total)
{finish}"""
    if reg and not early:
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
    if early:
        # the splits' max and sum through shared memory (a thread a split), read back at constant
        # indices (their loads issued together), the same operations in the same order as above
        weights = "\n".join(
            [f"dc = min(tid, {hd - 1})", early_loads,
             f"for t in range(tid, active, {block}):", "    sc[t] = part_ml[2 * (slot0 + t)]",
             f"    sc[{ns_max} + t] = part_ml[2 * (slot0 + t) + 1]", "cuda.syncthreads()", "m = float32(-math.inf)"]
            + [guarded(None if t == 0 else upto(t), f"m = max(m, sc[{t}])") for t in range(ns_max)]
            + ["cuda.syncthreads()", f"for t in range(tid, active, {block}):", "    sc[t] = float32(math.exp(fsub_rn(sc[t], m)))",
               "cuda.syncthreads()", f"total = {zero}"]
            + [guarded(None if t == 0 else upto(t), f"total = fadd_rn(total, fmul_rn(sc[{t}], sc[{ns_max + t}]))") for t in range(ns_max)]
        )  # fmt: skip
    counted, acquired = count_done("flag", "count", "head", "tid", RELEASE_COUNT)
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
    if PRE_WAIT and _kernel.PDL != "off":  # the first step's cache rows before the wait, q after it
        head_loads = "\n".join([
            "base = r0", *v_prefetch, *score_loads, _kernel.LATE_WAIT, *_kernel.pdl_lines(), qload, *score_sums,
            f"for base in range(r0 + {per_block}, r1, {per_block}):", indent(chr(10).join(score_loads), 1),
            indent(chr(10).join(score_sums), 1),
        ])  # fmt: skip
    else:
        head_loads = "\n".join([
            qload, "base = r0", *v_prefetch, f"for base in range(r0, r1, {per_block}):",
            indent(chr(10).join(score_loads), 1), indent(chr(10).join(score_sums), 1),
        ])  # fmt: skip
    # on a GPU the block size bounds the registers (64 a thread at 1024 threads: the launch never fails
    # for want of them); the simulator's `cuda.jit` takes no launch bounds
    grid = h * ns_max
    min_blocks = MIN_BLOCKS if min_blocks is None else min_blocks
    if min_blocks < 0:
        raise ValueError(f"attention launch bounds of {min_blocks} blocks an SM")
    bounds = "" if simulating() else f", launch_bounds=({block}, {min_blocks})" if min_blocks > 1 else f", launch_bounds={block}"
    if WARP_SOFTMAX:  # each warp reduces the split's scores itself: no barrier, no exp stored
        softmax = f"""\
m = float32(-math.inf)
for p in range(lane, n, 32):
    m = max(m, sc[p])
m = warp_max(m)
total = {zero}
for p in range(lane, n, 32):
    total = fadd_rn(total, float32(math.exp(fsub_rn(sc[p], m))))
total = warp_sum(total)"""
    else:
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
    body = (release_import() if RELEASE_COUNT and ns_max > 1 else "") + f"""\
@cuda.jit(cache=True{bounds})
def attention_k({names}):
    sc = cuda.shared.array({ns}, float32)
    red0 = cuda.shared.array(32, float32)
    flag = cuda.shared.array(1, int32)
    tid = cuda.threadIdx.x
    lane = tid % 32
    warp = tid // 32
    seg = lane // {s}
    sl = lane % {s}
    mine = warp * {segs} + seg
    head = cuda.blockIdx.x % {h}
    sp = cuda.blockIdx.x // {h}
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
    return build(name, body, "attention_k", (grid,), (block,), params, notes)


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
