"""Activation quantization: the quantize stage (`fwd.quantize`, both formats) and the epilogue text
that the norm and attention kernels append to quantize their own result (`one_word` or `two_words`).

Numerics (DESIGN.md §6, `fwdshim.int8.quantize_act`, bit for bit): blocks of 32 consecutive
values along a row of `n`; per block `d = amax / 127` (float32 division), `q = round half away from
zero (x / d)` (float32 division, `roundf`), clamped to [-127, 127]; an all-zero block has `d = 0`,
`q = 0` (never NaN). `two_words` also keeps `s = d · Σq` (float32, as ggml's q8_1). A row whose length
is not a multiple of 32 ends in a partial block (its `amax` over the values present).

A quantized activation (`!fwd.qact<N, format>`) is held in separate 1-D arrays: `q int8 [rows*n]`,
`d float32 [rows*nb]` and, for `two_words`, `s float32 [rows*nb]`, with `nb = ceil(n/32)` blocks per
row — the layout of `numerics.QAct` flattened.

`quantize(n, rows, format) -> Kernel`: params `x f32 [rows*n]`, `q`, `d` (, `s`); one warp per block
of 32 (or `items` blocks of 32 a warp: a small row in one CUDA block), `block` threads per CUDA block.
"""

from __future__ import annotations

from dataclasses import dataclass

from fwdshim.codegen.kernel import Kernel, KernelSpec, Param, build, factory
from fwdshim.codegen.source import check_block, indent, small_items
from fwdshim.codegen.tuning import DEFAULT, Tuning
from fwdshim.weights import QK8_0

QK = QK8_0
FORMATS = ("one_word", "two_words")


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"quantize format `{fmt}` is not one of {', '.join(FORMATS)}")
    return fmt


def qact_params(n: int, rows: int, fmt: str, prefix: str = "") -> list[Param]:
    """The output parameters of a quantized activation of `rows` rows of `n` (see the module doc)."""
    nb = -(-n // QK)
    params = [
        Param(f"{prefix}q", "int8", rows * n, "out", f"int8 quants [{rows}, {n}]"),
        Param(f"{prefix}d", "float32", rows * nb, "out", f"block scales [{rows}, {nb}]"),
    ]
    if fmt == "two_words":
        params.append(Param(f"{prefix}s", "float32", rows * nb, "out", f"block d·Σq [{rows}, {nb}]"))
    return params


def epilogue(v: str, qi: str, valid: str, bi: str, bvalid: str, fmt: str, prefix: str = "") -> str:
    """Statements quantizing `v`, the value of element `qi` of `q`, where the 32 lanes of each warp
    hold the 32 values of one block (`bi` its index in `d`). `valid`: this lane's element exists;
    `bvalid`: the block exists. Every lane of the warp must run them (warp reductions)."""
    q, d, s = f"{prefix}q", f"{prefix}d", f"{prefix}s"
    text = f"""\
_amax = warp_max(abs({v}) if {valid} else float32(0.0))
_dq = fdiv_rn(_amax, float32(127.0))
_qv = float32(0.0)
if _dq != float32(0.0):
    _qv = min(max(roundf(fdiv_rn({v}, _dq)), float32(-127.0)), float32(127.0))
if {valid}:
    {q}[{qi}] = int8(_qv)
"""
    if fmt == "two_words":
        text += f"_qsum = warp_isum(int32(_qv) if {valid} else int32(0))\n"
    text += f"if lane == 0 and {bvalid}:\n    {d}[{bi}] = _dq\n"
    if fmt == "two_words":
        text += f"    {s}[{bi}] = fmul_rn(_dq, float32(_qsum))\n"
    return text


@dataclass(frozen=True)
class QuantizeSpec(KernelSpec):
    """A quantize kernel's spec: `rows` rows of `n` values into int8 blocks of 32 in format `fmt`
    (what `codegen.merge` runs after a GEMV pair's epilogue, `gemv.Pair.quant`)."""

    family = "quantize"
    n: int
    rows: int
    fmt: str


@factory
def quantize(n: int, rows: int = 1, fmt: str = "one_word", block: int = 256, items: int | None = None, *, tuning: Tuning = DEFAULT) -> Kernel:
    """The quantize stage over `rows` rows of `n` float32 values (see the module docstring).

    Grid: `(ceil(rows*nb / (warps*items)),)`, each warp quantizing `items` blocks of 32 (default
    `source.small_items` of the 32·rows·nb lanes: a small row in one CUDA block, every load issued
    first), warp `w` of CUDA block `b` taking blocks `(b*items + j)*warps + w`."""
    check_format(fmt)
    check_block(block)
    if n <= 0 or rows <= 0:
        raise ValueError(f"quantize of {rows} rows of {n} values")
    nb = -(-n // QK)
    warps = block // 32
    total = rows * nb
    items = items if items is not None else small_items(32 * total, block, tuning=tuning)
    if items < 1:
        raise ValueError(f"quantize of {items} blocks a warp")
    outs = ", ".join(p.name for p in qact_params(n, rows, fmt))
    loads, quants = [], []
    for j in range(items):
        loads += [
            f"gb{j} = ($bx * {items} + {j}) * {warps} + $tx // 32",
            f"col{j} = (gb{j} % {nb}) * 32 + lane",
            f"ok{j} = gb{j} < {total} and col{j} < {n}",
            f"qi{j} = (gb{j} // {nb}) * {n} + col{j}",
            f"v{j} = x[qi{j}] if ok{j} else float32(0.0)",
        ]
        quants.append(f"if gb{j} < {total}:\n" + indent(epilogue(f"v{j}", f"qi{j}", f"ok{j}", f"gb{j}", "True", fmt), 1))
    body = f"""\
@cuda.jit(cache=True)
def quantize_k(x, {outs}):
    lane = $tx % 32
{indent(chr(10).join(loads + quants), 1)}
"""
    grid = (-(-total // (warps * items)),)
    params = [Param("x", "float32", rows * n, "in", f"activations [{rows}, {n}]"), *qact_params(n, rows, fmt)]
    return build(
        f"quantize_{fmt}_{rows}x{n}", body, "quantize_k", grid, (block,), params,
        f"int8 blocks of 32 ({fmt}) of {rows} rows of {n}",
     pdl=tuning.pdl, spec=QuantizeSpec(n, rows, fmt))  # fmt: skip
