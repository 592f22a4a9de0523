"""The forward's int8 activation numerics (DESIGN.md §6): quantization and the int8 GEMV, in NumPy.

API (stable; the reference executor and every quantizing kernel's test use it):

- `quantize_act(x, format="one_word") -> QAct`: blocks of `QK = 32` consecutive values along the last
  axis of `x` (float32). Per block: `d = amax / 127` in float32 (`amax` = max |x|), `q = round half
  away from zero (x / d)` in float32 division, clipped to [-127, 127]; an all-zero block has `d = 0`
  and `q = 0` (never NaN). `two_words` also keeps `s = d * Σq` (float32, as ggml's q8_1).
  The last axis need not be a multiple of 32: its last block is partial (`K % 32` values, `amax` over
  those only); `q` keeps the shape of `x` (no padding) and `d`, `s` have `ceil(K/32)` blocks per row.
  Inputs are expected finite (an inf or NaN gives an undefined block).
- `QAct(q, d, s, format)`: `q int8 [..., K]`, `d float32 [..., ceil(K/32)]`, `s` like `d` or None.
  `qact.values(dtype)` gives `d * q` per block (exact in float64).
- `round_half_away(v)`: round half away from zero, exactly (no `v + 0.5` double rounding).
- `gemv_int8(qs_w, d_w, qx) -> float32 [..., N]`:
  `y[n] = Σ_b d_w[n,b] · d_x[b] · Σ_{j∈b} q_w[n,j] q_x[j]` with an int32 dot product per block and
  float64 accumulation over blocks (the kernels accumulate in float32; compare with a tolerance).
  `qs_w int8 [N, K]`, `d_w float32 [N, ceil(K/32)]` (the `repack_q8_0` layout); `qx` a `QAct` of
  rows of K.

Difference from GGML's Q8_0 weight quantizer (`gguf.quants.quantize`): the same `d = amax/127`, but
ggml stores `d` as f16 and computes `q = round(x * (1/d))`, whereas activations keep `d` in float32 and
divide; the quants agree except where `x/d` falls within an ulp of a half-integer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fwdshim.dialects.attributes import QuantFormat
from fwdshim.weights import QK8_0

QK = QK8_0
"""Values per activation block (GGML's Q8_0 block)."""


@dataclass(frozen=True, eq=False)
class QAct:
    """An activation quantized into int8 blocks of 32 along its last axis (see the module docstring)."""

    q: np.ndarray
    d: np.ndarray
    s: np.ndarray | None
    format: QuantFormat

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.q.shape)

    def values(self, dtype=np.float64) -> np.ndarray:
        """`d * q` per block, shape of `q` (exact in float64; float32 rounds the product)."""
        k = self.q.shape[-1]
        d = np.repeat(self.d.astype(dtype), QK, axis=-1)[..., :k]
        return d * self.q.astype(dtype)

    def reshape(self, *shape: int) -> QAct:
        """The same blocks over a new shape whose last axis holds whole rows of blocks."""
        q = self.q.reshape(*shape)
        nb = -(-q.shape[-1] // QK)
        d = self.d.reshape(*q.shape[:-1], nb)
        s = None if self.s is None else self.s.reshape(d.shape)
        return QAct(q, d, s, self.format)


def round_half_away(v: np.ndarray) -> np.ndarray:
    """Round to the nearest integer, halves away from zero (C `roundf`), exactly; same dtype as `v`."""
    t = np.trunc(v)
    frac = np.abs(v - t)  # exact: v and t share their exponent range
    return t + np.where(frac >= 0.5, np.sign(v), 0).astype(v.dtype)


def _blocks(x: np.ndarray) -> tuple[np.ndarray, int]:
    """x `[..., K]` zero-padded to whole blocks and viewed `[..., B, 32]`; returns it and K."""
    k = x.shape[-1]
    pad = -k % QK
    if pad:
        x = np.concatenate([x, np.zeros((*x.shape[:-1], pad), dtype=x.dtype)], axis=-1)
    return x.reshape(*x.shape[:-1], -1, QK), k


def quantize_act(x: np.ndarray, format: QuantFormat | str = QuantFormat.ONE_WORD) -> QAct:
    """Quantize `x` (float32, `[..., K]`, K >= 1) into int8 blocks of 32 (see the module docstring)."""
    format = QuantFormat(format)
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"quantize needs values along a last axis, got shape {list(x.shape)}")
    xb, k = _blocks(x)  # zero padding changes neither amax nor Σq
    amax = np.max(np.abs(xb), axis=-1)
    d = (amax / np.float32(127.0)).astype(np.float32)
    safe = np.where(d == 0, np.float32(1.0), d)
    ratio = (xb / safe[..., None]).astype(np.float32)
    q = np.clip(round_half_away(ratio), -127, 127)
    q = np.where(d[..., None] == 0, 0, q).astype(np.int8)
    s = None
    if format == QuantFormat.TWO_WORDS:
        s = (d * q.astype(np.int32).sum(axis=-1).astype(np.float32)).astype(np.float32)
    return QAct(q.reshape(*x.shape[:-1], -1)[..., :k], d, s, format)


def block_dots(qs_w: np.ndarray, qx: QAct) -> np.ndarray:
    """int32 `Σ_{j∈b} q_w[n,j] q_x[..., j]` per block: `[..., N, B]` for `qs_w [N, K]`, `qx [..., K]`."""
    wb, k = _blocks(np.asarray(qs_w, dtype=np.int8))  # [N, B, 32]
    xb, kx = _blocks(qx.q)  # [..., B, 32]
    if k != kx:
        raise ValueError(f"int8 GEMV: weight rows have {k} values, activation rows {kx}")
    return np.einsum("nbj,...bj->...nb", wb.astype(np.int32), xb.astype(np.int32), dtype=np.int32)


def gemv_int8(qs_w: np.ndarray, d_w: np.ndarray, qx: QAct) -> np.ndarray:
    """The int8-activation GEMV: `y[..., n] = Σ_b d_w[n,b] d_x[..., b] · int32 dot`, float32 `[..., N]`."""
    dots = block_dots(qs_w, qx)
    scale = np.asarray(d_w, dtype=np.float64) * qx.d.astype(np.float64)[..., None, :]
    if scale.shape[-2:] != dots.shape[-2:]:
        blocks = list(dots.shape[-2:])
        raise ValueError(f"int8 GEMV: weight scales {list(d_w.shape)} do not match {blocks} blocks")
    return np.sum(scale * dots, axis=-1).astype(np.float32)
