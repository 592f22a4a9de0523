"""Helpers the tests share (from tests/codegen/test_lowering_plan.py, which imports them from here, as others do)."""

from __future__ import annotations


def attentions_src(n: int, shared: bool = False) -> str:
    """`n` attentions of 2 heads of 32 over 3 cache rows, each over its own caches (or all over one)."""
    t, c = "tensor<32xf32>", "tensor<3x32xf32>"
    caches = ["%kc0", "%vc0"] if shared else [f"%{x}c{i}" for i in range(n) for x in "kv"]
    args = ", ".join([f"%q: tensor<64xf32>, %k: {t}, %v: {t}", *(f"{a}: {c}" for a in caches)])
    ops = "".join(
        f"  %a{i} = fwd.attention %q, %k, %v, %kc{0 if shared else i}, %vc{0 if shared else i} "
        f"h 2 kv 1 hd 32 vd 32 l 4 rows 1 : tensor<64xf32>, {t}, {t}, {c}, {c} -> tensor<64xf32>\n"
        for i in range(n)
    )
    rets = ", ".join(f"%a{i}" for i in range(n))
    return f"""\
func.func @f({args}) -> ({", ".join(["tensor<64xf32>"] * n)}) {{
{ops}  func.return {rets} : {", ".join(["tensor<64xf32>"] * n)}
}}
"""
