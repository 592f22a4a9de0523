"""What merges with what: `groups(launches, tuning)` cuts a plan's stage launches, in graph order, into
(prologue, parallel set, epilogues, tails) groups by the rules `codegen.merge`'s docstring states;
`codegen.merge` then writes each group's merged kernel. The tests here are on the launches' data
(reads, writes, grids, blocks, parameters) and on what each kernel's family says it is (its
`KernelSpec`: a GEMV, a rope, a quantize, an elementwise kernel, and which epilogues its family can
add), and on what its code does (`Kernel.facts`, read from its syntax tree: atomics, barriers, shared
memory, the grid's size)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from fwdshim.codegen.kernel import Kernel
from fwdshim.codegen.norms import NormSpec
from fwdshim.codegen.tuning import Tuning

MAX_GRID = 2**31 - 1
"""The most blocks of a merged launch (CUDA's grid along x): its parts' blocks end to end."""

MAX_PARTS = 8
"""The most launches one merged launch holds (its parameters stay within the 4 KiB limit)."""

ACTIVATIONS = ("x", "xq", "xd")
"""The GEMV parameters that read an activation (`codegen.gemv`): what a
prologue's shared-memory result may stand for."""


def _plain(k: Kernel) -> bool:
    """A kernel whose function, alone in its module, can become a device function of a merged
    module: no atomics (a last-block pattern of its own) and no reading of the grid's or the
    block's size."""
    if k.code is None or k.code.preamble.strip("\n"):
        return False
    f = k.facts
    return not f.atomics and not f.grid_shape


def _warp_free(k: Kernel) -> bool:
    """No barrier and no shared memory: each warp computes alone (lanes may shuffle), so a block of
    another multiple of 32 threads can run its threads in turns, warp for warp."""
    f = k.facts
    return not f.barriers and not f.shared_bytes


def _grid1(k: Kernel) -> int | None:
    """The kernel's grid as a number of blocks, for a 1-D grid of 1-D blocks (else None)."""
    g = tuple(k.grid) + (1,) * (2 - len(k.grid))
    one_d = all(x == 1 for x in g[1:]) and all(x == 1 for x in tuple(k.block)[1:])
    return g[0] if one_d and not k.facts.threads_yz else None


def _set_bytes(par: Sequence) -> int:
    return sum(p.size * np.dtype(p.dtype).itemsize for x in par for p in x.kernel.params if p.role == "in")


def _independent(a, b) -> bool:
    wa, wb = set(a.writes), set(b.writes)
    return not (wa & (set(b.reads) | wb)) and not (wb & set(a.reads))


def _tail_ok(t, block: int, tuning: Tuning) -> bool:
    k = t.kernel
    gx = _grid1(k)
    if gx is None or not _plain(k) or k.facts.nc_loads:
        return False
    if gx * k.block[0] > tuning.tail_threads:
        return False
    if gx > 1 and isinstance(k.spec, NormSpec) and k.spec.cols > 1:  # a row split over blocks (`norms.default_cols`):
        return False  # each block reads the whole row, so one block running them in turn reads it `gx` times
    return k.block[0] == block or (_warp_free(k) and k.block[0] % 32 == 0)


def _parallel(launches: Sequence, i: int, room: int = MAX_PARTS) -> tuple[list, int]:
    """The parallel set starting at launch `i` (at most `room` launches) and the index after it
    ([] when launch `i` cannot start one)."""
    n = len(launches)
    k = launches[i].kernel
    if _grid1(k) is None or not _plain(k):
        return [], i
    block = k.block[0]
    par = [launches[i]]
    j = i + 1
    while (
        j < n and len(par) < room and _plain(launches[j].kernel) and _grid1(launches[j].kernel) is not None
        and launches[j].kernel.block[0] == block and all(_independent(p, launches[j]) for p in par)
        and sum(_grid1(x.kernel) for x in par) + _grid1(launches[j].kernel) <= MAX_GRID
    ):  # fmt: skip
        par.append(launches[j])
        j += 1
    return par, j


def _key(a) -> tuple[str, str]:
    return (a.buffer, a.part)


def prologue_modes(pro, par: Sequence, tuning: Tuning) -> dict[tuple[str, str], str] | None:
    """How parallel set `par` takes launch `pro` (a launch, or a list holding one) as its prologue,
    run by each of its blocks first (the modes are written for a chain of launches, run in order:
    for each buffer the prologue writes, `shared` (read by the set's GEMVs as their activation,
    `ACTIVATIONS`, or by a later launch of the chain: each block keeps it in shared memory, block 0
    also stores it) or `global` (read by none of them: block 0 stores it); None when it cannot
    (module docstring). In a chain, each launch but the last feeds a later one, and the last the set;
    chains of two measured slower, bench/RESULTS.md, so a prologue is one launch)."""
    chain = list(pro) if isinstance(pro, (list, tuple)) else [pro]
    values = tuning.prologue_values
    if values <= 0 or len(chain) != 1 or len(chain) + len(par) > MAX_PARTS:
        return None
    for c in chain:
        k = c.kernel
        if _grid1(k) != 1 or not _plain(k) or k.facts.nc_loads or k.block[0] != par[0].kernel.block[0]:
            return None
        if any(set(x.writes) & (set(c.reads) | set(c.writes)) for x in par):
            return None
    for i, c in enumerate(chain):  # a later launch of the chain writes nothing an earlier one touches
        if any(set(d.writes) & (set(c.reads) | set(c.writes)) for d in chain[i + 1 :]):
            return None
    if not all(x.kernel.family == "gemv" for x in par):
        return None
    if any(x.kernel.facts.returns for x in par):  # its warps past the last row would leave before the prologue's work
        return None
    modes: dict[tuple[str, str], str] = {}
    for i, c in enumerate(chain):
        fed = False
        for a, prm in zip(c.args, c.kernel.params, strict=True):
            if prm.role == "in":
                continue
            if prm.role != "out" or _key(a) in modes:
                return None
            reads = [q.name for x in par for b, q in zip(x.args, x.kernel.params, strict=True) if _key(b) == _key(a)]
            later = [q.name for d in chain[i + 1 :] for b, q in zip(d.args, d.kernel.params, strict=True) if _key(b) == _key(a)]
            if reads and later:
                return None
            if later:
                if prm.size > values:
                    return None
                modes[_key(a)] = "shared"
                fed = True
            elif not reads:
                modes[_key(a)] = "global"
            elif all(r in ACTIVATIONS for r in reads) and prm.size <= values:
                if not tuning.quantized_prologues and any(r != "x" for r in reads):
                    return None
                if i < len(chain) - 1:
                    return None  # the set reads only the chain's last results
                modes[_key(a)] = "shared"
                fed = True
            else:
                return None
        if not fed:
            return None
    return modes


def _prologue_set(launches: Sequence, i: int, tuning: Tuning) -> tuple[list, list, int] | None:
    """([the prologue], parallel set, the index after it) when launch `i` is the prologue of the set
    after it; else None."""
    if i + 1 < len(launches):
        par, j = _parallel(launches, i + 1, MAX_PARTS - 1)
        if par and prologue_modes([launches[i]], par, tuning) is not None:
            return [launches[i]], par, j
    return None


def _epilogue_of(t, par: Sequence, busy: Sequence) -> tuple[int, bool] | None:
    """(the part of `par` whose output `t` reads, whether that output is `t`'s first operand) when
    launch `t` can run as that part's epilogue; None otherwise. `t` is an elementwise kernel
    (`unary.BinarySpec`: `a`, `b` -> `y`) with one operand a part's whole output `y`, the part a GEMV
    that takes an elementwise epilogue (`gemv.takes_binary`), the other operand written by none of
    `busy` (the group's launches so far), its result read and written by none of them."""
    from fwdshim.codegen.gemv import takes_binary

    k = t.kernel
    if not _binary_launch(t) or _grid1(k) is None or any(q.dtype != "float32" for q in k.params):
        return None
    a, b, out = (_key(x) for x in t.args)
    for i, p in enumerate(par):
        if not takes_binary(p.kernel.spec):
            continue
        y = _key(p.args[-1])
        if (a == y) == (b == y) or p.kernel.params[-1].size != k.params[2].size:
            continue
        other = b if a == y else a
        if any(other in _written(u) for u in busy) or any(out in {_key(v) for v in u.args} for u in busy):
            return None
        return i, a == y
    return None


def _written(launch) -> set[tuple[str, str]]:
    """The (buffer, part) keys a launch writes (its arguments of role out or inout)."""
    return {_key(a) for a, q in zip(launch.args, launch.kernel.params, strict=True) if q.role != "in"}


def rope_variant(k: Kernel, hd: int, half: int, tuning: Tuning) -> Kernel | None:
    """Part `k` with a rope of its output as its epilogue: a GEMV's (`gemv.rope_variant`) or an RMS
    norm's whose rows are heads (`norms.rope_variant`: a qk-norm); None where its family has none."""
    from fwdshim.codegen import gemv, norms

    if isinstance(k.spec, NormSpec):
        return norms.rope_variant(k, hd, half, tuning)
    return gemv.rope_variant(k, hd, half, tuning)


def _rope_epilogue_of(t, par: Sequence, busy: Sequence, tuning: Tuning) -> tuple[int, int, int] | None:
    """(the part of `par`, hd, half) when rope launch `t` (`rope.RopeSpec`: `x`, `angles` -> `y`)
    turns that part's whole output and can run as its epilogue (`rope_variant`: a GEMV's, or an RMS
    norm's of one head a row); its angles written by none of `busy`, its result read and written by
    none of them. None otherwise."""
    from fwdshim.codegen.rope import RopeSpec

    k = t.kernel
    if not tuning.rope_epilogues or not isinstance(k.spec, RopeSpec) or [q.name for q in k.params] != ["x", "angles", "y"]:
        return None
    hd, half = k.spec.hd, k.spec.half
    x, ang, out = (_key(a) for a in t.args)
    # the rope may turn a part's output, or the result of the part's elementwise epilogue (a bias
    # added to q or k): the epilogue launch in `busy`, or (its epilogue taken) the part's `ep_out`
    added = {_key(u.args[2]): {_key(u.args[0]), _key(u.args[1])} for u in busy if _binary_launch(u)}
    for i, p in enumerate(par):
        last = p.kernel.params[-1]
        if last.size != k.params[0].size or last.name not in ("y", "ep_out"):
            continue
        if _key(p.args[-1]) != x and _key(p.args[-1]) not in added.get(x, ()):
            continue
        if rope_variant(p.kernel, hd, half, tuning) is None:
            return None
        if any(ang in _written(u) for u in busy) or any(out in {_key(v) for v in u.args} for u in busy):
            return None
        return i, hd, half
    return None


def _binary_launch(u) -> bool:
    """Whether launch `u` is an elementwise kernel of two operands (`unary.BinarySpec`: `a`, `b` -> `y`)."""
    from fwdshim.codegen.unary import BinarySpec

    return isinstance(u.kernel.spec, BinarySpec) and [q.name for q in u.kernel.params] == ["a", "b", "y"]


def weight_arrays(k: Kernel) -> int:
    """How many weight arrays GEMV kernel `k` takes before its activation (its first `ACTIVATIONS`
    parameter): two for Q8_0 (`qs`, `dw`), one to four for the other block types."""
    return next(i for i, q in enumerate(k.params) if q.name in ACTIVATIONS)


def _activation_keys(p) -> list:
    """The buffers a GEMV launch `p` reads as its activation (its arguments after its weight arrays,
    before `y`)."""
    return [_key(x) for x in p.args[weight_arrays(p.kernel) : -1]]


def _pair_epilogue_of(t, par: Sequence, busy: Sequence, tuning: Tuning) -> tuple[int, int, object] | None:
    """(the first part, the second part, the `gemv.Pair`) when elementwise launch `t` (a fused chain
    or region, `fused.ElementwiseSpec`: `a0`, `a1` -> `y0`, ...) reads the whole outputs of two GEMV
    parts of `par` of one spec (`gemv.GemvSpec`) over one activation and can run as the epilogue of
    the pair; its results read and written by none of `busy`. None otherwise."""
    from fwdshim.codegen import fused, gemv

    k = t.kernel
    spec = k.spec
    if not tuning.pair_epilogues or not isinstance(spec, fused.ElementwiseSpec) or spec.inputs != 2 or _grid1(k) is None:
        return None
    ins = [_key(a) for a, q in zip(t.args, k.params, strict=True) if q.role == "in"]
    outs = [_key(a) for a, q in zip(t.args, k.params, strict=True) if q.role != "in"]
    if len(ins) != 2 or ins[0] == ins[1] or any(q.dtype != "float32" or q.size != spec.n for q in k.params):
        return None
    at = {}
    for i, p in enumerate(par):
        if _key(p.args[-1]) in ins and p.kernel.params[-1].name == "y" and p.kernel.params[-1].size == spec.n:
            at[_key(p.args[-1])] = i
    if len(at) != 2:
        return None
    i, i2 = sorted(at.values())
    a, b = par[i], par[i2]
    if a.kernel.spec != b.kernel.spec or _activation_keys(a) != _activation_keys(b):
        return None
    if any(o in {_key(v) for v in u.args} for u in busy for o in outs):
        return None
    pair = fused.pair_epilogue(spec, [at[x] == i for x in ins])
    if gemv.pair_variant(a.kernel, pair, tuning) is None:
        return None
    return i, i2, pair


def _quant_epilogue_of(t, par: Sequence, epi: Sequence, busy: Sequence, tuning: Tuning) -> tuple[int, str] | None:
    """(the part of `par`, the format) when quantize launch `t` (`quantize.QuantizeSpec` of one row:
    `x` -> `q`, `d` (, `s`), at most `tuning.quant_epilogue_values` values) reads the one result of a
    pair epilogue launch among `epi` (`_pair_epilogue_of`) and can run after it in that part
    (`gemv.pair_variant` with `Pair.quant`); its results read and written by none of `busy`. None
    otherwise."""
    from fwdshim.codegen import gemv
    from fwdshim.codegen.quantize import QuantizeSpec

    k = t.kernel
    if not isinstance(k.spec, QuantizeSpec) or k.spec.rows != 1:
        return None
    if k.params[0].name != "x" or k.params[0].role != "in" or k.params[0].size > tuning.quant_epilogue_values:
        return None
    x = _key(t.args[0])
    outs = {_key(a) for a, q in zip(t.args, k.params, strict=True) if q.role != "in"}
    for e in epi:
        found = _pair_epilogue_of(e, par, [], tuning)
        if found is None or [_key(a) for a, q in zip(e.args, e.kernel.params, strict=True) if q.role != "in"] != [x]:
            continue
        i, _, pair = found
        if gemv.pair_variant(par[i].kernel, replace(pair, quant=k.spec.fmt), tuning) is None:
            return None
        if any(o in {_key(v) for v in u.args} for u in busy for o in outs):
            return None
        return i, k.spec.fmt
    return None


def _epilogue(t, par: Sequence, busy: Sequence, tuning: Tuning) -> tuple[int, tuple] | None:
    """(the part of `par`, how) when launch `t` runs as that part's epilogue: how is `("rope", hd,
    half)` (`_rope_epilogue_of`), `("pair", second part, gemv.Pair)` (`_pair_epilogue_of`: the
    second part joins the first) or `(kind, y_first)` (`_epilogue_of`)."""
    pair = _pair_epilogue_of(t, par, busy, tuning)
    if pair is not None:
        return pair[0], ("pair", pair[1], pair[2])
    rope = _rope_epilogue_of(t, par, busy, tuning)
    if rope is not None:
        return rope[0], ("rope", rope[1], rope[2])
    if not tuning.binary_epilogues:
        return None
    found = _epilogue_of(t, par, busy)
    if found is None:
        return None
    return found[0], (t.kernel.spec.kind, found[1])


def _lone_epilogue(launches: Sequence, i: int, tuning: Tuning) -> list:
    """[the launch after `i`] when it runs as the epilogue of launch `i`, a mixture's down-and-combine
    (`gemv_blocks`' `combine`: its own last-block sum, so never a merged launch's part): an
    elementwise op of its output (the residual add after the MoE), which its kernel then stores
    itself (`gemv.binary_variant`); else []."""
    k = launches[i].kernel
    if i + 1 >= len(launches) or not getattr(k.spec, "combine", False):
        return []
    found = _epilogue(launches[i + 1], [launches[i]], [launches[i]], tuning)
    return [launches[i + 1]] if found is not None and found[1][0] not in ("rope", "pair") else []


def groups(launches: Sequence, tuning: Tuning) -> list[tuple[list, list, list, list]]:
    """The plan's launches cut into (prologue, parallel set, epilogues, tails) groups, in order (module
    docstring); a prologue is a list of one launch or none; each
    epilogue belongs to one part of the set (`_epilogue_of`)."""
    out: list[tuple[list, list, list]] = []
    i, n = 0, len(launches)
    while i < n:
        pro: list = []
        found = _prologue_set(launches, i, tuning)
        if found is not None:
            pro, par, j = found
        else:
            par, j = _parallel(launches, i)
            if not par:
                epi = _lone_epilogue(launches, i, tuning)
                out.append(([], [launches[i]], epi, []))
                i += 1 + len(epi)
                continue
        block = par[0].kernel.block[0]
        epi: list = []
        taken: dict[int, str] = {}  # a part's epilogue so far: "binary", "rope" or "pair"
        quantized: set[int] = set()
        while j < n and len(pro) + len(par) + len(epi) < MAX_PARTS:
            quant = _quant_epilogue_of(launches[j], par, epi, pro + par + epi, tuning)
            if quant is not None and quant[0] not in quantized:
                quantized.add(quant[0])
                epi.append(launches[j])
                j += 1
                continue
            found_epi = _epilogue(launches[j], par, pro + par + epi, tuning)
            if found_epi is None or (found_epi[1][0] == "pair" and found_epi[1][1] in taken):
                break
            # a part takes one epilogue, or an elementwise one (a bias) and then a rope of its result
            kind = found_epi[1][0] if found_epi[1][0] in ("rope", "pair") else "binary"
            if found_epi[0] in taken and not (taken[found_epi[0]] == "binary" and kind == "rope"):
                break
            taken[found_epi[0]] = kind
            if kind == "pair":
                taken[found_epi[1][1]] = kind
            epi.append(launches[j])
            j += 1
        tails: list = []
        heavy = _set_bytes(par) > tuning.tail_set_bytes
        while not heavy and j < n and len(pro) + len(par) + len(epi) + len(tails) < MAX_PARTS and _tail_ok(launches[j], block, tuning):
            if _prologue_set(launches, j, tuning) is not None:
                break  # it runs as (the head of) the next set's prologue instead
            tails.append(launches[j])
            j += 1
        out.append((pro, par, epi, tails))
        i = j
    return out


