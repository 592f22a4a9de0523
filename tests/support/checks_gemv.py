"""Helpers the tests share (from tests/codegen/test_kernels_gemv.py, which imports them from here, as others do)."""

from __future__ import annotations

import gguf
import numpy as np

from fwdshim import reference as R
from fwdshim.codegen import gemv
from fwdshim.int8 import gemv_int8, quantize_act
from fwdshim.weights import dequantize_raw
from support.kernels_common import close, q8_0, rng

F32 = np.float32


def _weights(g, n, k):
    w = g.standard_normal((n, k)).astype(F32)
    w[min(2, n - 1), 32:64] = 0  # an all-zero weight block: gguf gives d = 0
    return w


def _budget(w_abs: np.ndarray, x_abs: np.ndarray) -> np.ndarray:
    """An error budget per output: 2e-5 of Σ|w||x| (float32 accumulation over K terms)."""
    return 2e-5 * (w_abs @ x_abs.T).T + 1e-30


def _kernel(n: int, k: int, m: int, act: str, shape: gemv.Shape | None):
    """The GEMV under test at `shape`, else at its default."""
    return (gemv.q8_0 if act == "f32" else gemv.q8_0_int8)(n, k, m, shape=shape)


def check_q8_0(n: int, k: int, m: int = 1, shape: gemv.Shape | None = None) -> None:
    g = rng()
    w = _weights(g, n, k)
    raw, qs, d = q8_0(w)
    x = g.standard_normal((m, k)).astype(F32)
    x[:, k - 32 :] = 0  # an all-zero activation block
    kern = _kernel(n, k, m, "f32", shape)
    y = kern.run(qs=qs, dw=d, x=x)["y"]
    wq = dequantize_raw(raw, gguf.GGMLQuantizationType.Q8_0).reshape(n, k)
    close(y, R.matmul_q8_0(x, raw), _budget(np.abs(wq), np.abs(x)), f"q8_0 GEMV {n}x{k}")


def check_q8_0_int8(n: int, k: int, m: int = 1, fmt: str = "one_word", shape: gemv.Shape | None = None) -> None:
    g = rng()
    w = _weights(g, n, k)
    _, qs, d = q8_0(w)
    x = g.standard_normal((m, k)).astype(F32)
    x[:, :32] = 0  # an all-zero activation block: d_x = 0
    qx = quantize_act(x, fmt)
    kern = _kernel(n, k, m, "int8", shape)
    y = kern.run(qs=qs, dw=d, xq=qx.q, xd=qx.d)["y"]
    want = gemv_int8(qs, d, qx)
    wq = (qs.reshape(n, -1, 32) * d[..., None]).reshape(n, k)
    close(y, want, _budget(np.abs(wq), np.abs(qx.values())), f"int8 GEMV {n}x{k}")
    close(y, R.matmul(qx, (qs.reshape(n, -1, 32) * d[..., None]).reshape(n, k)), _budget(np.abs(wq), np.abs(qx.values())), "vs executor")


def check_dense(n: int, k: int, dtype: str, warps: int = 2, shape=None) -> None:
    """The dense GEMV of `dtype` rows (bfloat16 as its bits) against the executor: the one-warp
    kernel (`gemv.dense`), or with `shape` the coalesced family's (`gemv.blocks`, `DenseDecoder`)."""
    g = rng()
    w = g.standard_normal((n, k)).astype(F32)
    if dtype == "bfloat16":
        bits = (w.view(np.uint32) >> 16).astype(np.uint16)
        w_eff = (bits.astype(np.uint32) << 16).view(F32)
        arg = bits
    else:
        arg = w.astype(dtype)
        w_eff = arg.astype(F32)
    x = g.standard_normal(k).astype(F32)
    if shape is None:
        y = gemv.dense(n, k, dtype=dtype, warps=warps).run(w=arg, x=x)["y"]
    else:
        ggml = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}[dtype]
        y = gemv.blocks(ggml, n, k, shape=shape).run(wv=arg.reshape(-1), x=x)["y"]
    close(y, R.matmul_dense(x, w_eff), _budget(np.abs(w_eff), np.abs(x)[None]), f"dense {dtype}")
