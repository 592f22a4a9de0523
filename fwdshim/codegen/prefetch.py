"""L2 prefetch of the next launch's weights: each launch of the graph asks the copy engine to bring the
weights the launch after it reads into L2 while it runs.

A decode step of a small model is a chain of short launches, each waiting on its weights' DRAM round
trip; SmolLM2's step reads ~140 MB, more than the H200's 60 MB L2, so no weight stays in L2 from one
step to the next. `prefetch(plan, tuning) -> LaunchPlan` (with `Tuning.prefetch_bytes`; else the plan as it is)
hands the plan's launches to `prefetch_next(launches, weight_bytes, tuning) -> list[Launch]`, which gives launch
`i` (in graph order, the merged launches of `codegen.merge`) the weight parts of launch `i + 1` (the
last launch: the first's, for the next replay of the graph) as
extra parameters of role `prefetch` (bound like any argument; no read of the launch, no data edge):
its kernel starts with thread 0 of each block asking for one slice of each such part
(`prefetch_l2`: `cp.async.bulk.prefetch.L2.global`, a hint nothing waits for), the slices cut in
16-byte multiples of at least `MIN_SLICE` bytes over the launch's blocks, a part's last bytes past a
16-byte multiple left out. Only where launch `i + 1`'s weights are at most `Tuning.prefetch_bytes` in all: a
larger set would push the current launch's own weights out of L2 before they are read (Llama-3-8B's
projections, 17-117 MB, are left alone). Results are unchanged: the kernel's own statements are the
same text after the hint.

`weight_bytes(arg) -> int | None`: the bytes of an argument's buffer part when its buffer is a
`weight`, else None (`prefetch` reads it from the plan's buffer table).

Its measurements (SmolLM2's step 886 -> 827 us a token; the bound) are in `bench/RESULTS.md`.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from fwdshim.codegen.kernel import Kernel, Param, build
from fwdshim.codegen.launch import Arg, Launch, LaunchPlan
from fwdshim.codegen.source import indent
from fwdshim.codegen.tuning import Tuning

MIN_SLICE = 4096
"""The fewest bytes one block asks for in one prefetch (a small part is one block's request)."""

ROLE = "prefetch"
"""The role of a prefetch parameter (`Param.role`, `Arg.role`): bound, never read nor written."""

def hint_statements(grid: Sequence[int], parts: Sequence[Param], names: Sequence[str]) -> str:
    """The statements (function-body level, no indent) by which thread 0 of each block of a launch of
    `grid` asks for its slice of each part (`parts[j]` passed as `names[j]`) into L2."""
    blocks = math.prod(grid)
    g = list(grid) + [1, 1]
    linear = "cuda.blockIdx.x" + (f" + cuda.blockIdx.y * {g[0]}" if g[1] > 1 else "") + (
        f" + cuda.blockIdx.z * {g[0] * g[1]}" if g[2] > 1 else ""
    )
    lines = ["if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0 and cuda.threadIdx.z == 0:", f"    _pf = {linear}"]
    for p, name in zip(parts, names, strict=True):
        total = p.size * np.dtype(p.dtype).itemsize // 16 * 16
        if total == 0:
            continue
        per_block = -(-total // blocks)
        chunk = max(MIN_SLICE, -(-per_block // 16) * 16)  # 16-byte multiples
        used = -(-total // chunk)
        item = np.dtype(p.dtype).itemsize
        lines.append(f"    if _pf < {used}:")
        lines.append(f"        prefetch_l2({name}, _pf * {chunk // item}, min({chunk}, {total} - _pf * {chunk}))")
    return "\n".join(lines)


def with_hints(k: Kernel, parts: Sequence[Param]) -> Kernel:
    """Kernel `k` taking `parts` as extra trailing parameters (role `prefetch`) that it asks into L2
    first (`hint_statements`); its own statements unchanged."""
    if k.code is None:
        raise ValueError(f"kernel {k.name}: no kernel body to prefix")
    names = [f"_pf{j}" for j in range(len(parts))]
    hints = indent(hint_statements(k.grid, parts, names), 1) + "\n"
    # the variant's text as it has always been written (byte for byte): no blank line before it, no newline after
    body = replace(k.code, params=(*k.code.params, *names), statements=hints + k.code.statements.rstrip("\n"),
                   preamble=k.code.preamble.lstrip("\n"))  # fmt: skip
    params = tuple(k.params) + tuple(Param(n, p.dtype, p.size, ROLE, f"L2 prefetch of {p.doc}") for n, p in zip(names, parts))
    key = hashlib.sha256(repr([(p.dtype, p.size) for p in parts]).encode()).hexdigest()[:6]
    notes = k.notes + f" | L2 prefetch: {len(parts)} part(s) of the next launch"
    return build(f"{k.name}_pf{key}", body, body.entry, k.grid, k.block, params, notes, pdl=k.pdl)


def prefetch_next(launches: Sequence[Launch], weight_bytes: Callable[[Arg], int | None], tuning: Tuning) -> list[Launch]:
    """`launches` with each given the next launch's weight parts to prefetch (module docstring), at
    most `tuning.prefetch_bytes` a launch (0: `launches` as they are)."""
    if tuning.prefetch_bytes <= 0:
        return list(launches)
    out = []
    n = len(launches)
    for i, launch in enumerate(launches):
        if n < 2:
            out.append(launch)
            continue
        nxt = launches[(i + 1) % n]
        wanted, seen = [], set()
        for a, p in zip(nxt.args, nxt.kernel.params, strict=True):
            if a.role != "in" or (a.buffer, a.part) in seen or weight_bytes(a) is None:
                continue
            seen.add((a.buffer, a.part))
            wanted.append((a, p))
        total = sum(weight_bytes(a) or 0 for a, _ in wanted)
        if not wanted or total > tuning.prefetch_bytes:
            out.append(launch)
            continue
        parts = [Param(p.name, p.dtype, p.size, ROLE, a.ref) for a, p in wanted]
        kern = with_hints(launch.kernel, parts)
        args = tuple(launch.args) + tuple(Arg(q.name, a.buffer, a.part, ROLE) for q, (a, _) in zip(kern.params[-len(parts) :], wanted))
        holds = launch.holds or (launch,)  # a lone launch holds its stage launch: the kernel is another
        out.append(Launch(launch.stage, kern, args, holds=holds, tails=launch.tails, prologue=launch.prologue,
                          epilogues=launch.epilogues))
    return out


def prefetch(plan: LaunchPlan, tuning: Tuning) -> LaunchPlan:
    """`plan` with each of its launches (merged, where `codegen.merge.merge` merged them) given the
    next launch's weights to prefetch (`prefetch_next`); `plan` itself when `tuning.prefetch_bytes` is 0."""
    if tuning.prefetch_bytes <= 0:
        return plan
    buffers = {b.name: b for b in plan.buffers}

    def weight_bytes(a: Arg) -> int | None:
        buf = buffers[a.buffer]
        if buf.role != "weight":
            return None
        part = buf.part(a.part)
        return part.size * np.dtype(part.dtype).itemsize

    launches = tuple(prefetch_next(plan.merged or plan.stage_launches, weight_bytes, tuning))
    return replace(plan, merged=() if launches == plan.stage_launches else launches)
