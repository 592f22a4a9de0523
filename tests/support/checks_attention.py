"""Helpers the tests share (from tests/codegen/test_kernels_attention.py, which imports them from here, as others do)."""

from __future__ import annotations

import numpy as np

from fwdshim import reference as R
from fwdshim.codegen import attention, rope
from fwdshim.int8 import quantize_act
from support.kernels_common import bits_equal, close, rng

F32 = np.float32


def check_attention(
    h: int, kv: int, hd: int, l: int, c: int, quant: str | None = None, block: int | None = 32, unroll: int | None = None,
    splits: int | None = None,
) -> None:  # fmt: skip
    g = rng()
    q = g.standard_normal(h * hd).astype(F32)
    k = g.standard_normal(kv * hd).astype(F32)
    v = g.standard_normal(kv * hd).astype(F32)
    kc = g.standard_normal((l - 1, kv * hd)).astype(F32)
    vc = g.standard_normal((l - 1, kv * hd)).astype(F32)
    kern = attention.attention(h, kv, hd, l, quant=quant, store_y=True, block=block, unroll=unroll, splits=splits)
    given = dict(q=q, k=k, v=v, k_cache=kc, v_cache=vc, pos=np.array([c], np.int32))
    out = kern.run(**given)
    want = R.attention(q, k, v, kc[:c], vc[:c], h, kv, hd)
    close(out["y"], want, 2e-6 * (1 + np.abs(want)) * np.sqrt(hd), f"attention h={h} kv={kv} c={c}")
    if "count" in out:
        assert not out["count"].any(), "the last split of each head leaves its count at zero"
    if quant:
        ref = quantize_act(out["y"], quant)
        bits_equal(out["yq"], ref.q, "attention quant q")
        bits_equal(out["yd"], ref.d, "attention quant d")
        if quant == "two_words":
            bits_equal(out["ys"], ref.s, "attention quant s")
        only = attention.attention(h, kv, hd, l, quant=quant, store_y=False, block=block, unroll=unroll, splits=splits).run(**given)
        for part in ("yq", "yd", "ys") if quant == "two_words" else ("yq", "yd"):
            bits_equal(only[part], out[part], f"attention quant-only {part}")  # fused: EXACT


def check_rope(heads: int, hd: int, half: int, pos: float = 7.0, items: int | None = None) -> np.ndarray:
    x = rng().standard_normal(heads * hd).astype(F32)
    ang = R.rope_angles(pos, half, hd=hd)
    y = rope.rope(heads * hd, hd, half, block=64, items=items).run(x=x, angles=ang.ravel())["y"]
    want = R.rope(x, ang, hd, half)
    close(y, want, 4e-7 * (1 + np.abs(want)), "rope")
    return y
