"""What every Q8_0 GEMV of `codegen.gemv` shares: its spec (`GemvSpec`), its launch shape (`Shape`),
its parameters, and how a group's rows are picked and stored — alone, or with the epilogue a merged
launch gives it: the rope of its rows (`rope`: rows in pairs `(i, i + half)`), a second matrix's
rows paired with its own and a `Pair` epilogue on them, and that epilogue's result quantized."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

from fwdshim.codegen import quantize as _quantize
from fwdshim.codegen.kernel import KernelSpec, Param
from fwdshim.codegen.source import SharedArray, indent


def _pair_rows(n: int, rows: int, hd: int, half: int) -> str:
    """The rows `rr{r}` of a group in rope pairs (`gemv_q8`'s `rope`): pair q is `pq{q}`, the group's
    `row0 / 2 + q`th (clamped to the last), its rows `i` and `i + half` of its head."""
    return "\n".join(
        f"pq{q} = min(row0 // 2 + {q}, {n // 2 - 1})\nrr{2 * q} = (pq{q} // {half}) * {hd} + pq{q} % {half}\n"
        f"rr{2 * q + 1} = rr{2 * q} + {half}"
        for q in range(rows // 2)
    )


def _with_rope_params(params: list[Param], name: str, notes: str, n: int, hd: int, half: int) -> tuple[list[Param], str, str]:
    """A GEMV's parameters, name and notes with its rope epilogue's (`angles`, `z` after `y`)."""
    params = [*params, Param("angles", "float32", 2 * half, "in", f"[2, {half}] cos row, sin row"),
              Param("z", "float32", n, "out", f"rope of y [{n // hd}, {hd}]")]  # fmt: skip
    return params, f"{name}_rope{hd}h{half}", f"{notes}, then its rope (heads of {hd})"


@dataclass(frozen=True)
class Pair:
    """A pair epilogue (`gemv_q8`'s `pair`: the gate and up projections with their silu·mul):
    `stmts`, statements over `pa` and `pb` (row i of the first matrix's product and of the
    second's, float32) in generated source; `values`, the value each result `z0`, `z1`, ... stores
    at row i; `what` names it (`silu_mul`)."""

    stmts: tuple[str, ...]
    values: tuple[str, ...]
    what: str
    quant: str | None = None
    """A quantize format (`one_word`, `two_words`): the epilogue's one result `z0` is then also
    quantized by the launch (`_pair_quant_lines`), into `zq`, `zd` (, `zs`), as the quantize stage
    would (`codegen.quantize`, the same statements)."""

    @property
    def tag(self) -> str:
        key = hashlib.sha256(repr((self.stmts, self.values)).encode()).hexdigest()[:6]
        return f"pair_{self.what}_{key}" + (f"_q{self.quant}" if self.quant else "")

    def outputs(self) -> str:
        """The kernel's parameters after `y2`: the results `z0`, ..., then with `quant` the quantized
        `z0` (`zq`, `zd`, `zs`) and the counts `qcount`."""
        names = [f"z{i}" for i in range(len(self.values))]
        if self.quant:
            names += [p.name for p in _quantize.qact_params(1, 1, self.quant, "z")] + ["qcount"]
        return ", ".join(names)


def _pair_of_rows(n: int, rows: int) -> str:
    """The rows of a group as pairs (`gemv_q8`'s `pair`, `n` the rows of each matrix): pair q is
    `pq{q}`, the group's `row0 / 2 + q`th (clamped to the last), row `pq{q}` of both matrices."""
    return "\n".join(
        f"pq{q} = min(row0 // 2 + {q}, {n - 1})\nrr{2 * q} = pq{q}\nrr{2 * q + 1} = pq{q}" for q in range(rows // 2)
    )


def _with_pair_params(params: list[Param], name: str, notes: str, n: int, k: int, pair: Pair,
                      second: list[Param] | None = None, ys: int = 1) -> tuple[list[Param], str, str]:  # fmt: skip
    """A GEMV's parameters, name and notes with a second matrix (`second`, default Q8_0's `qs2`,
    `dw2`, after the first's), its product (`y2` after `y`) and a pair epilogue's results (`z0`, ...),
    each of those `ys` rows (a mixture's chosen experts, `gemv_blocks`' `experts`)."""
    nb = k // 32
    if second is None:
        second = [Param("qs2", "int8", n * k, "in", f"second Q8_0 quants [{n}, {k}]"),
                  Param("dw2", "float32", n * nb, "in", f"second Q8_0 scales [{n}, {nb}]")]  # fmt: skip
    rows = f"{ys}, {n}" if ys != 1 else f"{n}"
    outs = [Param("y2", "float32", ys * n, "out", f"second product [{rows}]")]
    outs += [Param(f"z{i}", "float32", ys * n, "out", f"{pair.what} result {i} [{rows}]") for i in range(len(pair.values))]
    if pair.quant:
        outs += _quantize.qact_params(n, 1, pair.quant, "z")
        outs.append(Param("qcount", "int32", -(-n // 32), "inout", "pairs stored a block of 32 of z0 (0 between launches)"))
    params = [*params[: len(second)], *second, *params[len(second) :], *outs]
    then = f"{pair.what}, quantized ({pair.quant})" if pair.quant else pair.what
    return params, f"{name}_{pair.tag}", f"{notes}, a second matrix's rows paired with its rows, then {then}"


# ---------------------------------------------------------------------------------------------
# the coalesced GEMV: lanes read consecutive `vec`-byte pieces of a row


def _q8_params(n: int, k: int, m: int, act: str) -> list[Param]:
    """The parameters of a Q8_0 GEMV of N x K over M rows: `qs`, `dw`, the activation (`x`, or `xq`
    and `xd` under int8 activations), `y`."""
    nb = k // 32
    params = [
        Param("qs", "int8", n * k, "in", f"Q8_0 quants [{n}, {k}]"),
        Param("dw", "float32", n * nb, "in", f"Q8_0 scales [{n}, {nb}]"),
    ]
    return [*params, *_act_params(k, m, act), Param("y", "float32", m * n, "out", f"[{m}, {n}]")]


def _act_params(k: int, m: int, act: str) -> list[Param]:
    """The activation parameters of a GEMV of rows of K over M rows: `x`, or `xq` and `xd` under int8
    activations (one scale a block of 32)."""
    if act == "f32":
        return [Param("x", "float32", m * k, "in", f"[{m}, {k}]")]
    return [Param("xq", "int8", m * k, "in", f"activation quants [{m}, {k}]"),
            Param("xd", "float32", m * (k // 32), "in", f"activation scales [{m}, {k // 32}]")]  # fmt: skip


@dataclass(frozen=True)
class Shape:
    """A launch shape of the coalesced Q8_0 GEMV (`gemv_q8`): each lane reads `vec` bytes (4 or 16)
    of quants a load, the lanes of a warp consecutive pieces (a warp-wide load is `32 * vec`
    contiguous bytes); `rows` rows per warp group, `warps` warps per block in groups of `split` warps
    that deal a row's pieces among them, `unroll` steps whose loads are all issued before use.
    `blocks`: 0 for one block per row group, else a grid of at most that many blocks looping over
    the row groups. `prefetch`: one thread per group first asks for the group's rows (quants and
    scales) into L2 (`prefetch_l2`), and in a looping grid for its next group's too. `stages`: 0, or
    an async-copy pipeline that deep (16-byte pieces, `unroll` 1, one block a row group; see
    `_pipelined`)."""

    vec: int = 16
    rows: int = 2
    warps: int = 4
    unroll: int = 2
    split: int = 1
    blocks: int = 0
    prefetch: bool = False
    stages: int = 0

    @property
    def tag(self) -> str:
        more = (f"b{self.blocks}" if self.blocks else "") + ("p" if self.prefetch else "")
        more += f"a{self.stages}" if self.stages else ""
        return f"v{self.vec}r{self.rows}w{self.warps}u{self.unroll}s{self.split}{more}"


@dataclass(frozen=True)
class GemvSpec(KernelSpec):
    """A GEMV kernel's spec: `weights` (`q8_0`; a dense dtype, `float32`...; a GGML type's name) of N x
    K over `m` rows of activations `act` (`f32`, `int8`); for a Q8_0 GEMV its launch `shape` and the
    epilogue it carries (`rope`: `(hd, half)`; `pair`: a `Pair`), for the others `warps` a block;
    `binary`: the `(kind, y_first)` of an elementwise epilogue `codegen.merge` added to any GEMV.
    `codegen.merge` rebuilds a Q8_0 GEMV with an epilogue from it (`rope_variant`, `pair_variant`,
    `quant_variant`)."""

    family = "gemv"
    weights: str
    n: int
    k: int
    m: int
    act: str
    shape: Shape | None = None
    rope: tuple[int, int] | None = None
    pair: Pair | None = None
    warps: int = 0
    binary: tuple[str, bool] | None = None
    experts: tuple[int, int] | None = None
    """`(e, top_k)`: the GEMV of a mixture's chosen experts (`gemv_blocks`' `experts`)."""
    combine: bool = False
    """The chosen experts' rows summed by their weights (`gemv_blocks`' `combine`)."""


def _rope_lines(n: int, rows: int, half: int, value) -> list[str]:
    """The rope of each pair `(2q, 2q + 1)` of a group's rows (`rr{r}` their rows of `y`, `pq{q}`
    their pair): `z` of the two rows from `value(r)`, in the rope kernel's operations
    (`codegen.rope`: each product and sum rounded on its own)."""
    out = []
    for q in range(rows // 2):
        a, b = value(2 * q), value(2 * q + 1)
        out += [
            f"if row0 + {2 * q} < {n}:",
            f"    ci = pq{q} % {half}",
            "    c = angles[ci]",
            f"    s = angles[{half} + ci]",
            f"    z[rr{2 * q}] = fsub_rn(fmul_rn({a}, c), fmul_rn({b}, s))",
            f"    z[rr{2 * q + 1}] = fadd_rn(fmul_rn({a}, s), fmul_rn({b}, c))",
        ]
    return out


def _pair_lines(n: int, rows: int, pair: Pair, value, base: str = "") -> list[str]:
    """The pair epilogue of each pair `(2q, 2q + 1)` of a group's rows (`gemv_q8`'s `pair`; `n` the
    rows of both matrices, `pq{q}` the pair's row of each): `pa`, `pb` the two rows' values (from
    `value(r)`), then the epilogue's statements, then its results into `z0`, `z1`, ... at `base +
    pq{q}` (`base`: the row of results a chosen expert's, `gemv_blocks`' `experts`)."""
    out = []
    for q in range(rows // 2):
        out += [f"if row0 + {2 * q} < {n}:", f"    pa = {value(2 * q)}", f"    pb = {value(2 * q + 1)}"]
        out += [f"    {st}" for st in pair.stmts]
        out += [f"    z{i}[{base}pq{q}] = {v}" for i, v in enumerate(pair.values)]
    return out


def _pair_quant_lines(n: int, rows: int, fmt: str, groups: int = 0) -> list[str]:
    """The quantize of a pair epilogue's result `z0` (`Pair.quant`; `n` its values, a group's `rows
    / 2` pairs at `row0 / 2`), run by the warp whose lane 0 stored them, after the stores: the warp
    fences, its lane 0 adds the group's pairs to `qcount[b]` (`b` their block of 32, `rows / 2`
    dividing 32), and the warp that completes the block resets the count, fences, reads the block's
    32 values back and quantizes them with the quantize stage's statements (`quantize.epilogue`,
    one warp a block), so `zq`, `zd` (, `zs`) are that stage's bits."""
    pairs = rows // 2
    if 32 % pairs:
        raise ValueError(f"a quantize after a pair epilogue of {pairs} pairs a group (a divisor of 32)")
    quant = _quantize.epilogue("_qv0", "_qi", f"_qi < {n}", "_qb", "True", fmt, "z")
    if groups:  # the block's `groups * pairs` pairs at once (`Tuning.pair_quant_block`): every thread reaches the barriers
        if 32 % (groups * pairs):
            raise ValueError(f"a quantize after a pair epilogue of {groups * pairs} pairs a block (a divisor of 32)")
        have = f"min({groups * pairs}, {n} - _pb0)"
        return [
            "cuda.threadfence()",
            "cuda.syncthreads()",
            f"_pb0 = row0 // 2 - grp * {pairs}",
            "_qb = _pb0 // 32",
            "if $tx == 0:",
            "    _qf[0] = 0",
            f"    if _pb0 < {n}:",
            f"        _qf[0] = int32(cuda.atomic.add(qcount, _qb, {have}) + {have})",
            "cuda.syncthreads()",
            f"if warp == 0 and _pb0 < {n} and _qf[0] == min(32, {n} - _qb * 32):",
            "    cuda.threadfence()",
            "    if lane == 0:",
            "        qcount[_qb] = 0",
            "    _qi = _qb * 32 + lane",
            f"    _qv0 = z0[_qi] if _qi < {n} else float32(0.0)",
            *("    " + ln for ln in quant.splitlines()),
        ]
    have = f"min({pairs}, {n} - row0 // 2)"
    return [
        "cuda.threadfence()",
        f"if row0 // 2 < {n}:",
        "    _qb = (row0 // 2) // 32",
        "    _qa = int32(0)",
        "    if lane == 0:",
        f"        _qa = int32(cuda.atomic.add(qcount, _qb, {have}) + {have})",
        "    _qa = warp_isum(_qa)",
        f"    if _qa == min(32, {n} - _qb * 32):",
        "        cuda.threadfence()",
        "        if lane == 0:",
        "            qcount[_qb] = 0",
        "        _qi = _qb * 32 + lane",
        f"        _qv0 = z0[_qi] if _qi < {n} else float32(0.0)",
        *("        " + ln for ln in quant.splitlines()),
    ]


def store(array: str, at: str, value: str, binary: tuple[str, bool] | None = None) -> str:
    """The statement storing `value` at `array[at]`; with `binary` (`GemvSpec.binary`: `(kind,
    y_first)`) followed by the elementwise epilogue's line `ep_out[at] = value kind ep_in[at]` (or
    `ep_in[at] kind value`), the expression of the elementwise kernel (`unary.binary_expr`), so its
    bits are that kernel's. Multi-line statements share the first line's indentation."""
    line = f"{array}[{at}] = {value}"
    if binary is None:
        return line
    from fwdshim.codegen.unary import binary_expr

    kind, y_first = binary
    expr = binary_expr(kind, value, f"ep_in[{at}]") if y_first else binary_expr(kind, f"ep_in[{at}]", value)
    return f"{line}\nep_out[{at}] = {expr}"


def binary_params(params: list[Param], name: str, notes: str, binary: tuple[str, bool]) -> tuple[list[Param], str, str]:
    """A GEMV's parameters, name and notes with the elementwise epilogue `binary` (`store`): `ep_in`
    (its other operand) and `ep_out` (its result) after `y`, `_e<kind>` after the name."""
    kind = binary[0]
    y = params[-1]
    params = [*params, Param("ep_in", "float32", y.size, "in", "the epilogue's other operand"),
              Param("ep_out", "float32", y.size, "out", f"y {kind} ep_in")]  # fmt: skip
    return params, f"{name}_e{kind}", f"{notes}, then {kind}"


def _row_stores(n: int, rows: int, warps: int, split: int, rope: tuple[int, int] | None = None,
                pair: Pair | None = None, block_quant: bool = False,
                binary: tuple[str, bool] | None = None, experts: bool = False) -> tuple[list[SharedArray], str, str]:  # fmt: skip
    """(top-level shared arrays, early-exit guard, stores) of a row-group kernel: with `split` 1 each
    warp's lane 0 stores its rows; else the group's warps' parts are summed in warp order through
    shared memory. With `rope` (`(hd, half)`, `gemv_q8`) row r of the group is `rr{r}` and each
    pair's rope goes to `z` after the stores (with `binary`, the rope of the epilogue's result, read
    back as stored). With `pair` (`n` the rows of both matrices) the even rows go to `y`, the odd to `y2`, row `rr{r}` of each, and each pair's epilogue after them, then
    its quantize (`Pair.quant`: a block's pairs counted at once with `block_quant`, whose kernel
    must not return early). With `binary` each store is followed by its elementwise epilogue (`store`).
    With `experts` (`gemv_blocks`' `experts`) a pair's results go to the row `m` of `z0`, ...."""
    groups = warps // split if block_quant and pair and pair.quant else 0
    qf = [SharedArray("_qf", 1, "int32")] if groups else []
    row = (lambda r: f"rr{r}") if rope or pair else (lambda r: f"row0 + {r}")
    out = (lambda r: "y2" if r % 2 else "y") if pair else (lambda r: "y")
    at = (lambda r: f"m * {n // 2} + {row(r)}") if pair else (lambda r: f"m * {n} + {row(r)}")
    stored = lambda r: f"ep_out[{at(r)}]"  # noqa: E731 - the epilogue's result a rope turns
    zbase = f"m * {n // 2} + " if experts else ""
    if split == 1:
        guard = f"    if row0 >= {n}:\n        return\n"
        stores = "\n".join(
            f"    if lane == 0 and row0 + {r} < {n}:\n" + indent(store(out(r), at(r), f"acc{r}", binary), 2) for r in range(rows)
        )
        if rope:
            value = stored if binary else (lambda r: f"acc{r}")
            stores += "\n    if lane == 0:\n" + indent("\n".join(_rope_lines(n, rows, rope[1], value)), 2)
        if pair:
            stores += "\n    if lane == 0:\n" + indent("\n".join(_pair_lines(n, rows, pair, lambda r: f"acc{r}", zbase)), 2)
            if pair.quant:
                stores += "\n" + indent("\n".join(_pair_quant_lines(n // 2, rows, pair.quant, groups)), 1)
        return qf, guard, stores
    keep = "\n".join(f"        red[warp * {rows} + {r}] = acc{r}" for r in range(rows))
    t = (lambda r: f"t{r}") if rope or pair else (lambda r: "t")
    sums = "\n".join(
        f"        {t(r)} = red[grp * {split * rows} + {r}]\n"
        + "".join(f"        {t(r)} = fadd_rn({t(r)}, red[(grp * {split} + {i}) * {rows} + {r}])\n" for i in range(1, split))
        + f"        if row0 + {r} < {n}:\n" + indent(store(out(r), at(r), t(r), binary), 3)
        for r in range(rows)
    )
    if rope:
        sums += "\n" + indent("\n".join(_rope_lines(n, rows, rope[1], stored if binary else t)), 2)
    if pair:
        sums += "\n" + indent("\n".join(_pair_lines(n, rows, pair, t, zbase)), 2)
    stores = f"    if lane == 0:\n{keep}\n    cuda.syncthreads()\n    if lane == 0 and j == 0:\n{sums}"
    if pair and pair.quant and groups:
        stores += "\n" + indent("\n".join(_pair_quant_lines(n // 2, rows, pair.quant, groups)), 1)
    elif pair and pair.quant:
        stores += "\n    if j == 0:\n" + indent("\n".join(_pair_quant_lines(n // 2, rows, pair.quant)), 2)
    return [SharedArray("red", warps * rows, "float32"), *qf], "", stores


@functools.cache
def _dedent1(text: str) -> str:
    return "\n".join(line[4:] if line.startswith("    ") else line for line in text.splitlines())


def _written_out(step_parts, steps: int, tail: int, width: int, lane: str, idx: str) -> tuple[list[str], list[str]]:
    """A warp group's `steps` full steps and its `tail` (pieces `{idx}0`, ... and `{idx}t`) written
    out of any loop as (the weight loads, the rest): the tail's loads under their lane condition after
    zeros (`_zeros`). `step_parts(us, tag)` gives one step's (loads, rest) (`_step_parts`,
    `_step_parts_q8`); the adds are those of the looped steps, in their order."""
    early: list[str] = []
    rest: list[str] = []
    if steps:
        loads, more = step_parts([f"{idx}{u}" for u in range(steps)], "e")
        early += [f"{idx}{u} = {u * width} + {lane}" for u in range(steps)] + loads
        rest += more
    if tail:
        loads, more = step_parts([f"{idx}t"], "t")
        early += _zeros(loads) + [f"{idx}t = {steps * width} + {lane}", f"if {lane} < {tail}:"] + ["    " + ln for ln in loads]
        rest += [f"if {lane} < {tail}:"] + ["    " + ln for ln in more]
    return early, rest


def _zeros(loads: list[str]) -> list[str]:
    """Statements giving the registers `loads` assign zeros of their types first (quants int32,
    scales float32): a load under a condition then leaves every register defined."""
    out = []
    for ln in loads:
        names = ln.split(" = ")[0].split(", ")
        zero = "int32(0)" if names[0].startswith("q") else "float32(0.0)"
        out.append(f"{', '.join(names)} = {', '.join([zero] * len(names))}")
    return out


