"""The GEMVs over the GGUF file's own blocks (codegen.gemv_ggml) and the executor, per weight type:
Q4_0, Q4_1, Q5_0, Q5_1 (gguf's own quantizer), Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (random blocks with finite
f16 scales: gguf only reads those). Each against gguf's dequantizer times the activation in float64:

- the load-time repack (`ggml_blocks.repack`) holds exactly gguf's values: `sc · q + mn` == dequantize,
  with `sc`, `mn` formed from the repacked f16/int8 scales by the kernels' own statements;
- dequant: kernel (simulator) and executor vs `W_gguf · x`; the kernel within 2e-5 · Σ|w||x| per
  output (float32 sums over K), the executor within 1e-6 relative (float64, one float32 rounding);
- int8-act: the activation quantized in blocks of 32 (`numerics.quantize_act`); the kernel vs the
  literal block sum `ggml_blocks.int8_act_dot` (float64, exact integer sums) within 2e-5 · Σ|w||d_x q_x|,
  and the executor (`W · (d_x q_x)` in float64) equal to that sum within 1e-12 relative;
- the whole step of a small llama of mixed types, `--requantize none`: the GPU runtime (simulator)
  against the CPU executor under dequant and int8-act.
"""

from __future__ import annotations

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from kernels_common import close, fast_simulator, rng  # noqa: F401

from fwdshim import ggml_blocks as G
from fwdshim import reference as R
from fwdshim.codegen import gemv_ggml
from fwdshim.int8 import quantize_act
from fwdshim.weights import WeightData

TYPES = list(G.AFFINE)


def _case(t: QT, n: int, m: int, g):
    k = 256 * 5 if G._UNPACK[t][1] == 256 else 32 * 37  # 40 / 37 chunks: a partial second lane step
    raw = G.random_raw(t, n, k, g)
    w = gguf.quants.dequantize(raw, t).astype(np.float64).reshape(n, k)
    x = g.standard_normal((m, k)).astype(np.float32)
    x[:, :32] = 0  # an all-zero activation chunk (d_x = 0 under int8-act)
    return raw, w, x, k


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
def test_repack_holds_gguf_values(t):
    g = rng()
    raw = G.random_raw(t, 3, 512, g)
    q, sc, mn = G.unpack(raw, t)
    np.testing.assert_array_equal(G.affine_values(q, sc, mn), gguf.quants.dequantize(raw, t))
    assert q.max() < 2 ** (4 + G.AFFINE[t][0])
    parts = G.repack(raw, t)
    assert [(k, str(v.dtype), v.size) for k, v in parts.items()] == G.part_specs(t, 3, 512)
    # the kernels' own scale statements give gguf's sub-block scales and offsets, bit for bit
    sc2, mn2 = G.layout_scales(parts, t)
    np.testing.assert_array_equal(sc2, sc.reshape(-1))
    np.testing.assert_array_equal(mn2, mn.reshape(-1))
    # the nibbles and bit planes read back, as the kernels read them, to the same quants
    np.testing.assert_array_equal(G.layout_quants(parts, t), q.reshape(-1))


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
def test_dequant_gemv(t):
    g = rng()
    n, m = 5, 2 if t in (QT.Q4_1, QT.Q4_K) else 1
    raw, w, x, k = _case(t, n, m, g)
    want = x.astype(np.float64) @ w.T
    y = gemv_ggml.affine(n, k, m, ggml=t.name.lower(), warps=2).run(**G.repack(raw, t), x=x)["y"]
    close(y.reshape(m, n), want, 2e-5 * (np.abs(x) @ np.abs(w).T) + 1e-30, f"{t.name} GEMV")
    ex = R.matmul(x, WeightData("w", G.ggml_of(t), (n, k), raw))
    close(ex, want, 1e-6 * np.abs(want) + 1e-30, f"{t.name} executor")


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
def test_int8_act_gemv(t):
    g = rng()
    n, m = 5, 2 if t in (QT.Q6_K, QT.Q4_0) else 1
    raw, w, x, k = _case(t, n, m, g)
    qx = quantize_act(x, "one_word")
    xq, xd = qx.q.reshape(m, k), qx.d.reshape(m, k // 32)
    want = G.int8_act_dot(raw, t, xq, xd)
    y = gemv_ggml.affine(n, k, m, ggml=t.name.lower(), act="int8", warps=2).run(**G.repack(raw, t), xq=xq, xd=xd)["y"]
    xv = np.asarray(qx.values(), np.float64).reshape(m, k)
    close(y.reshape(m, n), want, 2e-5 * (np.abs(xv) @ np.abs(w).T) + 1e-30, f"{t.name} int8 GEMV")
    ex = R.matmul(qx, WeightData("w", G.ggml_of(t), (n, k), raw))  # W · (d_x q_x), float64, rounded once
    close(ex, want, 1e-6 * np.abs(want) + 1e-30, f"{t.name} int8 executor")
    close(xv @ w.T, want, 1e-12 * (np.abs(xv) @ np.abs(w).T) + 1e-30, "the block sum is W · (d_x q_x)")


# ---------------------------------------------------------------------------------------------
# a whole step over the file's own types


@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
def test_step_of_mixed_types_gpu_vs_executor(tmp_path, monkeypatch, numerics):
    from fwdshim.frontend.export import random_llama, write_llama
    from fwdshim.frontend.gguf_model import LlamaParams
    from fwdshim.frontend.importer import import_gguf
    from fwdshim.tools.runner import Decoder, GpuForward, compile_step

    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    p = LlamaParams(n_layer=1, d=64, ff=64, h=2, kv=1, hd=32, rope_dim=32, rope_base=10000.0, eps=1e-5, vocab=64)
    types = {"blk.0.attn_q.weight": QT.Q4_1, "blk.0.attn_k.weight": QT.Q4_0, "blk.0.attn_v.weight": QT.Q5_0,
             "blk.0.attn_output.weight": QT.Q5_1, "blk.0.ffn_gate.weight": QT.Q4_1, "blk.0.ffn_up.weight": QT.Q8_0,
             "blk.0.ffn_down.weight": QT.Q4_0, "token_embd.weight": QT.Q4_1}  # fmt: skip
    path = write_llama(tmp_path / "mix.gguf", p, random_llama(p, seed=4), types=types)
    m = import_gguf(path, requantize="none", context=8)
    assert not m.converted
    cpu = Decoder(m, numerics, "cpu")
    gpu = GpuForward(compile_step(m, numerics), m)
    embd = m.weights.get("token_embd.weight")
    for pos, tok in enumerate((3, 9)):
        want = cpu.step(tok)
        got = gpu.step(embd.rows(tok).reshape(-1), cpu.angles(pos), pos)
        assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-5
