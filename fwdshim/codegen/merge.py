"""Merged launches: the lowering groups a plan's stage launches into fewer kernel launches, each bit for
bit the launches it holds (the IR's stages, legality, `covers` and `--explain` are unchanged).

`merge(plan, tuning) -> LaunchPlan` (with `Tuning.merge`; else the plan as it is) groups the plan's stage launches:
`merge_launches(launches, fresh, tuning) -> list[Launch]` walks them in graph order and makes a
group of

- a **parallel set**: consecutive launches with no data between them (none writes a buffer another
  reads or writes: the Q, K and V GEMVs reading one activation; gate and up), of one block size and a
  1-D grid: one launch whose blocks are the parts' blocks end to end — block `b` runs the part whose
  range holds it, as that part's block `b - start`;
- before it, a **prologue** (`prologue_modes`): the one-block launch just before a set of GEMVs
  whose result those GEMVs read as their activation (`x`; `xq`/`xd` only with `Tuning.quantized_prologues`) and that is at most
  `Tuning.prologue_values` wide — an RMS norm (and its quantize epilogue), a silu·mul, a quantize. Every
  block of the set runs it first (its own source as a device function, the same block size),
  writing that result into shared memory, which the GEMV part then reads through generic loads
  (`lda_*`); block 0 also stores the result, and whatever else the prologue writes (an add+norm's
  sum), in the buffers (each other block writes those into shared scratch), so every buffer ends as
  the stage launches leave it. A launch that could be (the head of) the next set's prologue is not
  taken as a tail;
- then **epilogues** (`Tuning.binary_epilogues`, `rope_epilogues`, `pair_epilogues`): an elementwise op of one GEMV
  part's whole output and a buffer written before the group (`_epilogue_of`: a residual add), or the
  rope of a Q or K projection's output (`_rope_epilogue_of`), or of a qk-norm's heads (an RMS norm
  of one head a row), runs in that part, each block on the rows it has just stored
  (`gemv.binary_variant`, `gemv.rope_variant`, `norms.rope_variant`), with no barrier and no last
  block; an elementwise kernel over two parts' outputs (silu·mul after gate and up,
  `_pair_epilogue_of`) joins the two into one part whose groups take row i of both matrices and run
  it on the pair (`gemv.pair_variant`), and the quantize of that epilogue's result after it
  (`_quant_epilogue_of`, `Tuning.quant_epilogue_values`: the warp that completes a block of 32 quantizes it);
- then **tails**: the launches that follow (their inputs may be the set's outputs: rope after Q/K,
  silu·mul after gate/up, the residual add after the O and down projections, the norm after that
  add), each small (`Tuning.tail_threads` threads of work at most), run by the set's block that finishes
  last (each block fences its writes and counts itself done, `atomic.add` on a `count` scratch word
  that the last block resets): the tail's blocks one after another, separated by barriers. A tail of
  another block size runs only when its warps work alone (no barriers or shared memory; shuffles
  and warp reductions are fine): the block's threads then take the tail's threads in turns, thread
  `t` as `t`, `t + block`, ... (a warp stays a warp, lane for lane). A set reading more than
  `Tuning.tail_set_bytes` takes no tails.

Each part keeps its own generated source: its family's statements are written out as a device function
of the merged module (`KernelBody.device_fn` under `source.device_index`: the block index the arguments
`_bx`, `_by`, the global index spelled out with the part's own block size, the thread index an
argument for a tail run in turns), called with its own arguments, so every part computes what it
computed alone.
The parallel parts' top-level shared arrays become arguments too (`shared_decls`): the merged kernel
declares one array for each position and dtype, as large as the largest part's (the parts run in
different blocks), so a set of pipelined GEMVs (`gemv.Shape.stages`) takes one part's shared memory.
A launch joins no group when its code (`Kernel.facts`, read from its syntax tree) reads with the
non-coherent path (`ld_*`) as a tail or a prologue (its input is written in the same launch), uses
atomics (a last-block pattern of its own: attention, argmax), or reads the grid's or block's size.

Which launches group is `codegen.merge_groups` (`groups`); this module writes each group's kernel
(`merged_kernel`) and its launch. `fresh(i, name="count", size=1, suffix="") -> Arg` binds launch `i`'s `name` to a scratch buffer that
`merge` adds to the plan (`%launch<i>.<name><suffix>`, `int32 [size]`, zeroed): a tail's `count`, a
pair quantize's `qcount` (its suffix the quantize's stage, so two in one launch count apart).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from fwdshim.codegen.device import occupancy, simulating, sm_count
from fwdshim.codegen.kernel import Kernel, Param, build
from fwdshim.codegen.launch import Arg, Buffer, Launch, LaunchPlan, Part, with_buffers
from fwdshim.codegen.merge_groups import _epilogue, _grid1, _key, groups, prologue_modes, rope_variant, weight_arrays
from fwdshim.codegen.source import (
    AFTER_WAIT,
    LATE_WAIT,
    SharedArray,
    count_done,
    device_index,
    facts,
    indent,
    release_import,
)
from fwdshim.codegen.tuning import DEFAULT, Tuning


def one_wave_blocks(total: int, block: int, shared: int, tuning: Tuning) -> int:
    """The launch bounds (blocks an SM, 0 for none) of a merged launch of `total` blocks of `block`
    threads using `shared` bytes of static shared memory a block: the blocks an SM that run the grid
    in one wave on the current GPU (`device.sm_count`), when that is 2 to `tuning.one_wave_blocks`
    and within what the threads and the static shared memory an SM allow (at 1 KiB reserved a
    block, `device.SMLimits`). ptxas then keeps a thread's registers within them."""
    if tuning.one_wave_blocks < 2:
        return 0
    need = -(-total // sm_count())
    fits = min(tuning.one_wave_blocks, occupancy(0, shared, block)[0])  # the threads and shared memory an SM holds
    return need if 2 <= need <= fits else 0


def shared_decls(k: Kernel) -> list[tuple[str, int, str]]:
    """The (name, elements, dtype) of each static shared array the kernel function declares at its
    top level (`source.SharedArray`), in order."""
    return [(a.name, a.size, a.dtype) for a in (k.code.shared if k.code is not None else ())]


PRO_INLINE = ", forceinline=True"
"""How the prologue device function `_pro` that merged launches call at their parts' wait is inlined
(`Tuning.pre_wait_prologue`): by NVVM (`forceinline`: typed once; SmolLM2's int8-act step built in 45 s on
the H200 against 132 s with Numba's `inline=True`, which types it once a part). Numba 0.30's
`compile_ptx` needs a CUDA driver for a `forceinline` device function, so `bench/occupancy.py`
(no GPU) asks for Numba's inlining: the same code once inlined."""

MAX_CALL_ARGS = 30
"""The most arguments a generated call passes: CPython compiles a call of more as `f(*args)`, which
Numba's inlining of device functions refuses ("Calling a closure with *args is unsupported")."""


def _waits_late(k: Kernel) -> bool:
    """Whether kernel `k` waits for the launches before it only after work that reads none of their
    results (`source.late_wait`): its family wrote the late wait and it waits at all (`Kernel.pdl`)."""
    return k.code is not None and k.code.waits_late and k.pdl != "off"


def _device_fn(k: Kernel, fn: str, thread: bool, generic: Sequence[str] = (), hoist: bool = False,
               more: Sequence[str] = (), after_wait: str = "") -> str:  # fmt: skip
    """The kernel's function as device function `fn(params..., _bx, _by[, _tx], more...)`
    (`KernelBody.device_fn` under `source.device_index`: its block index the arguments, its global
    index with its own block size, its thread index `_tx` with `thread`); the wide loads of the
    arrays named in `generic` read through a generic address (`lda_*`: they get shared arrays);
    `after_wait` is the statement after its late wait. With `hoist`, the top-level shared arrays
    (`shared_decls`) become parameters before `more`: a merged launch's parallel parts run in
    different blocks, so they share the kernel's allocations."""
    code = k.code
    if code is None:
        raise ValueError(f"kernel {k.name}: no kernel body to call as a device function")
    names = [a.name for a in code.shared] if hoist else []
    extra = ["_bx", "_by", "_tx"] if thread else ["_bx", "_by"]
    index = device_index(k.block[0], thread, generic, after_wait, hoist)
    return code.device_fn(fn, [*extra, *names, *more], index)


def _with_epilogue(part, t, how: tuple, second, tuning: Tuning):
    """Launch `part` (a GEMV; for a rope, or an RMS norm of one head a row) carrying launch `t` as its
    epilogue (`_epilogue`): its kernel stores both results, `t`'s other operand and result its last arguments. A pair epilogue takes launch
    `second` in too (its weights after `part`'s, its output after `part`'s, then `t`'s results)."""
    from fwdshim.codegen import gemv

    if how[0] == "pair":
        kern = gemv.pair_variant(part.kernel, how[2], tuning)
        assert kern is not None and second is not None
        outs = tuple(a for a, q in zip(t.args, t.kernel.params, strict=True) if q.role != "in")
        nw = weight_arrays(part.kernel)
        args = (*part.args[:nw], *second.args[:nw], *part.args[nw:], second.args[-1], *outs)
        return replace(part, kernel=kern, args=args)
    if how[0] == "rope":
        kern = rope_variant(part.kernel, how[1], how[2], tuning)
        assert kern is not None
        extra = (t.args[1], t.args[2])
    else:
        kind, y_first = how
        kern = gemv.binary_variant(part.kernel, kind, y_first, tuning)
        assert kern is not None
        extra = (t.args[1] if y_first else t.args[0], t.args[2])
    return replace(part, kernel=kern, args=tuple(part.args) + extra)


def _with_quantize(part, t, counts: Callable[[int], object], tuning: Tuning):
    """Launch `part` carrying quantize launch `t` after its pair epilogue (`_quant_epilogue_of`) when
    its pair's result is what `t` reads; else `part` as it is. `counts(size)` gives the argument of
    its `qcount` (a zeroed scratch array of the plan)."""
    from fwdshim.codegen import gemv

    if _key(part.args[-1]) != _key(t.args[0]):
        return part
    kern = gemv.quant_variant(part.kernel, t.kernel.spec.fmt, tuning)
    if kern is None:  # not the pair variant whose result `t` quantizes
        return part
    outs = tuple(a for a, q in zip(t.args, t.kernel.params, strict=True) if q.role != "in")
    return replace(part, kernel=kern, args=(*part.args, *outs, counts(kern.params[-1].size)))


def merged_kernel(par: Sequence[Kernel], tails: Sequence[Kernel], shared_args: Sequence[Sequence[int]], n_args: int,
                  arg_params: Sequence[Param], pro: Sequence[Kernel] = (), pro_args: Sequence[Sequence[int]] = (),
                  modes: dict[int, str] | None = None, held: tuple[int, int, int, int] | None = None, *,
                  tuning: Tuning = DEFAULT) -> Kernel:  # fmt: skip
    """The merged kernel of parallel parts `par` and `tails`; `shared_args[i]` maps part i's
    parameters (parts in `par + tails` order) to indices of the merged parameters `arg_params`
    (`n_args` of them, then `count` when there are tails). With a prologue `pro` (a chain of
    kernels run in order, `pro_args[c]` the parameters of the c-th), `modes` says for each merged
    parameter the chain writes whether it is kept in shared memory (`shared`: the set or a later
    kernel of the chain reads it) or only block 0 stores it (`global`, `prologue_modes`). `held`: the
    stage launches the merged launch holds, (prologue, set, epilogues, tails), for its name
    `merged_<R>r<P>p<E>e<T>t_<hash>` (zero counts but the set's left out); default the kernels given."""
    block = par[0].block[0]
    names = [f"a{j}" for j in range(n_args)]
    fns, calls = [], []
    start = 0
    parts = list(par) + list(tails)
    modes = dict(modes or {})
    shared = [j for j, m in modes.items() if m == "shared"]
    inline = bool(pro) and tuning.pre_wait_prologue and all(_waits_late(k) for k in par)  # the prologue at the parts' waits
    head = ""
    aligned = not simulating()
    decls: list[SharedArray] = []
    if len(pro) != len(pro_args):
        raise ValueError(f"{len(pro)} prologue kernels, {len(pro_args)} argument lists")
    if pro:
        decls = [SharedArray(f"_s{j}", arg_params[j].size, arg_params[j].dtype, aligned) for j in sorted(modes)]
        for c, (k, own_args) in enumerate(zip(pro, pro_args, strict=True)):
            fn = "prologue" if c == 0 else f"prologue{c}"
            fns.append(_device_fn(k, fn, False))
            first = ", ".join(f"_s{x}" if modes.get(x) == "shared" else names[x] for x in own_args)
            other = ", ".join(f"_s{x}" if x in modes else names[x] for x in own_args)
            head += f"if _b == 0:\n    {fn}({first}, 0, 0)\nelse:\n    {fn}({other}, 0, 0)\ncuda.syncthreads()\n"
        if shared:
            head += "if _b == 0:\n" + "".join(
                f"    for _i in range(cuda.threadIdx.x, {arg_params[j].size}, {block}):\n        {names[j]}[_i] = _s{j}[_i]\n"
                for j in shared
            )
    pools: dict[tuple[int, str], int] = {}  # (j-th array of a part, dtype) -> elements: one allocation each
    for k in par:
        for j, (_, size, dtype) in enumerate(shared_decls(k)):
            pools[(j, dtype)] = max(pools.get((j, dtype), 0), size)
    pool_decls = [SharedArray(f"_h{j}_{dtype}", size, dtype, aligned) for (j, dtype), size in pools.items()]
    pro_call = ""
    if inline:  # only the arguments the prologue reads or writes, and the calls within CPython's 30
        used = sorted({x for own in pro_args for x in own} | set(shared))
        pro_call = ", ".join([names[x] for x in used] + [f"_s{j}" for j in sorted(modes)] + ["_b"])
        widest = max(len(k.params) + 2 + len(shared_decls(k)) for k in par) + len(used) + len(modes) + 1
        inline = widest <= MAX_CALL_ARGS
    if inline:  # the prologue as a device function each part calls at its wait
        nvvm = "" if simulating() else PRO_INLINE  # the simulator's `cuda.jit` takes neither
        fns.append(f"@cuda.jit(device=True{nvvm})\ndef _pro(" + pro_call + "):\n" + indent(head, 1).rstrip() + "\n    return")
        head = ""
    for i, k in enumerate(parts):
        thread = i >= len(par) and k.block[0] != block
        own = [q.name for q, x in zip(k.params, shared_args[i], strict=True) if x in shared] if i < len(par) else []
        late_part = inline and i < len(par)  # it calls the prologue at its wait
        fns.append(_device_fn(k, f"part{i}", thread, own, hoist=i < len(par), more=[pro_call] if late_part else [],
                              after_wait=f"\n    _pro({pro_call})" if late_part else ""))  # fmt: skip
        args = ", ".join(f"_s{x}" if (i < len(par) and x in shared) else names[x] for x in shared_args[i])
        if i < len(par):
            g = _grid1(k)
            cond = "if" if i == 0 else "elif"
            pooled = "".join(f", _h{j}_{dtype}" for j, (_, _, dtype) in enumerate(shared_decls(k)))
            calls.append(f"{cond} _b < {start + g}:\n    part{i}({args}, _b - {start}, 0{pooled}{', ' + pro_call if inline else ''})")
            start += g
    total = start
    body = head + "\n".join(calls)
    params = list(arg_params)
    if tails:
        params.append(Param("count", "int32", 1, "inout", "parallel blocks done (0 between launches)"))
        tail_calls = []
        for i, k in enumerate(tails, start=len(par)):
            args = ", ".join(names[x] for x in shared_args[i])
            g = _grid1(k)
            if k.block[0] == block:
                tail_calls.append(f"for _vb in range({g}):\n    cuda.syncthreads()\n    part{i}({args}, _vb, 0)")
            else:
                tail_calls.append(
                    f"cuda.syncthreads()\nfor _vb in range({g}):\n    for _vt in range(cuda.threadIdx.x, {k.block[0]}, {block}):\n"
                    f"        part{i}({args}, _vb, 0, _vt)"
                )
        counted, acquired = count_done("_flag", "count", "0", "cuda.threadIdx.x")
        body += f"""
{counted}
cuda.syncthreads()
if _flag[0] != {total - 1}:
    return
{acquired}if cuda.threadIdx.x == 0:
    count[0] = 0
""" + "\n".join(tail_calls)
    sig = ", ".join(names + (["count"] if tails else []))
    # every block runs one part first: when each part waits for earlier launches itself, after its
    # weight copies (`Tuning.pre_wait`), the launch adds no wait of its own at its top
    late = (not pro and all(k.code is not None and k.code.waits_late for k in par)) or inline
    fns_src = "\n\n\n".join(fns)
    arrays = [SharedArray("_flag", 1, "int32"), *pool_decls, *decls]
    if not simulating():
        shared_bytes = facts(fns_src).shared_bytes + sum(a.size * np.dtype(a.dtype).itemsize for a in arrays[1:])
        waves = one_wave_blocks(total, block, shared_bytes, tuning)
    else:
        waves = 0
    bounds = f", launch_bounds=({block}, {waves})" if waves else ""  # the simulator's `cuda.jit` takes none
    src = (release_import() if tails else "") + fns_src + f"""


@cuda.jit(cache=True{bounds})
def merged_k({sig}):
{arrays[0].decl}    _b = cuda.blockIdx.x
{"    " + LATE_WAIT + AFTER_WAIT + chr(10) if late else ""}{"".join(a.decl for a in arrays[1:])}{indent(body, 1)}
"""
    lead = list(pro)
    key = hashlib.sha256(
        "\0".join(k.name for k in lead + parts).encode()
        + repr(([list(a) for a in pro_args], sorted(modes.items()), shared_args)).encode()
    ).hexdigest()[:8]
    r, p, e, t = held if held is not None else (len(pro), len(par), 0, len(tails))
    name = f"merged_{f'{r}r' if r else ''}{p}p{f'{e}e' if e else ''}{f'{t}t' if t else ''}_{key}"
    notes = (
        "merged launch: "
        + (f"prologue: {', '.join(k.name for k in pro)} | " if pro else "")
        + ", ".join(k.name for k in par)
        + (" | tails: " + ", ".join(k.name for k in tails) if tails else "")
    )
    return build(name, src, "merged_k", (total,), (block,), params, notes, pdl=tuning.pdl, shared=arrays)


def merge_launches(launches: Sequence[Launch], fresh: Callable[..., Arg], tuning: Tuning) -> list[Launch]:
    """The plan's stage launches as merged launches (module docstring). Each merged launch holds its
    parts in `holds` (the launches it replaces, in order: the parallel set, then the tails)."""
    out = []
    for pro, par, epi, tails in groups(launches, tuning):
        if len(pro) + len(par) + len(epi) + len(tails) == 1:
            out.append(par[0])
            continue
        if not pro and not tails and len(par) == 1 and len(epi) == 1 and getattr(par[0].kernel.spec, "combine", False):
            found = _epilogue(epi[0], par, [], tuning)  # a down-and-combine storing its epilogue itself (`_lone_epilogue`)
            assert found is not None
            done = _with_epilogue(par[0], epi[0], found[1], None, tuning)
            out.append(replace(done, holds=(par[0], epi[0]), epilogues=1))
            continue
        held = list(pro) + list(par) + list(epi) + list(tails)
        n_set = len(par)
        par = list(par)
        joined: set[int] = set()
        for t in epi:  # each epilogue joins its part: the part's kernel stores both results
            if t.kernel.family == "quantize":  # a pair's quantize (`_quant_epilogue_of`)
                par = [_with_quantize(p, t, lambda size, t=t: fresh(len(out), "qcount", size, str(t.stage)), tuning) for p in par]
                continue
            found = _epilogue(t, par, [], tuning)
            assert found is not None
            second = par[found[1][1]] if found[1][0] == "pair" else None
            par[found[0]] = _with_epilogue(par[found[0]], t, found[1], second, tuning)
            if second is not None:  # the pair's second part is in the first now
                joined.add(found[1][1])
        par = [p for i, p in enumerate(par) if i not in joined]
        refs: dict[tuple[str, str], int] = {}
        roles: dict[int, set[str]] = {}
        mapping = []
        params: list[Param] = []
        for launch in pro + par + tails:
            idx = []
            for a, p in zip(launch.args, launch.kernel.params, strict=True):
                key = (a.buffer, a.part)
                if key not in refs:
                    refs[key] = len(params)
                    params.append(Param(f"a{len(params)}", p.dtype, p.size, p.role, a.ref))
                j = refs[key]
                if params[j].size != p.size or params[j].dtype != p.dtype:
                    raise ValueError(f"{a.ref} bound as {params[j].size} {params[j].dtype} and {p.size} {p.dtype}")
                roles.setdefault(j, set()).add(p.role)
                idx.append(j)
            mapping.append(idx)
        for j, rs in roles.items():
            if len(rs) > 1:
                params[j] = replace(params[j], role="inout")
        pro_args = [mapping.pop(0) for _ in pro]
        modes: dict[int, str] = {}
        if pro:
            modes = {refs[key]: m for key, m in (prologue_modes(pro, par, tuning) or {}).items()}
        kern = merged_kernel([x.kernel for x in par], [x.kernel for x in tails], mapping, len(params), params,
                             [x.kernel for x in pro], pro_args, modes, (len(pro), n_set, len(epi), len(tails)), tuning=tuning)  # fmt: skip
        keys = list(refs)
        by_param = {p.name: p for p in kern.params}
        args = [Arg(f"a{j}", b, part, by_param[f"a{j}"].role) for j, (b, part) in enumerate(keys)]
        if tails:
            args.append(fresh(len(out)))
        first = (pro + par)[0]
        out.append(Launch(first.stage, kern, tuple(args), holds=tuple(held), tails=len(tails),
                             prologue=len(pro), epilogues=len(epi)))  # fmt: skip
    return out


def merge(plan: LaunchPlan, tuning: Tuning) -> LaunchPlan:
    """`plan` with its stage launches grouped into merged launches (`merge_launches`) and the scratch
    buffers those count in added (`fresh`); `plan` itself when `tuning.merge` is off or nothing merges."""
    if not tuning.merge:
        return plan
    added: dict[str, Buffer] = {}

    def fresh(i: int, param: str = "count", size: int = 1, suffix: str = "") -> Arg:
        name = f"%launch{i}.{param}{suffix}"
        added[name] = Buffer(name, (size,), "i32", "intermediate", (Part("", "int32", size),))
        return Arg(param, name, "", "inout")

    launches = tuple(merge_launches(plan.stage_launches, fresh, tuning))
    if launches == plan.stage_launches:
        return plan
    return replace(plan, buffers=with_buffers(plan.buffers, added.values()), merged=launches)
