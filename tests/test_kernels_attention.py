"""Rope and single-query GQA attention (codegen.rope, codegen.attention) against the reference
executor: GQA ratios 1, 3, 4 and 8, an empty cache (the first token), a full cache, heads not a
multiple of 32 wide, and the quantize epilogue (attn_output_quant) bit for bit against
`numerics.quantize_act` of the kernel's own output."""

from __future__ import annotations

import numpy as np
import pytest
from kernels_common import bits_equal, close, fast_simulator, rng  # noqa: F401

from fwdshim import reference as R
from fwdshim.codegen import attention, rope
from fwdshim.numerics import quantize_act

F32 = np.float32


def check_attention(h: int, kv: int, hd: int, l: int, c: int, quant: str | None = None, block: int = 32) -> None:
    g = rng()
    q = g.standard_normal(h * hd).astype(F32)
    k = g.standard_normal(kv * hd).astype(F32)
    v = g.standard_normal(kv * hd).astype(F32)
    kc = g.standard_normal((l - 1, kv * hd)).astype(F32)
    vc = g.standard_normal((l - 1, kv * hd)).astype(F32)
    kern = attention.attention(h, kv, hd, l, quant=quant, store_y=True, block=block)
    out = kern.run(q=q, k=k, v=v, k_cache=kc, v_cache=vc, pos=np.array([c], np.int32))
    want = R.attention(q, k, v, kc[:c], vc[:c], h, kv, hd)
    close(out["y"], want, 2e-6 * (1 + np.abs(want)) * np.sqrt(hd), f"attention h={h} kv={kv} c={c}")
    if quant:
        ref = quantize_act(out["y"], quant)
        bits_equal(out["yq"], ref.q, "attention quant q")
        bits_equal(out["yd"], ref.d, "attention quant d")
        if quant == "two_words":
            bits_equal(out["ys"], ref.s, "attention quant s")


@pytest.mark.parametrize("ratio", [1, 3, 4, 8])
def test_gqa_ratios(ratio):
    check_attention(h=2 * ratio, kv=2, hd=32, l=6, c=4)


def test_first_token_empty_cache():
    check_attention(h=2, kv=1, hd=32, l=5, c=0)


def test_full_cache_and_narrow_heads():
    check_attention(h=4, kv=2, hd=40, l=7, c=6, block=64)


@pytest.mark.parametrize("fmt", ["one_word", "two_words"])
def test_attention_output_quant(fmt):
    check_attention(h=4, kv=2, hd=64, l=4, c=3, quant=fmt)


def test_attention_bounds():
    attention.attention(1, 1, 32, 12256)  # 4*l + 128 == 48 KiB: fits
    with pytest.raises(ValueError, match="48 KiB"):
        attention.attention(1, 1, 32, 12257)
    with pytest.raises(ValueError, match="whole 32-value blocks"):
        attention.attention(2, 1, 40, 8, quant="one_word")
    k = attention.attention(32, 8, 128, 4096)
    assert k.grid == (32,) and "cuda.shared.array(4096, float32)" in k.source
    assert k.param_names == ("q", "k", "v", "k_cache", "v_cache", "pos", "y")


def check_rope(heads: int, hd: int, half: int, pos: float = 7.0) -> None:
    x = rng().standard_normal(heads * hd).astype(F32)
    ang = R.rope_angles(pos, half, hd=hd)
    y = rope.rope(heads * hd, hd, half, block=64).run(x=x, angles=ang.ravel())["y"]
    want = R.rope(x, ang, hd, half)
    close(y, want, 4e-7 * (1 + np.abs(want)), "rope")


@pytest.mark.parametrize("hd,half", [(64, 32), (48, 16)])
def test_rope(hd, half):
    check_rope(3, hd, half)
