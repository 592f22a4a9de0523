"""Rope: turn pairs `(i, i + half)` of every `hd`-wide head by one row of angles.

`rope(n, hd, half, block=) -> Kernel`: params `x f32 [n]` (`n/hd` heads of `hd`), `angles f32 [2*half]`
(the cos row then the sin row), `y f32 [n]`:
`y_i = x_i cos_i - x_{i+half} sin_i`, `y_{i+half} = x_i sin_i + x_{i+half} cos_i` (float32, each
product and sum rounded on its own: no FMA), dims from `2*half` on copied (the forward's rope has
`hd == 2*half`). One thread per pair (or copied dim), or `items` of them (a small rope in one block).
"""

from __future__ import annotations

from dataclasses import dataclass

from fwdshim.codegen.kernel import Kernel, KernelSpec, Param, build, factory
from fwdshim.codegen.source import check_block, small_items
from fwdshim.codegen.tuning import DEFAULT, Tuning


@dataclass(frozen=True)
class RopeSpec(KernelSpec):
    """A rope kernel's spec: `heads` heads of `hd` values, pairs `(i, i + half)` turned (what
    `codegen.merge` runs as a GEMV's epilogue, `gemv.rope_variant`)."""

    family = "rope"
    heads: int
    hd: int
    half: int


@factory
def rope(n: int, hd: int, half: int, *, block: int = 128, items: int | None = None, tuning: Tuning = DEFAULT) -> Kernel:
    """The rope kernel (see the module docstring): `items` pairs a thread (default
    `source.small_items`), thread `t` of block `b` taking pairs `b*block*items + t + j*block`, every
    load issued before the first use."""
    check_block(block)
    if hd <= 0 or half <= 0 or 2 * half > hd or n <= 0 or n % hd:
        raise ValueError(f"a rope of {n} values in heads of {hd} with {half} pairs")
    heads = n // hd
    per_head = hd - half  # half pairs plus the copied tail
    total = heads * per_head
    items = items if items is not None else small_items(total, block, 4, tuning=tuning)
    if items < 1:
        raise ValueError(f"a rope of {items} pairs a thread")
    if items == 1:
        body = f"""\
@cuda.jit(cache=True)
def rope_k(x, angles, y):
    t = $gid
    if t >= {total}:
        return
    head = t // {per_head}
    i = t % {per_head}
    o = head * {hd}
    if i < {half}:
        a = x[o + i]
        b = x[o + i + {half}]
        c = angles[i]
        s = angles[{half} + i]
        y[o + i] = fsub_rn(fmul_rn(a, c), fmul_rn(b, s))
        y[o + i + {half}] = fadd_rn(fmul_rn(a, s), fmul_rn(b, c))
    else:
        j = i + {half}
        y[o + j] = x[o + j]
"""
    else:
        # pair i of a head reads x[o + i] and x[o + i + half]; a copied dim j = i + half reads the latter
        loads, math = [f"t0 = $bx * {block * items} + $tx"], []
        for j in range(items):
            if j:
                loads.append(f"t{j} = t0 + {j * block}")
            loads += [
                f"ok{j} = t{j} < {total}",
                f"i{j} = t{j} % {per_head}",
                f"o{j} = (t{j} // {per_head}) * {hd}",
                f"p{j} = ok{j} and i{j} < {half}",
                f"a{j} = x[o{j} + i{j}] if p{j} else float32(0.0)",
                f"b{j} = x[o{j} + i{j} + {half}] if ok{j} else float32(0.0)",
                f"c{j} = angles[i{j}] if p{j} else float32(0.0)",
                f"s{j} = angles[{half} + i{j}] if p{j} else float32(0.0)",
            ]
            math += [
                f"if p{j}:",
                f"    y[o{j} + i{j}] = fsub_rn(fmul_rn(a{j}, c{j}), fmul_rn(b{j}, s{j}))",
                f"    y[o{j} + i{j} + {half}] = fadd_rn(fmul_rn(a{j}, s{j}), fmul_rn(b{j}, c{j}))",
                f"elif ok{j}:",
                f"    y[o{j} + i{j} + {half}] = b{j}",
            ]
        body = "@cuda.jit(cache=True)\ndef rope_k(x, angles, y):\n" + "\n".join("    " + ln for ln in loads + math) + "\n"
    params = [
        Param("x", "float32", n, "in", f"[{heads}, {hd}]"),
        Param("angles", "float32", 2 * half, "in", f"[2, {half}] cos row, sin row"),
        Param("y", "float32", n, "out", f"[{heads}, {hd}]"),
    ]
    grid = (-(-total // (block * items)),)
    return build(f"rope_{heads}x{hd}_h{half}", body, "rope_k", grid, (block,), params, f"rope of {heads} heads of {hd}", pdl=tuning.pdl,
                 spec=RopeSpec(heads, hd, half))
