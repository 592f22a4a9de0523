"""Single-query GQA attention over a cache, the score row in static shared memory.

`attention(h, kv, hd, l, quant=None, store_y=None, block=) -> Kernel`, one CUDA block per query head:

params `q f32 [h*hd]`, `k f32 [kv*hd]`, `v f32 [kv*hd]` (the current position's own key and value),
`k_cache f32 [(l-1)*kv*hd]`, `v_cache f32 [(l-1)*kv*hd]` (the cache allocation, row-major
`[l-1, kv*hd]`), `pos int32 [1]` (c: how many cache rows are written, `0 <= c <= l-1`, read on the
device so one compiled kernel and one captured graph serve every step), then the outputs `y f32
[h*hd]` (unless `store_y=False`) and, with `quant` (`one_word`/`two_words`, needs `hd % 32 == 0`),
`yq`/`yd`(/`ys`) of the quantized `y` (`codegen.quantize`; the class `attn_output_quant`).

Query head `j` reads kv head `j // (h/kv)`; the keys are cache rows `0..c-1` then `k`; scores
`q·key / √hd` into `sc[l]` (shared), softmax over the `c+1` positions, `y = Σ p v`. Static shared
memory is `sc[l]` plus one 32-float reduction row: `4*l + 128` bytes, within the 48 KiB every
architecture grants (the seed's bound; `l <= 12256`). Scores: each warp takes positions, its lanes
split the head's dims; output: one thread per dim.
"""

from __future__ import annotations

import functools
import math

from fwdshim.codegen.compile import Kernel, Param, block_reduce, build, check_block, f32, indent
from fwdshim.codegen.quantize import check_format, epilogue, qact_params

STATIC_SHARED_BYTES = 48 * 1024


@functools.cache
def attention(
    h: int, kv: int, hd: int, l: int, *, quant: str | None = None, store_y: bool | None = None,
    block: int = 128,
) -> Kernel:  # fmt: skip
    """The single-query GQA attention kernel (see the module docstring)."""
    check_block(block)
    if min(h, kv, hd) <= 0 or l < 1 or h % kv:
        raise ValueError(f"attention of {h} query heads over {kv} kv heads of {hd}, l = {l}")
    if 4 * l + 4 * 32 > STATIC_SHARED_BYTES:
        raise ValueError(f"attention score row of l = {l} exceeds the 48 KiB of static shared memory")
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
    nj = -(-hd // 32)
    qload = "\n".join(
        f"q{j} = q[qo + lane + {32 * j}]" + ("" if 32 * (j + 1) <= hd else f" if lane + {32 * j} < {hd} else float32(0.0)")
        for j in range(nj)
    )

    def dot(src: str, base: str) -> str:
        terms = []
        for j in range(nj):
            t = f"q{j} * {src}[{base} + lane + {32 * j}]"
            if 32 * (j + 1) > hd:
                t = f"({t} if lane + {32 * j} < {hd} else float32(0.0))"
            terms.append(t)
        return " + ".join(terms)

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
out = float32(0.0)
if ok:
    vo = kvh * {hd} + dd
    p = 0
    while p + 4 <= c:
        out += sc[p] * v_cache[p * {row} + vo] + sc[p + 1] * v_cache[(p + 1) * {row} + vo] + sc[p + 2] * v_cache[(p + 2) * {row} + vo] + sc[p + 3] * v_cache[(p + 3) * {row} + vo]
        p += 4
    while p < c:
        out += sc[p] * v_cache[p * {row} + vo]
        p += 1
    out += sc[c] * v[vo]
    out = fdiv_rn(out, total)
{finish}"""
    body = f"""\
@cuda.jit(cache=True)
def attention_k({names}):
    sc = cuda.shared.array({l}, float32)
    red0 = cuda.shared.array(32, float32)
    tid = cuda.threadIdx.x
    lane = tid % 32
    warp = tid // 32
    head = cuda.blockIdx.x
    kvh = head // {g}
    qo = head * {hd}
    ko = kvh * {hd}
    c = min(max(pos[0], 0), {l - 1})
{indent(qload, 1)}
    for p in range(warp, c + 1, {warps}):
        if p < c:
            s = {dot("k_cache", f"p * {row} + ko")}
        else:
            s = {dot("k", "ko")}
        s = warp_sum(s)
        if lane == 0:
            sc[p] = fmul_rn(s, {f32(1.0 / math.sqrt(hd))})
    cuda.syncthreads()
    m = float32(-math.inf)
    for p in range(tid, c + 1, {block}):
        m = max(m, sc[p])
{indent(block_reduce("m", "max", "red0", warps), 1)}
    cuda.syncthreads()
    total = float32(0.0)
    for p in range(tid, c + 1, {block}):
        e = float32(math.exp(fsub_rn(sc[p], m)))
        sc[p] = e
        total = fadd_rn(total, e)
{indent(block_reduce("total", "sum", "red0", warps), 1)}
    cuda.syncthreads()
{indent(loop, 1)}
{indent(outer, 1 + body_indent)}
"""
    tag = f"_{quant}" if quant else ""
    name = f"attention{tag}_h{h}kv{kv}d{hd}_l{l}"
    notes = f"single-query GQA attention, {h} heads over {kv} kv heads of {hd}, l = {l}"
    return build(name, body, "attention_k", (h,), (block,), params, notes)
