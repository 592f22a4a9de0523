"""The GEMVs over the GGUF file's own blocks (`codegen.gemv.gemv_blocks` through each type's
`codegen.gemv_decode.AffineDecoder`) and the executor, per weight type:
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
  against the CPU executor (Q4_0..Q5_1, Q8_0, F16, BF16 under dequant and int8-act; K-quants under
  dequant);
- the kernels typed and lowered by Numba's CUDA compiler (no float64 arithmetic).
"""

from __future__ import annotations

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from support.kernels_common import close, fast_simulator, rng  # noqa: F401

from fwdshim import ggml_blocks as G
from fwdshim import reference as R
from fwdshim.codegen import gemv
from fwdshim.codegen.gemv import Shape
from fwdshim.int8 import quantize_act
from fwdshim.weights import WeightData

TYPES = list(G.AFFINE)
SHAPES = {"r2w4u2s1": Shape(16, 2, 4, 2, 1), "r1w2u1s1": Shape(16, 1, 2, 1, 1), "r4w4u1s2": Shape(16, 4, 4, 1, 2),
          "r2w2u3s1": Shape(16, 2, 2, 3, 1)}  # fmt: skip
"""Launch shapes each type's kernel is checked at: the rows a warp group, unrolled steps, split rows
(a row's pieces over two warps summed through shared memory); K = 40 or 37 chunks gives a full
lane step and a partial one (one step: its loads hoisted before the wait) or a partial one alone."""


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


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
def test_dequant_gemv(t, shape):
    g = rng()
    n, m = 5, 2 if t in (QT.Q4_1, QT.Q4_K) else 1
    raw, w, x, k = _case(t, n, m, g)
    want = x.astype(np.float64) @ w.T
    y = gemv.gemv_blocks(n, k, m, "f32", SHAPES[shape], weights=t.name.lower()).run(**G.repack(raw, t), x=x)["y"]
    close(y.reshape(m, n), want, 2e-5 * (np.abs(x) @ np.abs(w).T) + 1e-30, f"{t.name} GEMV")
    ex = R.matmul(x, WeightData("w", G.ggml_of(t), (n, k), raw))
    close(ex, want, 1e-6 * np.abs(want) + 1e-30, f"{t.name} executor")


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
def test_int8_act_gemv(t, shape):
    g = rng()
    n, m = 5, 2 if t in (QT.Q6_K, QT.Q4_0) else 1
    raw, w, x, k = _case(t, n, m, g)
    qx = quantize_act(x, "one_word")
    xq, xd = qx.q.reshape(m, k), qx.d.reshape(m, k // 32)
    want = G.int8_act_dot(raw, t, xq, xd)
    kern = gemv.gemv_blocks(n, k, m, "int8", SHAPES[shape], weights=t.name.lower())
    y = kern.run(**G.repack(raw, t), xq=xq, xd=xd)["y"]
    xv = np.asarray(qx.values(), np.float64).reshape(m, k)
    close(y.reshape(m, n), want, 2e-5 * (np.abs(xv) @ np.abs(w).T) + 1e-30, f"{t.name} int8 GEMV")
    ex = R.matmul(qx, WeightData("w", G.ggml_of(t), (n, k), raw))  # W · (d_x q_x), float64, rounded once
    close(ex, want, 1e-6 * np.abs(want) + 1e-30, f"{t.name} int8 executor")
    close(xv @ w.T, want, 1e-12 * (np.abs(xv) @ np.abs(w).T) + 1e-30, "the block sum is W · (d_x q_x)")


# ---------------------------------------------------------------------------------------------
# a whole step over the file's own types


def _with_blocks(src, dst, blocks: dict):
    """A copy of GGUF `src` with tensors replaced by raw GGML blocks (name -> (uint8 rows, type))."""
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, "llama")
    from fwdshim.frontend.export import copy_metadata

    copy_metadata(r, w)
    for t in r.tensors:
        raw, qt = blocks.get(t.name, (np.asarray(t.data), t.tensor_type))
        w.add_tensor(t.name, raw, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


_LEGACY = {"blk.0.attn_q.weight": QT.Q4_1, "blk.0.attn_k.weight": QT.Q4_0, "blk.0.attn_v.weight": QT.Q5_0,
           "blk.0.attn_output.weight": QT.F16, "blk.0.ffn_gate.weight": QT.Q5_1, "blk.0.ffn_up.weight": QT.Q8_0,
           "blk.0.ffn_down.weight": QT.BF16, "token_embd.weight": QT.Q4_1}  # fmt: skip
_K = {"blk.0.attn_q.weight": QT.Q4_K, "blk.0.attn_k.weight": QT.Q6_K, "blk.0.attn_v.weight": QT.Q5_K,
      "blk.0.attn_output.weight": QT.Q4_0, "blk.0.ffn_gate.weight": QT.Q2_K, "blk.0.ffn_up.weight": QT.Q3_K,
      "blk.0.ffn_down.weight": QT.Q6_K, "token_embd.weight": QT.Q5_K}  # fmt: skip


@pytest.mark.parametrize(
    "mix, numerics", [("legacy", "dequant"), ("legacy", "int8-act"), ("k-quants", "dequant")]
)  # the K-quants' int8 GEMVs: test_int8_act_gemv. Under int8-act the runtime's float32 norm and the
#    executor's float64 one may round an activation quant differently (peer check's note); with these
#    random K blocks one flip moves the logits ~7e-4 (FWDSHIM_SEED=777), past the step's 1e-5
def test_step_of_mixed_types_gpu_vs_executor(tmp_path, monkeypatch, numerics, mix):
    """A one-layer llama whose every matmul reads its own type (Q4_0..Q5_1, Q8_0, F16, BF16; or the
    K-quants, random blocks), `requantize="none"`: GPU runtime (simulator) vs CPU executor, 1e-5."""
    from support.runtime_checks import gpu_steps_match_the_executor

    from fwdshim.frontend.export import random_llama, write_llama
    from fwdshim.frontend.gguf_model import LlamaParams
    from fwdshim.frontend.importer import import_gguf

    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    if mix == "legacy":
        p = LlamaParams(n_layer=1, d=64, ff=64, h=2, kv=1, hd=32, rope_dim=32, rope_base=10000.0, eps=1e-5, vocab=64)
        path = write_llama(tmp_path / "mix.gguf", p, random_llama(p, seed=4), types=_LEGACY)
        want = _LEGACY
    else:  # gguf has no K-quant quantizer: random blocks of each type in a Q8_0 file's place
        p = LlamaParams(n_layer=1, d=256, ff=256, h=1, kv=1, hd=64, rope_dim=64, rope_base=10000.0, eps=1e-5, vocab=32)
        plain = write_llama(tmp_path / "plain.gguf", p, random_llama(p, seed=4))
        g = rng()
        shapes = {"blk.0.attn_q.weight": (64, 256), "blk.0.attn_k.weight": (64, 256), "blk.0.attn_v.weight": (64, 256),
                  "blk.0.attn_output.weight": (256, 64), "blk.0.ffn_gate.weight": (256, 256),
                  "blk.0.ffn_up.weight": (256, 256), "blk.0.ffn_down.weight": (256, 256), "token_embd.weight": (32, 256)}  # fmt: skip
        blocks = {n: (G.random_raw(t, *shapes[n], g, scale=0.004), t) for n, t in _K.items()}
        path = _with_blocks(plain, tmp_path / "kmix.gguf", blocks)
        want = _K
    m = import_gguf(path, requantize="none", context=8)
    assert not m.converted
    assert {n: QT(t.tensor_type) for t in m.reader.tensors if (n := t.name) in want} == want
    gpu_steps_match_the_executor(m, numerics)


_GPU_TYPING = """
import importlib.util, re, sys
if importlib.util.find_spec("_numba_cuda_redirector"):
    import _numba_cuda_redirector  # noqa: F401  (numba.cuda -> numba_cuda, as its .pth does)
try:
    from numba.cuda.compiler import compile_cuda
    from numba.cuda import types
    from numba.core import sigutils
    from numba.cuda import cgutils  # noqa: F401  (the intrinsics need numba-cuda)
except ImportError as e:
    print("SKIP", e); sys.exit(0)
from fwdshim.codegen import gemv
from fwdshim.codegen.gemv import Shape
for ggml in sys.argv[1:]:
    for act in ("f32", "int8"):
        k = gemv.gemv_blocks(64, 512, 2, act, Shape(16, 2, 4, 2, 1), weights=ggml)
        args, _ = sigutils.normalize_signature("(" + ", ".join(p.numba_type for p in k.params) + ",)")
        ir = compile_cuda(k.fn.py_func, types.void, args, cc=(9, 0)).library.get_llvm_str()
        doubles = re.findall(r"\\b(fadd|fmul|fsub|fpext)\\b[^\\n]*double", ir)
        print(k.name, "float64 ops", len(doubles))
"""


def test_kernels_type_for_the_gpu(tmp_path):
    """Numba's CUDA compiler (not the simulator, which infers no types) types and lowers the kernels
    to LLVM IR with no float64 arithmetic; the PTX step needs a CUDA toolkit (the lead's GPU run)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["FWDSHIM_CACHE"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", _GPU_TYPING, "q4_1", "q6_k"], env=env, capture_output=True, text=True, timeout=600)
    if out.stdout.startswith("SKIP"):
        pytest.skip(out.stdout.strip())
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 4 and all(line.endswith("float64 ops 0") for line in lines), out.stdout


def test_a_block_gemv_it_cannot_write_is_a_value_error():
    """Rows not of whole blocks, and the Q8_0-only launch options (an async-copy pipeline, a looping
    grid, a prefetch), name themselves rather than build a wrong kernel."""
    with pytest.raises(ValueError, match="Q4_K rows of 288 values are not whole blocks of 256"):
        gemv.blocks("q4_k", 64, 288)
    for shape in (Shape(16, 2, 4, 1, 1, stages=2), Shape(16, 2, 4, 1, 1, blocks=8), Shape(16, 2, 4, 1, 1, prefetch=True)):
        with pytest.raises(ValueError, match="takes neither a looping grid, a prefetch nor an async-copy pipeline"):
            gemv.gemv_blocks(64, 512, 1, "f32", shape, weights="q4_1")
    with pytest.raises(ValueError, match="4-byte pieces of Q6_K quants"):
        gemv.gemv_blocks(64, 512, 1, "f32", Shape(4, 2, 4, 1, 1), weights="q6_k")
