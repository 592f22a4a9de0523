"""Matrix-vector products: one coalesced GEMV family for every weight type the step reads (Q8_0, the
affine GGML types Q4_0 ... Q6_K, and F32/F16/BF16 rows of whole blocks of 32), dequantizing in-kernel
or (the block types) over int8 activations, and a one-warp dense GEMV for F32/F16/BF16 rows of other
lengths. `y[m, n] = Σ_k W[n, k] x[m, k]` for `m < M` rows of x (a decode step: M = 1).

`gemv_blocks(n, k, m, act, shape, ..., weights=)` writes the family's kernel; a weight type enters
only through its block decoder (`codegen.gemv_decode`: the loads of one 16-byte piece of quants and
its scales, and their dot with the piece's activations). Everything below (launch shapes, unrolled
steps, early loads before the wait, split rows, stores, the rope/pair/quantize/elementwise
epilogues) is the family's, shared by every type; `blocks(weights, n, k, act=)` takes the default
shape (`block_shape`). The affine types' weights are `ggml_blocks.repack`'s layout, a piece one
32-value chunk (`gemv_decode.AffineDecoder`); F32/F16/BF16 rows are read as stored, a piece 16
bytes of values (`gemv_decode.DenseDecoder`, param `wv`); Q8_0's below.

Q8_0 weights are read in the aligned layout of `fwdshim.weights.repack_q8_0`: `qs int8 [N*K]` (row
n's quants at `n*K`) and `dw float32 [N*K/32]` (one scale per block of 32), K a multiple of 32.

- `q8_0(n, k, m=1, shape=)`: y = W · x with x float32. Params `qs`, `dw`, `x f32 [M*K]`, `y f32 [M*N]`.
  The quants are unpacked to exact floats by `s8x4_f32` (`u8x4_f32` for the affine types), dotted with x in float32, times the scale.
- `q8_0_int8(n, k, m=1, shape=)`: the int8-activation GEMV: `y[n] = Σ dw[n,b] · xd[b] · (Σ qs xq)`
  over pieces of a block, the piece sums in int32 (`dp4a`), float32 accumulation. Params `qs`, `dw`,
  `xq int8 [M*K]`, `xd f32 [M*K/32]` (the `q`, `d` of a quantized activation, either format), `y`.
- `dense(n, k, m=1, dtype=)`: W `float32`, `float16` or `bfloat16` (given as `uint16` bits) `[N*K]`,
  any K, one warp a row (the lowering's choice only where K is not a multiple of 32). Params `w`,
  `x f32 [M*K]`, `y f32 [M*N]`.

Launch shape (`Shape(vec, rows, warps, unroll, split, blocks, prefetch)`, default `launch_shape`,
the fastest measured on an H200 by `bench/gemv.py --sweep`): `warps` warps per block in groups of
`split` warps; each group computes `rows` rows of W (grid `(ceil(N / (warps / split * rows)), M)`).
A row is cut into pieces dealt to the group's `32 * split` threads in turn (the last step may run
on the first threads only), `unroll` steps' loads issued before they are used:

- `vec` 16 or 4: a piece is 16 (or 4) bytes of quants (`ld_i32x4` / `ld_i32`), so a warp reads
  `32 * vec` contiguous bytes a load, and the piece's scale and activations (16 values: four 16-byte
  loads of f32 x, or 16 bytes of xq and a scale);
- `vec` 32: a piece is a whole block of 32 (two 16-byte loads at a 32-byte stride across lanes, the
  kernel before issue 12, kept where it measured faster: two int8-activation shapes);
- `blocks`: a grid of that many blocks looping over the row groups (0: one block each);
- `prefetch`: thread 0 of a block first asks the copy engine for the block's rows, quants and scales,
  into L2 (`prefetch_l2`), and in a looping grid for its next rows too;
- `stages` (vec 16): the quants and scales go through an async-copy pipeline that deep: each thread
  copies its own pieces into its own slots of shared memory (`cp_async16`, `cp_async4`, `stages - 1`
  steps ahead) and waits for its own oldest copies (`cp_async_wait`), so the bytes in flight are not
  held in registers; the adds are those of the same shape without it (`unroll` 1). Shared memory:
  `pipeline_bytes` (20 bytes a thread, row and stage; a merged launch's parts share one allocation).
- short rows (at most `Tuning.pre_wait_loads` steps, no pipeline, one block a row group): every weight load
  is issued before the kernel waits for the launches before it (programmatic dependent launch), the
  activations read after it.

With `split > 1` the warps' parts of a row are summed through shared memory in warp order. The
order of the float adds depends on the launch shape only (the same bits every run). 16-byte loads
need `qs`, `x` and `xq` on 16-byte aligned allocations (every device allocation is).

The shared pieces (spec, launch shape, row stores and epilogues) are `codegen.gemv_rows`; the
whole-block-lane kernel (`vec` 32) and `q8_dots` (its row dots, and the MoE kernels'), `codegen.gemv_lanes`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from fwdshim.codegen.device import simulating
from fwdshim.codegen.gemv_decode import DENSE_TYPES, Decoder, decoder
from fwdshim.codegen.gemv_lanes import _check_q8, _q8_kernel
from fwdshim.codegen.gemv_rows import (  # noqa: F401 - GemvSpec, Pair, Shape: the GEMV's own
    GemvSpec,
    Pair,
    Shape,
    _act_params,
    _dedent1,
    _pair_of_rows,
    _pair_rows,
    _q8_params,
    _row_stores,
    _with_pair_params,
    _with_rope_params,
    _written_out,
    binary_params,
    store,
)
from fwdshim.codegen.kernel import Kernel, Param, as_index, build, factory
from fwdshim.codegen.source import SharedArray, check_block, count_done, indent, late_wait, release_import
from fwdshim.codegen.tuning import DEFAULT, Tuning
from fwdshim.limits import STATIC_SHARED_BYTES


def _suffix(r: int, two: bool) -> str:
    """The suffix of a group's row `r`'s weight arrays: with `two` (a pair epilogue, `gemv_blocks`'
    `pair`) the odd rows' are the second matrix's, `qs2`, ...; else none."""
    return "2" if two and r % 2 else ""


def _step_parts(dec: Decoder, rows: int, us: list[str], two: bool = False, act: str = "f32", tag: str = "") -> tuple[list[str], list[str]]:
    """One (unrolled) step as (its weight loads, the rest): for each piece index `us[u]`, every row's
    weight loads (`Decoder.loads`); then the activation loads and the dot products into `acc{r}`.
    `tag` tells the registers of steps held at once apart (`_coalesced_step`'s with none)."""
    loads: list[str] = []
    for u, c in enumerate(us):
        for r in range(rows):
            loads += dec.loads(r, f"q{r}_{tag}{u}", f"s{r}_{tag}{u}", c, _suffix(r, two))
    rest: list[str] = []
    for u, c in enumerate(us):
        rest += dec.act_loads(u, c, act)
    for u in range(len(us)):
        for r in range(rows):
            rest += dec.dot(r, f"q{r}_{tag}{u}", f"s{r}_{tag}{u}", u, act)
    return loads, rest


def _coalesced_step(dec: Decoder, rows: int, us: list[str], act: str, two: bool = False) -> str:
    """The statements of one (unrolled) step: for each piece index `us[u]`, every row's weight loads,
    then the activation loads, then the dot products into `acc{r}`."""
    loads, rest = _step_parts(dec, rows, us, two, act)
    return "\n".join(loads + rest)


def pipeline_bytes(shape: Shape) -> int:
    """The shared memory of `shape`'s async-copy pipeline a block: each thread's 16-byte piece and
    4-byte scale per row per stage."""
    return shape.stages * shape.rows * 32 * shape.warps * 20


def _hoists(shape: Shape, steps: int, tuning: Tuning) -> bool:
    """Whether a GEMV of 4- or 16-byte pieces of `shape` with `steps` full steps a warp group loads its
    weights before its wait (`Tuning.pre_wait_loads`)."""
    loads = tuning.pre_wait_loads
    return 0 < loads and tuning.pdl != "off" and not shape.stages and not shape.blocks and steps <= loads


def _pipelined(rows: int, steps: int, stages: int, width: int, threads: int, act: str, after_prologue: Sequence[str] = (),
               two: bool = False) -> str:  # fmt: skip
    """The full steps of a coalesced GEMV (16-byte pieces) through an async-copy pipeline: each
    thread copies its own pieces' quants and scales into its own shared-memory slots
    (`cp_async16`, `cp_async4`), `stages - 1` steps ahead of the step it computes, and waits for
    its own oldest copies only (`cp_async_wait`): no barrier, and the bytes in flight are not held in
    registers. The adds are those of the same launch shape without the pipeline and `unroll` 1."""

    def slot(i: int, r: int) -> str:
        return f"({(i * rows + r) * threads} + tid)"

    def issue(t: str, i: int) -> list[str]:
        out = [f"ca = ({t}) * {width} + kl"]
        for r in range(rows):
            sfx = _suffix(r, two)
            out.append(f"cp_async16(sq, {slot(i, r)} * 4, qs{sfx}, w{r} + ca * 16)")
            out.append(f"cp_async4(sd, {slot(i, r)}, dw{sfx}, d{r} + (ca >> 1))")
        return out

    lines: list[str] = []
    for t in range(stages - 1):  # stages - 1 groups, empty past the last step: then at each step the
        if t < steps:  # `stages - 1` groups committed after its own are what `cp_async_wait` may leave
            lines += issue(str(t), t)
        lines.append("cp_async_commit()")
    lines += after_prologue  # e.g. the wait for earlier launches: only the activation reads need it
    lines.append(f"for t0 in range(0, {steps}, {stages}):")
    for i in range(stages):
        body: list[str] = []
        nxt = (i + stages - 1) % stages
        body.append(f"if t0 + {i + stages - 1} < {steps}:")
        body += ["    " + ln for ln in issue(f"t0 + {i + stages - 1}", nxt)]
        body.append("cp_async_commit()")
        body.append(f"cp_async_wait({stages - 1})")
        for r in range(rows):
            body.append(f"q{r}_0_0, q{r}_0_1, q{r}_0_2, q{r}_0_3 = lda_i32x4(sq, {slot(i, r)} * 4)")
            body.append(f"s{r}_0 = sd[{slot(i, r)}]")
        body.append(f"c0 = (t0 + {i}) * {width} + kl")
        dec = decoder("q8_0", 16)
        body += dec.act_loads(0, "c0", act)
        for r in range(rows):
            body += dec.dot(r, f"q{r}_0", f"s{r}_0", 0, act)
        if steps % stages and i >= steps % stages:
            lines.append(f"    if t0 + {i} < {steps}:")
            lines += ["        " + ln for ln in body]
        else:
            lines += ["    " + ln for ln in body]
    return "\n".join(lines)


def _prefetch(block: str, n: int, k: int, rows: int, per_block: int) -> str:
    """Statements by which one thread asks for the quants and scales of the rows of block-row-group
    `block` (an expression) into L2 (`prefetch_l2`): quants are whole rows (K a multiple of 32, so
    16-byte aligned); scale bytes are rounded out to 16 within the array's first 16-byte multiple."""
    nb = k // 32
    total16 = (n * nb * 4) // 16 * 16
    return f"""\
if $tx == 0 and {block} < {-(-n // per_block)}:
    pr0 = ({block}) * {per_block}
    prn = min({per_block}, {n} - pr0)
    prefetch_l2(qs, pr0 * {k}, prn * {k})
    pb0 = (pr0 * {nb * 4}) // 16 * 16
    pb1 = min((((pr0 + prn) * {nb * 4}) + 15) // 16 * 16, {total16})
    if pb1 > pb0:
        prefetch_l2(dw, pb0 // 4, pb1 - pb0)"""


def _plain(s: object) -> GemvSpec | None:
    """`s` when it is the spec of a coalesced GEMV of `gemv_blocks` (any weight type) carrying no epilogue, over one row of x,
    one block a row group, no prefetch and an even number of rows a group (what takes an epilogue);
    else None."""
    if not isinstance(s, GemvSpec) or s.shape is None or s.rope or s.pair or s.binary or s.experts:
        return None
    if s.shape.blocks or s.shape.prefetch or s.shape.rows % 2 or s.m != 1:
        return None
    return s


def rope_variant(kern: Kernel, hd: int, half: int, tuning: Tuning) -> Kernel | None:
    """GEMV `kern` (built by `gemv_q8`) with the rope of its output as its epilogue (`gemv_q8`'s
    `rope`), or None where that cannot be: another kernel, a looping grid or prefetch, an odd
    number of rows a group, more than one row of x, or a rope that is not over whole `hd`-wide heads
    of `2 * half` turned dims. A GEMV carrying an elementwise epilogue (`binary_variant`: a bias
    added to q or k) keeps it, and the rope turns that epilogue's result."""
    spec = kern.spec
    binary = spec.binary if isinstance(spec, GemvSpec) else None
    s = _plain(replace(spec, binary=None) if binary else spec)
    if s is None or hd != 2 * half or s.n % hd:
        return None
    return gemv_blocks(s.n, s.k, s.m, s.act, s.shape, rope=(hd, half), binary=binary, weights=s.weights, tuning=tuning)


def pair_variant(kern: Kernel, pair: Pair, tuning: Tuning) -> Kernel | None:
    """GEMV `kern` (built by `gemv_q8`) taking a second matrix of its shape, the same launch shape,
    its rows paired with the first's and `pair` as the epilogue (`gemv_q8`'s `pair`), or None where
    that cannot be: another kernel, a looping grid or prefetch, an odd number of rows a group, more
    than one row of x; with `pair.quant`, an epilogue of more than one result or a group's pairs
    not dividing 32."""
    return _paired(_plain(kern.spec), pair, tuning)


def _paired(s: GemvSpec | None, pair: Pair, tuning: Tuning) -> Kernel | None:
    if s is None or (pair.quant and (len(pair.values) != 1 or 32 % (s.shape.rows // 2))):
        return None
    return gemv_blocks(s.n, s.k, s.m, s.act, s.shape, pair=pair, weights=s.weights, tuning=tuning)


def takes_binary(s: object) -> bool:
    """Whether `s` is the spec of a GEMV that takes an elementwise epilogue (`binary_variant`): one
    carrying no epilogue yet, its last parameter `y` (a mixture's down-and-combine: `out`)."""
    return isinstance(s, GemvSpec) and not (s.rope or s.pair or s.binary) and (not s.experts or s.combine)


def binary_variant(kern: Kernel, kind: str, y_first: bool, tuning: Tuning) -> Kernel | None:
    """GEMV `kern` (`gemv_blocks`, `dense`) with the elementwise epilogue `ep_out = y
    kind ep_in` (`y_first`; else `ep_in kind y`) after each store of `y` (`gemv_rows.store`:
    parameters `ep_in`, `ep_out` after `y`), or None where that cannot be: another kernel, or one
    carrying an epilogue already."""
    s = kern.spec
    if not takes_binary(s):
        return None
    binary = (kind, y_first)
    if s.weights in _LOAD:
        return dense(s.n, s.k, s.m, dtype=s.weights, warps=s.warps, binary=binary, tuning=tuning)
    return gemv_blocks(s.n, s.k, s.m, s.act, s.shape, binary=binary, weights=s.weights, experts=s.experts,
                       combine=s.combine, tuning=tuning)  # fmt: skip


def quant_variant(kern: Kernel, fmt: str, tuning: Tuning) -> Kernel | None:
    """Pair variant `kern` (`pair_variant`) whose epilogue's result is also quantized in format `fmt`
    (`Pair.quant`), or None where that cannot be (`pair_variant`; `kern` not a pair variant)."""
    s = kern.spec
    if not isinstance(s, GemvSpec) or s.pair is None or s.pair.quant or s.binary or s.shape is None:
        return None
    return _paired(_plain(replace(s, pair=None)), replace(s.pair, quant=fmt), tuning)


def gemv_q8(n: int, k: int, m: int, act: str, shape: Shape, rope: tuple[int, int] | None = None,
            pair: Pair | None = None, binary: tuple[str, bool] | None = None, *, tuning: Tuning = DEFAULT) -> Kernel:  # fmt: skip
    """`gemv_blocks` over Q8_0 weights."""
    return gemv_blocks(n, k, m, act, shape, rope, pair, binary, weights="q8_0", tuning=tuning)


def _combine_lines(n: int, top_k: int, per_block: int, binary: tuple[str, bool] | None) -> list[str]:
    """`gemv_blocks`' `combine`, after the block's stores: the block counts itself done in
    `ccount[$bx]` (`source.count_done`: one acquire-release atomic, the merged launches' tails'
    pattern), and the last of the row block's `top_k` sums the row block's `y` rows by `wts`, in
    `idx`'s order, into `out` (then `binary`'s epilogue, `gemv_rows.store`; see `gemv_blocks`)."""
    counted, acquired = count_done("_cf", "ccount", "$bx", "$tx")
    terms = [f"    cv = fadd_rn(cv, fmul_rn(wts[{i}], y[{i * n} + cj]))" for i in range(top_k)]
    return [
        *counted.splitlines(),
        "cuda.syncthreads()",
        f"if _cf[0] == {top_k - 1}:",
        *("    " + ln for ln in acquired.splitlines()),
        f"    if $tx < {per_block}:",
        f"        cj = $bx * {per_block} + $tx",
        "        cv = float32(0.0)",
        *("    " + t for t in terms),
        *("        " + ln for ln in store("out", "cj", "cv", binary).splitlines()),
        "    if $tx == 0:",
        "        ccount[$bx] = 0",
    ]


def gemv_blocks(n: int, k: int, m: int, act: str, shape: Shape, rope: tuple[int, int] | None = None,
                pair: Pair | None = None, binary: tuple[str, bool] | None = None, *, weights: str = "q8_0",
                experts: tuple[int, int] | None = None, combine: bool = False, tuning: Tuning = DEFAULT) -> Kernel:  # fmt: skip
    """The coalesced GEMV over block-quantized `weights` (`gemv_decode.BLOCK_TYPES`: Q8_0 and the
    affine GGML types, each through its `gemv_decode.Decoder`; `act` f32: dequantizing; int8: int8
    activations) with launch shape `shape` (see the module docstring). Q8_0 takes every shape; the
    affine types 16-byte pieces (a 32-value chunk each) with neither a looping grid, a prefetch nor an
    async-copy pipeline.

    `rope=(hd, half)`: a group's rows are pairs `(i, i + half)` of `hd`-wide heads (its `rows / 2`
    consecutive pairs; `y` the same bits, each row's adds in the same order), and after storing them
    the group's lane 0 stores their rope (`codegen.rope`, the step's angles: parameters `angles f32
    [2 * half]`, `z f32 [n]` after `y`). Needs an even `rows`, `hd == 2 * half`, `n % hd == 0`, M 1,
    one block a row group (`rope_variant`).

    `pair` (a `Pair`): the GEMV of two N x K matrices over one x (parameters `qs2`, `dw2` after `dw`;
    `y2` and the epilogue's results `z0`, ... after `y`): a group's rows are pairs, row i of the
    first matrix and row i of the second (its `rows / 2` consecutive pairs; the grid covers 2N rows),
    `y` and `y2` each the same bits as that matrix's GEMV alone, and after storing them the group's
    lane 0 runs the epilogue on the pair (gate and up with silu·mul: the gate/up launch keeps no
    tail). Needs an even `rows`, M 1 (with `experts`, 1 or top_k), one block a row group (`pair_variant`).

    `binary` (`(kind, y_first)`): after each store of `y`, the elementwise epilogue `ep_out = y kind
    ep_in` (`gemv_rows.store`; parameters `ep_in`, `ep_out` after `y`), without `pair`
    (`binary_variant`); with `rope` too, the rope turns `ep_out` (a bias added to q or k, then its
    rope: Qwen2's), its parameters after the epilogue's.

    `experts` (`(e, top_k)`, a mixture's expert GEMVs): the weight arrays are a stack of `e` N x K
    matrices (`[e, n, k]` in the type's layout; with `pair` two stacks), and the launch computes the
    `top_k` chosen by the router (parameter `idx int32 [top_k]` after the activation's): grid row `m`
    reads matrix `idx[m]` and stores `y[m, :]` (`y f32 [top_k, n]`; a pair's `y2`, `z0`, ... too),
    over x row `m` (`m == top_k`: `x [top_k, k]`) or the one row of x (`m == 1`); an index outside
    `0 .. e - 1` reads the nearest matrix (clamped: no read outside the stack). Without `rope` or
    `binary` (but for `binary` on `combine`'s `out`), with 4- or 16-byte pieces and one block a row
    group (no whole-block lanes, looping grid, prefetch or async-copy pipeline); ValueError otherwise,
    TypeError for a size that is no integer. Its weight loads wait with the rest (`pdl_wait()` first): which
    rows it reads comes from the router's launch before it (`Tuning.pre_wait_loads` hoists none).

    `combine` (with `experts`, without `pair`): the mixture's output too, `out[j] = Σ_i wts[i] ·
    y[i, j]` summed in the order of `idx` from 0 (each product and sum rounded on its own; parameters
    `wts f32 [top_k]`, `ccount int32 [row blocks]`, `out f32 [n]` after `y`): the last of a row
    block's `top_k` blocks to store its rows (counted in `ccount`, which it resets to 0) sums them,
    one thread a row; with `binary`, its elementwise epilogue follows each store of `out`, not of
    `y` (`ep_in`, `ep_out` after `out`). Needs N a multiple of a block's rows (no block returns early)."""
    vec, rows, warps, unroll, split = shape.vec, shape.rows, shape.warps, shape.unroll, shape.split
    if binary is not None and pair is not None:
        raise ValueError("an elementwise epilogue and a pair epilogue on one GEMV")
    n, k, m = (as_index(v, f"the GEMV's {name}") for v, name in ((n, "n"), (k, "k"), (m, "m")))
    if experts is not None:
        if not isinstance(experts, tuple) or len(experts) != 2:
            raise TypeError(f"`experts` is (e, top_k), got {experts!r}")
        e, top_k = experts = (as_index(experts[0], "the GEMV's experts' e"), as_index(experts[1], "the GEMV's experts' top_k"))
        why = ("no expert" if min(e, top_k) < 1 else "top_k > e" if top_k > e
               else f"x of {m} rows, not 1 or top_k" if m not in (1, top_k)
               else "a rope epilogue" if rope else "an elementwise epilogue without `combine`" if binary and not combine
               else "a quantized pair epilogue" if pair and pair.quant
               else "whole-block lanes (vec 32)" if vec == 32
               else "a looping grid, a prefetch or an async-copy pipeline" if shape.blocks or shape.prefetch or shape.stages
               else "")  # fmt: skip
        if why:
            raise ValueError(f"the GEMV of the top {top_k} of {e} experts at {shape.tag}: {why}")
        if combine and (pair or n % ((warps // split) * rows)):
            raise ValueError(f"the weighted sum of {top_k} experts' rows of {n} values over blocks of {(warps // split) * rows} rows"
                             + (" with a pair epilogue" if pair else ""))  # fmt: skip
    elif combine:
        raise ValueError("a weighted sum of experts' rows (`combine`) without `experts`")
    if not isinstance(combine, bool):
        raise TypeError(f"`combine` is True or False, got {combine!r}")
    spec = GemvSpec(weights, n, k, m, act, shape, rope, pair, binary=binary, experts=experts, combine=combine)
    if rope is not None:
        hd, half = rope
        if shape.blocks or shape.prefetch or rows % 2 or m != 1 or hd != 2 * half or n % hd or pair is not None:
            raise ValueError(f"a rope epilogue of heads of {hd} ({half} pairs) on the GEMV {m}x{n}x{k} {shape.tag}")
    if pair is not None and (shape.blocks or shape.prefetch or rows % 2 or (m != 1 and experts is None)):
        raise ValueError(f"a pair epilogue ({pair.what}) on the GEMV {m}x{n}x{k} {shape.tag}")
    if vec == 32 and weights == "q8_0":
        if shape.blocks or shape.prefetch:
            raise ValueError("whole-block lanes (vec 32) take neither a looping grid nor a prefetch")
        return _q8_kernel(n, k, m, rows, warps, unroll, split, act, rope, pair, tuning, spec, binary)
    _check_q8(n, k, m, rows, warps, unroll, split, weights)
    if vec not in (4, 16) and weights == "q8_0":
        raise ValueError(f"{vec}-byte pieces (4, 16, or 32: a whole block)")
    dec = decoder(weights, vec)
    if act not in ("f32", "int8"):
        raise ValueError(f"a {weights.upper()} GEMV over `{act}` activations")
    if weights != "q8_0" and (shape.blocks or shape.prefetch or shape.stages):
        raise ValueError(f"a {weights.upper()} GEMV takes neither a looping grid, a prefetch nor an async-copy pipeline: {shape.tag}")
    if k % dec.block:
        raise ValueError(f"{weights.upper()} rows of {k} values are not whole blocks of {dec.block}")
    nb = k // 32
    groups = warps // split
    per_block = groups * rows
    width = 32 * split
    two = pair is not None
    nv = 2 * n if two else n  # a group's rows: both matrices' under a pair epilogue
    steps, tail = divmod(k // dec.values, width)
    main = steps - steps % unroll
    lines = [f"acc{r} = float32(0.0)" for r in range(rows)]
    early: list[str] = []  # the weight loads before the wait (`Tuning.pre_wait_loads`)
    if _hoists(shape, steps, tuning) and experts is None:  # an expert's rows come from `idx`: read after the wait
        early, rest = _written_out(lambda us, tag: _step_parts(dec, rows, us, two, act, tag), steps, tail, width, "kl", "c")
        lines += rest
        early += late_wait(tuning.pdl)
        steps = main = tail = 0
    if shape.stages:
        if vec != 16 or shape.blocks or shape.prefetch or unroll != 1 or not steps or shape.stages < 2:
            raise ValueError(f"an async-copy pipeline of {shape.stages} stages (16-byte pieces, unroll 1, one block a row group, at least one full step, 2 stages or more): {shape.tag}")
        if pipeline_bytes(shape) + 4 * warps * rows > STATIC_SHARED_BYTES:
            raise ValueError(f"an async-copy pipeline of {pipeline_bytes(shape)} bytes of shared memory a block: {shape.tag}")
        late = late_wait(tuning.pdl) if tuning.pre_wait and tuning.pdl != "off" else []
        lines.append(_pipelined(rows, steps, shape.stages, width, 32 * warps, act, late, two))
        main = steps
    elif main:
        lines.append(f"for st in range(0, {main * width}, {unroll * width}):")
        lines += [f"    c{u} = st + {u * width} + kl" for u in range(unroll)]
        lines.append(indent(_coalesced_step(dec, rows, [f"c{u}" for u in range(unroll)], act, two), 1))
    if steps > main:
        lines += [f"c{u} = {(main + u) * width} + kl" for u in range(steps - main)]
        lines.append(_coalesced_step(dec, rows, [f"c{u}" for u in range(steps - main)], act, two))
    if tail:
        lines.append(f"if kl < {tail}:")
        lines.append(f"    c0 = {steps * width} + kl")
        lines.append(indent(_coalesced_step(dec, rows, ["c0"], act, two), 1))
    lines += [f"acc{r} = warp_sum(acc{r})" for r in range(rows)]
    whole = nv % per_block == 0 and not (shape.blocks and shape.blocks < -(-nv // per_block))
    block_quant = tuning.pair_quant_block and whole and not shape.blocks and pair is not None and 32 % (per_block // 2) == 0
    shared, guard, stores = _row_stores(nv, rows, warps, split, rope, pair, block_quant, None if combine else binary, experts is not None)
    if whole:
        guard = ""  # no group of the grid starts past the rows: the kernel never returns early
    ex = f"ex * {n} + " if experts else ""  # the chosen expert's matrix of the stack
    if rope is not None:  # pair q of the group: rows (i, i + half) of head h, pair index row0 / 2 + q
        pick = _pair_rows(n, rows, *rope) + "\n" + "\n".join(dec.row_base(r, f"rr{r}", k) for r in range(rows))
    elif two:  # pair q of the group: row i of both matrices, i = row0 / 2 + q
        pick = _pair_of_rows(n, rows) + "\n" + "\n".join(dec.row_base(r, f"({ex}rr{r})" if ex else f"rr{r}", k) for r in range(rows))
    else:
        pick = "\n".join(dec.row_base(r, f"({ex}min(row0 + {r}, {n - 1}))" if ex else f"min(row0 + {r}, {n - 1})", k) for r in range(rows))
    work = pick + "\n" + "\n".join(early + lines) + "\n" + _dedent1(stores)
    if combine:
        shared.append(SharedArray("_cf", 1, "int32"))
        work += "\n" + "\n".join(_combine_lines(n, experts[1], per_block, binary))
    n_blocks = -(-nv // per_block)
    xs = ("x" if act == "f32" else "xq, xd") + (", idx" if experts else "")
    ys_out = ", wts, ccount, out" if combine else ""
    if shape.stages:
        slots = shape.stages * rows * 32 * warps
        shared += [SharedArray("sq", 4 * slots, "int32", not simulating()), SharedArray("sd", slots, "float32")]
    ws = ", ".join(a for a, _, _ in dec.arrays(1, 256))
    if rope is not None:
        sig = f"{ws}, {xs}, y" + (", ep_in, ep_out" if binary else "") + ", angles, z"
    elif two:
        sig = f"{ws}, {', '.join(a + '2' for a, _, _ in dec.arrays(1, 256))}, {xs}, y, y2, {pair.outputs()}"
    else:
        sig = f"{ws}, {xs}, y" + ys_out + (", ep_in, ep_out" if binary else "")
    head = f"""\
@cuda.jit(cache=True)
def gemv_k({sig}):
{"".join(a.decl for a in shared)}{"    tid = $tx" + chr(10) if shape.stages else ""}    lane = $tx % 32
    warp = $tx // 32
    grp = warp // {split}
    j = warp % {split}
    kl = j * 32 + lane
    m = $by
{f"    ex = min(max(int64(idx[m]), 0), {experts[0] - 1})" + chr(10) if experts else ""}    xo = {"0" if experts and m == 1 else f"m * {k}"}
    xdo = {"0" if experts and m == 1 else f"m * {nb}"}
"""
    if not shape.blocks or shape.blocks >= n_blocks:
        pf = _prefetch("$bx", n, k, rows, per_block) if shape.prefetch else ""
        body = head + indent(pf, 1) + f"\n    row0 = ($bx * {groups} + grp) * {rows}\n" + guard + indent(work, 1) + "\n"
        grid = (n_blocks, experts[1] if experts else m)
    else:
        pf = _prefetch("$bx", n, k, rows, per_block) if shape.prefetch else ""
        pf_next = _prefetch("rb + cuda.gridDim.x", n, k, rows, per_block) if shape.prefetch else ""
        if split == 1:
            work = f"if row0 < {n}:\n" + indent(work, 1)
        else:
            work += "\ncuda.syncthreads()"
        body = (
            head + indent(pf, 1) + f"\n    for rb in range($bx, {n_blocks}, cuda.gridDim.x):\n"
            + indent(pf_next, 2) + f"\n        row0 = (rb * {groups} + grp) * {rows}\n" + indent(work, 2) + "\n"
        )
        grid = (shape.blocks, m)
    ys = experts[1] if experts else m  # rows of y
    stack = experts[0] if experts else 1  # matrices a weight array holds
    chosen = [Param("idx", "int32", ys, "in", "chosen experts (router)")] if experts else []
    params = dec.params(stack * n, k) + _act_params(k, m, act) + chosen + [Param("y", "float32", ys * n, "out", f"[{ys}, {n}]")]
    tag = weights if act == "f32" else f"{weights}_int8"
    what = "dequantizing in-kernel" if act == "f32" else "int8 activations"
    name = f"gemv_{tag}_{m}x{n}x{k}_{shape.tag}" + (f"_x{experts[0]}k{experts[1]}" if experts else "")
    notes = f"{weights.upper()} GEMV {n}x{k} ({what}) over {m} row{'s' if m != 1 else ''}"
    if experts:
        notes += f", the top {experts[1]} of a stack of {experts[0]} experts"
    if combine:
        params += [Param("wts", "float32", experts[1], "in", "the chosen experts' weights (router)"),
                   Param("ccount", "int32", n_blocks, "inout", "blocks stored a row block (0 between launches)"),
                   Param("out", "float32", n, "out", f"Σ_i wts[i] y[i] [{n}]")]  # fmt: skip
        name, notes = name + "_c", notes + ", summed by their weights"
    if binary:  # before a rope's: the rope turns the epilogue's result (a bias added to q or k)
        params, name, notes = binary_params(params, name, notes, binary)
    if rope is not None:
        params, name, notes = _with_rope_params(params, name, notes, n, *rope)
    elif two:
        params, name, notes = _with_pair_params(params, name, notes, n, k, pair, dec.params(stack * n, k, "2"), ys)
    if combine:
        body = release_import() + body
    return build(name, body, "gemv_k", grid, (32 * warps,), params, notes, pdl=tuning.pdl, spec=spec, shared=shared)


def launch_shape(n: int, k: int, act: str, tuning: Tuning = DEFAULT) -> Shape:
    """The default launch shape of the Q8_0 GEMV of N x K under `act` (f32, int8), by shape class: the
    fastest of `bench/gemv.py` and `bench/decode_step.py` on an H200 (their numbers, and the variants
    each class beat, are in `bench/RESULTS.md`, "launch_shape"). SmolLM2's projections (K < 2048,
    N < 8192) take eight warps (the norms' block, so an add+norm runs as their launch's tail);
    Llama-3-8B's dequantizing rows take two-stage async-copy pipelines (`Shape.stages`)."""
    if act == "f32":
        if k < 2048:
            return Shape(16, 4, 4, 1, 1) if n >= 8192 else Shape(16, 4, 8, 1, 4)
        if k >= 8192 or n <= 4096:
            return Shape(16, 4, 8, 1, 2, stages=2)
        return Shape(16, tuning.tall_dequant_rows if n < 65536 else 8, 4, 1, 1, stages=2)
    if k < 2048:
        if n >= 8192:  # a tall matrix of short rows (an output projection): fewer, larger blocks
            return Shape(32, 2, 4, 2, 1)
        return Shape(16, 2, 8, 1, 1) if k < 1024 else Shape(16, 2, 8, 1, 4)
    if k >= 8192:
        return Shape(32, 2, 8, 2, 4)
    if n <= 4096:
        return Shape(32, 2, 4, 2, 2)
    return Shape(16, 2, 4, 1, 1, stages=2)


def block_shape(weights: str, n: int, k: int, act: str, tuning: Tuning = DEFAULT) -> Shape:
    """The default launch shape of the coalesced GEMV of N x K `weights` under `act`: Q8_0's
    `launch_shape`; an affine type's, the fastest of `bench/gemv.py --types q4_k,q6_k --try ...` at
    Llama-3-8B's shapes on an H100 (2026-12-07, `bench/RESULTS.md`); below K 2048 eight warps (not yet
    timed: the block a norm prologue needs)."""
    if weights == "q8_0":
        return launch_shape(n, k, act, tuning)
    if weights in DENSE_TYPES:  # untimed: the affine types' int8-act shapes (few instructions a byte)
        return Shape(16, 2, 8, 1, 1) if k < 2048 else Shape(16, 2, 4, 2, 1)
    if k < 2048:  # eight warps: the norms' block, so a norm before it runs as its launch's prologue
        return Shape(16, 2, 8, 1, 1)
    if act == "f32":  # four rows a warp share each chunk's 32 x values and their sum
        return Shape(16, 2, 4, 2, 1) if k >= 8192 else Shape(16, 4, 4, 1, 1)
    return Shape(16, 2, 8, 2, 2) if k >= 8192 else Shape(16, 2, 4, 2, 1)


@factory
def blocks(weights: str, n: int, k: int, m: int = 1, *, act: str = "f32", shape: Shape | None = None,
           tuning: Tuning = DEFAULT) -> Kernel:  # fmt: skip
    """The coalesced GEMV over `weights` (`gemv_blocks`), `shape` defaulting to `block_shape`."""
    return gemv_blocks(n, k, m, act, shape or block_shape(weights, n, k, act, tuning), weights=weights, tuning=tuning)


@factory
def q8_0(n: int, k: int, m: int = 1, *, shape: Shape | None = None, tuning: Tuning = DEFAULT) -> Kernel:
    """The Q8_0 GEMV dequantizing in-kernel (see the module docstring); `shape` defaults to
    `launch_shape`."""
    return gemv_q8(n, k, m, "f32", shape or launch_shape(n, k, "f32", tuning), tuning=tuning)


@factory
def q8_0_int8(n: int, k: int, m: int = 1, *, shape: Shape | None = None, tuning: Tuning = DEFAULT) -> Kernel:
    """The int8-activation Q8_0 GEMV (see the module docstring); `shape` defaults to `launch_shape`."""
    return gemv_q8(n, k, m, "int8", shape or launch_shape(n, k, "int8", tuning), tuning=tuning)


_LOAD = {
    "float32": "w[o + j]",
    "float16": "float32(w[o + j])",
    "bfloat16": "bf16_f32(w[o + j])",
}
_STORE_DTYPE = {"float32": "float32", "float16": "float16", "bfloat16": "uint16"}


@factory
def dense(n: int, k: int, m: int = 1, *, dtype: str = "float32", warps: int = 4, binary: tuple[str, bool] | None = None,
          tuning: Tuning = DEFAULT) -> Kernel:  # fmt: skip
    """The dense GEMV over float32/float16/bfloat16 weights (see the module docstring); one warp a row;
    `binary` an elementwise epilogue after its stores (`gemv_q8`'s)."""
    if dtype not in _LOAD:
        raise ValueError(f"a dense GEMV over {dtype} weights (float32, float16, bfloat16)")
    if n <= 0 or k <= 0 or m <= 0:
        raise ValueError(f"a GEMV of {n}x{k} over {m} rows")
    check_block(32 * warps)
    body = f"""\
@cuda.jit(cache=True)
def dense_k(w, x, y{", ep_in, ep_out" if binary else ""}):
    lane = $tx % 32
    row = $bx * {warps} + $tx // 32
    m = $by
    if row >= {n}:
        return
    o = row * {k}
    xo = m * {k}
    acc = float32(0.0)
    for j in range(lane, {k}, 32):
        acc += {_LOAD[dtype]} * x[xo + j]
    acc = warp_sum(acc)
    if lane == 0:
{indent(store("y", f"m * {n} + row", "acc", binary), 2)}
"""
    params = [
        Param("w", _STORE_DTYPE[dtype], n * k, "in", f"{dtype} weights [{n}, {k}]"),
        Param("x", "float32", m * k, "in", f"[{m}, {k}]"),
        Param("y", "float32", m * n, "out", f"[{m}, {n}]"),
    ]
    grid = (-(-n // warps), m)
    name, notes = f"gemv_dense_{dtype}_{m}x{n}x{k}", f"{dtype} GEMV {n}x{k} over {m} row{'s' if m != 1 else ''}"
    if binary:
        params, name, notes = binary_params(params, name, notes, binary)
    return build(name, body, "dense_k", grid, (32 * warps,), params, notes, pdl=tuning.pdl,
                 spec=GemvSpec(dtype, n, k, m, "f32", warps=warps, binary=binary))
