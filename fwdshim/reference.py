"""The NumPy reference executor of the `fwd` dialect: the oracle of every kernel test and the CPU path.

API (stable):

- `execute(func, inputs, weights, *, entry=None) -> list` runs a `func.func` (or the function `entry`,
  or the only function, of a `ModuleOp`) and returns the values of its `func.return`, in order.
  `inputs`: a list in argument order, or a dict keyed by the arguments' names (`%x` -> `"x"`);
  float32 arrays of the declared shape (any shape of as many values is reshaped), except that a rank-2
  argument (an attention cache) may have fewer rows than declared: the rows written so far, maybe 0.
  `weights`: a `WeightStore` (`fwdshim.weights`); `fwd.weight "name"` is looked up there and its
  shape checked against the declared type. Outputs are float32 arrays of the declared shapes, or
  `QAct` (`fwdshim.int8`) for a returned `!fwd.qact`.
- `execute_op(op, operand_values, weights=None) -> list`: one op (a stage, `fwd.weight` or a
  `fwd.fused` with its region) on values given in operand order; one value per result.
- Per-op functions on arrays, for kernel tests: `rms_norm`, `layer_norm`, `softmax`, `silu`,
  `transpose`, `elementwise`, `rope`, `rope_angles`, `attention`, `moe`, `moe_route`, `matmul`,
  `matmul_dense`, `matmul_q8_0`, `matmul_int8act`, `quantize`, `view`, `softcap`.

Numerics: inputs are float32; results are float32, computed in float64 from the float32 inputs (row
sums, dot products, softmax and attention sums accumulate in float64) and rounded once, except the
elementwise ops, which are single float32 operations. Matmuls read the weight dequantized by gguf
(`WeightData.f64`, cached in the store). A matmul whose `x` is a `QAct` (from `fwd.quantize`) has the
int8 GEMV's semantics, `Σ_b d_w d_x Σ q_w q_x`: the executor computes it as `W · (d_x q_x)` in
float64, which is the same sum (`d_w q_w` and `d_x q_x` are exact in float64) re-associated;
`matmul_int8act` computes the literal int32 block form (`numerics.gemv_int8`) for kernel tests.
The same holds for the other block types the GEMVs read (`fwdshim.ggml_blocks`: Q4_0 ... Q6_K, values
`sc · q + mn` per sub-block): their int8 GEMV computes `Σ_sub sc d_x Σ q q_x + mn d_x Σ q_x` (llama.cpp's
MMVQ over a Q8_0-style activation), which is again `W · (d_x q_x)` re-associated
(`ggml_blocks.int8_act_dot` is the literal block form).

Semantics (DESIGN.md §3, §6): rows are the last axis. `rms_norm`: `h = x (+ residual)` (the sum in
float32), `y = h / sqrt(mean(h²) + eps) (* weight) (+ bias)`; `layer_norm`: `(h - mean)/sqrt(var +
eps)` likewise; `softmax`: `exp(h - max) / Σ` likewise; `eps` absent means `DEFAULT_EPS`. `rope`
turns pairs `(i, i+half)` of each `hd`-wide head by angles `[2, half]` (cos row, sin row); `hd >
2*half` leaves the tail of each head as is. `attention`: one query row, GQA (query head `j` reads kv
head `j // (h // kv)`), keys the cache rows then the current `k`, scale `1/√hd` unless given,
optional soft cap `c·tanh(s/c)`. `moe`: softmax router, top-k (ties: the lower expert index),
renormalized kept weights, SwiGLU experts, weighted sum. `fwd.view`: `offset` values into the
flattened input, as many as the result holds. `access` and `into` change no value and are ignored.

Refusals: an op or a field the executor does not compute (the generic primitives, `fwd.gated_delta`,
an attention's `pos`/`window`/`sinks`/`rows`, a rope's `from`/`rows`, a MoE other than softmax-routed
SwiGLU without biases, activations of values other than float32) raises `NotImplementedError` naming the
op, its location and the field. Malformed inputs (missing weights, wrong shapes, complex or non-numeric
arrays) raise `ValueError` or `MissingWeight`; so does an op whose sizes verify but cannot be computed
(an attention of `kv 0`, which legality refuses), named with its location.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
from gguf import GGMLQuantizationType as QT
from xdsl.dialects.builtin import Float32Type, ModuleOp, TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Operation, SSAValue

from fwdshim.diagnostics import where
from fwdshim.dialects import fwd
from fwdshim.dialects.attributes import QActType, QuantFormat, WeightsType
from fwdshim.int8 import QAct, gemv_int8, quantize_act
from fwdshim.weights import WeightData, WeightStore, dequantize_raw, repack_q8_0

DEFAULT_EPS = fwd.DEFAULT_EPS

Value = np.ndarray | QAct | WeightData
F32, F64 = np.float32, np.float64


# ---------------------------------------------------------------------------------------------
# row reductions


def _pre(x, residual) -> np.ndarray:
    h = np.asarray(x, dtype=F32)
    if residual is not None:
        h = h + np.asarray(residual, dtype=F32).reshape(h.shape)
    return h.astype(F64)


def _post(y: np.ndarray, weight, bias) -> np.ndarray:
    if weight is not None:
        y = y * np.asarray(weight, dtype=F64).reshape(y.shape[-1])
    if bias is not None:
        y = y + np.asarray(bias, dtype=F64).reshape(y.shape[-1])
    return y.astype(F32)


def _check_eps(eps: float) -> None:
    """ValueError unless `eps` is finite and >= 0 (as the IR verifier requires)."""
    if not np.isfinite(eps) or eps < 0:
        raise ValueError(f"eps {eps}: a finite value >= 0")


def rms_norm(x, weight=None, residual=None, bias=None, eps: float = DEFAULT_EPS) -> np.ndarray:
    """Row-wise RMS norm of `x (+ residual)`, `(* weight) (+ bias)`; float32 of x's shape.
    Raises: ValueError for an eps that is negative or not finite (the IR verifier's rule)."""
    _check_eps(eps)
    h = _pre(x, residual)
    return _post(h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + float(F32(eps))), weight, bias)


def layer_norm(x, weight=None, residual=None, bias=None, eps: float = DEFAULT_EPS) -> np.ndarray:
    """Row-wise layer norm (population variance) of `x (+ residual)`, `(* weight) (+ bias)`.
    Raises: ValueError for an eps that is negative or not finite."""
    _check_eps(eps)
    h = _pre(x, residual)
    c = h - np.mean(h, axis=-1, keepdims=True)
    return _post(c / np.sqrt(np.mean(c * c, axis=-1, keepdims=True) + float(F32(eps))), weight, bias)


def _softmax64(h: np.ndarray) -> np.ndarray:
    e = np.exp(h - np.max(h, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def softmax(x, weight=None, residual=None, bias=None, eps: float | None = None) -> np.ndarray:
    """Row-wise softmax of `x (+ residual)`, `(* weight) (+ bias)`; `eps` is ignored."""
    return _post(_softmax64(_pre(x, residual)), weight, bias)


# ---------------------------------------------------------------------------------------------
# elementwise


def silu(x) -> np.ndarray:
    """`x * sigmoid(x)`, float32."""
    h = np.asarray(x, dtype=F64)
    with np.errstate(over="ignore"):
        return (h / (1.0 + np.exp(-h))).astype(F32)


def softcap(x, cap: float) -> np.ndarray:
    """`cap * tanh(x / cap)`, float32. Raises: ValueError unless `cap` is finite and > 0."""
    if not np.isfinite(cap) or cap <= 0:
        raise ValueError(f"cap {cap}: a finite value > 0")
    return (cap * np.tanh(np.asarray(x, dtype=F64) / cap)).astype(F32)


def transpose(x) -> np.ndarray:
    """The transpose of a 2-D array (a rank-1 array is returned as is), float32."""
    return np.ascontiguousarray(np.asarray(x, dtype=F32).T)


_ELEMENTWISE: dict[str, Callable] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "max": np.maximum, "min": np.minimum,
}  # fmt: skip


def elementwise(kind: str, a, b, row: bool = False) -> np.ndarray:
    """`a kind b` per index in float32; with `row`, the smaller operand is one row combined with every
    row of the other (its size divides the other's); the result has the larger operand's shape."""
    fn = _ELEMENTWISE[kind]
    a, b = np.asarray(a, dtype=F32), np.asarray(b, dtype=F32)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if a.size == b.size:
            return fn(a, b.reshape(a.shape))
        if not row:
            raise ValueError(f"elementwise {kind} over {a.size} and {b.size} values without `row`")
        block, line = (a, b) if a.size > b.size else (b, a)
        if block.size % line.size:
            raise ValueError(f"elementwise {kind}: a row of {line.size} does not tile {block.size} values")
        rows = block.reshape(-1, line.size)
        out = fn(rows, line.ravel()) if block is a else fn(line.ravel(), rows)
        return out.reshape(block.shape)


# ---------------------------------------------------------------------------------------------
# rope


def rope_angles(
    pos: float, half: int, base: float = 10000.0, hd: int | None = None, factors: Sequence[float] | None = None
) -> np.ndarray:
    """Angles of position `pos`: float32 `[2, half]`, row 0 `cos θ_i`, row 1 `sin θ_i`, with
    `θ_i = pos · base^(-2i/hd) / f_i` (`hd` defaults to `2*half`: standard Llama/NeoX; `factors` the
    `f_i`, default 1: llama.cpp's rope `freq_factors`, Llama 3.1's `rope_freqs.weight`), in float64."""
    hd = 2 * half if hd is None else hd
    theta = float(pos) * np.power(float(base), -2.0 * np.arange(half, dtype=F64) / hd)
    if factors is not None:
        theta = theta / np.asarray(factors, dtype=F64).reshape(half)
    return np.stack([np.cos(theta), np.sin(theta)]).astype(F32)


def rope(x, angles, hd: int, half: int, rows: int = 1) -> np.ndarray:
    """Turn pairs `(i, i+half)` of every `hd`-wide head of `x` by `angles [2, half]`:
    `y_i = x_i cos_i - x_{i+half} sin_i`, `y_{i+half} = x_i sin_i + x_{i+half} cos_i`; dims from
    `2*half` on are copied. Float32 of x's shape."""
    if rows != 1:
        raise NotImplementedError("rope with `rows` other than 1 (a table row per query row)")
    x = np.asarray(x, dtype=F32)
    if x.size % hd or 2 * half > hd:
        raise ValueError(f"rope: {x.size} values are not heads of {hd} with {half} pairs")
    ang = np.asarray(angles, dtype=F64).reshape(2, half)
    cos, sin = ang[0], ang[1]
    heads = x.reshape(-1, hd).astype(F64)
    lo, hi = heads[:, :half], heads[:, half : 2 * half]
    out = heads.copy()
    out[:, :half] = lo * cos - hi * sin
    out[:, half : 2 * half] = lo * sin + hi * cos
    return out.astype(F32).reshape(x.shape)


# ---------------------------------------------------------------------------------------------
# attention


def attention(
    q, k, v, k_cache, v_cache, h: int, kv: int, hd: int, vd: int | None = None,
    scale: float | None = None, softcap: float | None = None,
) -> np.ndarray:  # fmt: skip
    """Single-query GQA attention; float32 `[h*vd]`.

    q `[h*hd]`, k `[kv*hd]`, v `[kv*vd]`, caches `[c, kv*hd]`, `[c, kv*vd]` with any `c >= 0` rows
    (the positions written so far). Query head `j` reads kv head `j // (h // kv)`; keys are the `c`
    cache rows then `k`; `scores = q·key * scale` (default `1/√hd`), soft-capped if asked;
    softmax over the `c+1` positions; `out = Σ p v`."""
    vd = hd if vd is None else vd
    if kv <= 0 or h % kv:
        raise ValueError(f"attention: {h} query heads do not group over {kv} kv heads")
    g = h // kv
    kc = np.asarray(k_cache, dtype=F32).reshape(-1, kv * hd)
    vc = np.asarray(v_cache, dtype=F32).reshape(-1, kv * vd)
    if kc.shape[0] != vc.shape[0]:
        raise ValueError(f"attention: k_cache has {kc.shape[0]} rows, v_cache {vc.shape[0]}")
    keys = np.concatenate([kc, np.asarray(k, dtype=F32).reshape(1, kv * hd)]).astype(F64)
    vals = np.concatenate([vc, np.asarray(v, dtype=F32).reshape(1, kv * vd)]).astype(F64)
    keys = keys.reshape(-1, kv, hd).transpose(1, 2, 0)  # [kv, hd, t]
    vals = vals.reshape(-1, kv, vd).transpose(1, 0, 2)  # [kv, t, vd]
    qh = np.asarray(q, dtype=F64).reshape(kv, g, hd)
    scores = (qh @ keys) * (1.0 / np.sqrt(hd) if scale is None else float(scale))  # [kv, g, t]
    if softcap is not None:
        scores = softcap * np.tanh(scores / softcap)
    return (_softmax64(scores) @ vals).reshape(h * vd).astype(F32)


# ---------------------------------------------------------------------------------------------
# matmul


def _as64(x) -> np.ndarray:
    """An activation (array or `QAct`) as float64 values."""
    if isinstance(x, QAct):
        return x.values(F64)
    return np.asarray(x, dtype=F32).astype(F64)


def _dense64(w) -> np.ndarray:
    """A weight (`WeightData` or a float array) as float64 values."""
    if isinstance(w, WeightData):
        return w.f64
    return np.asarray(w, dtype=F32).astype(F64)


def matmul(x, w) -> np.ndarray:
    """`y[..., n] = Σ_k W[n,k] x[..., k]`, float32; x an array `[K]`/`[R, K]` or a `QAct` (the int8
    GEMV's sum, see the module docstring); w a `WeightData` (dequantized by gguf) or a float array."""
    wm = _dense64(w)
    if wm.ndim != 2:
        raise ValueError(f"matmul weight has shape {list(wm.shape)}, not [N, K]")
    xv = _as64(x)
    if xv.shape[-1] != wm.shape[1]:
        raise ValueError(f"matmul: x rows of {xv.shape[-1]} values, weight rows of {wm.shape[1]}")
    return (xv @ wm.T).astype(F32)


def matmul_dense(x, w) -> np.ndarray:
    """Matmul over f32/f16 weights `[N, K]` given as an array; float64 accumulation."""
    return matmul(x, w)


def matmul_q8_0(x, raw: np.ndarray) -> np.ndarray:
    """Matmul over GGML Q8_0 blocks `uint8 [N, K/32*34]` dequantized by gguf; float64 accumulation."""
    raw = np.asarray(raw, dtype=np.uint8)
    return matmul(x, dequantize_raw(raw, QT.Q8_0).reshape(raw.shape[0], -1))


def matmul_int8act(qx: QAct, w) -> np.ndarray:
    """The int8 GEMV, literally: int32 block dot products times `d_w · d_x`, float64 over blocks.

    `w`: Q8_0 raw blocks `uint8 [N, K/32*34]`, a Q8_0 `WeightData`, or a repacked `(qs, d)` pair."""
    if isinstance(w, WeightData):
        qs, d = w.q8_0
    elif isinstance(w, tuple):
        qs, d = w
    else:
        qs, d = repack_q8_0(w)
    return gemv_int8(qs, d, qx)


def quantize(x, format: QuantFormat | str = QuantFormat.ONE_WORD) -> QAct:
    """`fwd.quantize`: `numerics.quantize_act` (blocks along the last axis; a rank-2 x per row)."""
    return quantize_act(x, format)


def view(x, shape: Sequence[int], offset: int = 0) -> np.ndarray:
    """`offset` values into the flattened `x`, as many as `shape` holds, copied; float32."""
    flat = np.asarray(x, dtype=F32).ravel()
    n = int(np.prod(shape))
    if offset < 0 or offset + n > flat.size:
        raise ValueError(f"view of {n} values at offset {offset} overruns {flat.size} values")
    return flat[offset : offset + n].reshape(tuple(shape)).copy()


# ---------------------------------------------------------------------------------------------
# mixture of experts


def _expert64(w, e: int) -> np.ndarray:
    if isinstance(w, WeightData):
        return w.expert(e)
    return np.asarray(w[e], dtype=F32).astype(F64)


def moe_route(x, router, top_k: int, renormalize: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The router: logits `router · x` (float64), the `top_k` largest (ties: the lower index first; a
    NaN logit ranks below every number, so `top_k` distinct experts are kept even from a row of NaNs),
    weighted by their softmax renormalized over the kept ones, `exp(l_i - l_top) / Σ_kept exp(l_j -
    l_top)` (every weight NaN where a kept logit is NaN), or by the softmax over all experts if not
    renormalized. The GPU router (`codegen.moe.topk`, over `codegen.moe.logits`) follows the same rule. Returns (experts int64
    `[top_k]` best first, weights float32 `[top_k]`)."""
    # row by row in one summation order (not BLAS, whose row blocking can tell equal rows apart): equal
    # router rows give equal logits, so a tie is a tie
    logits = np.sum(_dense64(router) * _as64(x).ravel(), axis=-1)
    nan = np.isnan(logits)
    experts = np.lexsort((-np.where(nan, 0.0, logits), nan))[:top_k]  # stable: the lower index on ties
    if renormalize:
        with np.errstate(invalid="ignore", over="ignore"):
            kept = logits[experts]
            w = np.exp(kept - kept[0])
            w = w / np.sum(w)
    else:
        w = _softmax64(logits)[experts]
    return experts.astype(np.int64), w.astype(F32)


def moe(
    x, router, gate_exps, up_exps, down_exps, top_k: int, renormalize: bool = True,
    hidden_format: QuantFormat | str | None = None,
) -> np.ndarray:  # fmt: skip
    """Softmax-routed top-k SwiGLU mixture, float32 `[d]`: `Σ_e w_e · down_e(silu(gate_e x) * up_e x)`.

    x `[d]` (array or `QAct`: gate, up and the router then read `d_x q_x`, the int8 GEMV's sum);
    router `[E, d]`; gate/up `[E, ff, d]`; down `[E, d, ff]` (`WeightData` or float arrays).
    `hidden_format`: quantize each expert's hidden row before the down projection (default: not)."""
    xv = _as64(x).ravel()
    experts, weights = moe_route(x, router, top_k, renormalize)
    y = np.zeros(_expert64(down_exps, int(experts[0])).shape[0], dtype=F64)
    for e, we in zip(experts.tolist(), weights.astype(F64).tolist()):
        gate = _expert64(gate_exps, e) @ xv
        up = _expert64(up_exps, e) @ xv
        with np.errstate(over="ignore"):
            hidden = gate / (1.0 + np.exp(-gate)) * up
        if hidden_format is not None:
            hidden = quantize_act(hidden.astype(F32), hidden_format).values(F64)
        y += we * (_expert64(down_exps, e) @ hidden)
    return y.astype(F32)


# ---------------------------------------------------------------------------------------------
# the executor


class _Refused(NotImplementedError):
    pass


def _refuse(op: Operation, what: str) -> _Refused:
    return _Refused(f"{where(op)}: the reference executor does not compute {what} (`{op.name}`)")


def _prop(op: Operation, name: str):
    a = op.properties.get(name)
    return None if a is None else a.value.data  # type: ignore[union-attr]


Get = Callable[[SSAValue | None], Value | None]


def _row_reduce(fn):
    def run(op, get: Get):
        eps = _prop(op, "eps")
        kw = {"eps": DEFAULT_EPS if eps is None else eps}
        return fn(get(op.x), weight=get(op.weight), residual=get(op.residual), bias=get(op.bias), **kw)

    return run


def _run_elementwise(op: fwd.ElementwiseOp, get: Get):
    return elementwise(op.kind.data.value, get(op.a), get(op.b), row=op.row is not None)


def _run_rope(op: fwd.RopeOp, get: Get):
    if op.from_ is not None:
        raise _refuse(op, "a rope reading its angles `from` a position in a cache of angles")
    if _prop(op, "rows") != 1:
        raise _refuse(op, "a rope with `rows` other than 1")
    return rope(get(op.x), get(op.angles), _prop(op, "hd"), _prop(op, "half"))


def _run_attention(op: fwd.AttentionOp, get: Get):
    for field in ("pos", "window"):
        if op.properties.get(field) is not None:
            raise _refuse(op, f"an attention with `{field}`")
    if op.sinks is not None:
        raise _refuse(op, "an attention with `sinks`")
    if _prop(op, "rows") != 1:
        raise _refuse(op, "an attention over `rows` other than 1")
    h, kv, hd, vd, l = (_prop(op, n) for n in ("h", "kv", "hd", "vd", "l"))
    kc, vc = get(op.k_cache), get(op.v_cache)
    rows = np.asarray(kc).reshape(-1, kv * hd).shape[0]
    if rows > l - 1:
        raise ValueError(f"{where(op)}: k_cache holds {rows} rows, more than l-1 = {l - 1}")
    return attention(get(op.q), get(op.k), get(op.v), kc, vc, h, kv, hd, vd,
                     scale=_prop(op, "scale"), softcap=_prop(op, "softcap"))  # fmt: skip


def _run_moe(op: fwd.MoeOp, get: Get):
    if op.router_bias is not None or any(b is not None for b in op.biases):
        raise _refuse(op, "an expert mixture with biases")
    if op.act.data.value != "swiglu":
        raise _refuse(op, f"an expert mixture with act `{op.act.data.value}`")
    if not op.weighs_outputs_by_softmax():
        raise _refuse(op, "an expert mixture other than a softmax router weighting its experts' outputs")
    x, router, gate, up, down = (get(v) for v in (op.x, op.router, op.gate_exps, op.up_exps, op.down_exps))
    return moe(x, router, gate, up, down, _prop(op, "top_k"), renormalize=op.renormalize is not None)


def _run_quantize(op: fwd.QuantizeOp, get: Get):
    x = get(op.x)
    if isinstance(x, QAct):
        raise ValueError(f"{where(op)}: quantize of a value already quantized")
    return quantize(np.asarray(x, dtype=F32), op.format.data)


def _run_view(op: fwd.ViewOp, get: Get):
    offset = _prop(op, "offset") or 0
    return view(get(op.x), fwd.dims_of(op.result.type) or (), offset)


_HANDLERS: dict[type[Operation], Callable[[Operation, Get], Value]] = {
    fwd.MatmulOp: lambda op, get: matmul(get(op.x), get(op.w)),
    fwd.SiluOp: lambda op, get: silu(get(op.x)),
    fwd.TransposeOp: lambda op, get: transpose(np.asarray(get(op.x)).reshape(_dims_in(op))),
    fwd.ElementwiseOp: _run_elementwise,
    fwd.RmsNormOp: _row_reduce(rms_norm),
    fwd.LayerNormOp: _row_reduce(layer_norm),
    fwd.SoftmaxOp: _row_reduce(softmax),
    fwd.RopeOp: _run_rope,
    fwd.AttentionOp: _run_attention,
    fwd.MoeOp: _run_moe,
    fwd.SoftcapOp: lambda op, get: softcap(get(op.x), _prop(op, "cap")),
    fwd.QuantizeOp: _run_quantize,
    fwd.ViewOp: _run_view,
}


def _dims_in(op: Operation) -> tuple[int, ...]:
    return fwd.dims_of(op.operands[0].type) or (-1,)


def _shaped(value: Value, t) -> Value:
    """A result as its declared type's shape (float32), or a `QAct`."""
    if isinstance(value, QAct):
        return value
    if isinstance(t, QActType):
        raise ValueError(f"a !fwd.qact result computed as an array of shape {list(np.shape(value))}")
    arr = np.asarray(value, dtype=F32)
    dims = fwd.dims_of(t)
    if dims is None or arr.shape == dims:
        return arr
    if arr.size != int(np.prod(dims)):
        raise ValueError(f"result of {arr.size} values for the declared shape {list(dims)}")
    return arr.reshape(dims)


def _load_weight(op: fwd.WeightOp, weights: WeightStore | None) -> WeightData:
    name = op.tensor_name.data
    if weights is None:
        raise ValueError(f"{where(op)}: `fwd.weight \"{name}\"` needs a weight store")
    wd = weights.get(name)
    t = op.result.type
    declared = fwd.dims_of(t)
    at = f"{where(op)}: weight `{name}`"
    if isinstance(t, WeightsType) and wd.shape != declared:
        raise ValueError(f"{at} is {list(wd.shape)} in the store, declared {list(declared)}")
    if isinstance(t, WeightsType) and wd.ggml != t.type:
        raise ValueError(f"{at} is {wd.ggml.value} in the store, declared {t.type.value}")
    if isinstance(t, TensorType):  # an f32 vector (a norm's weight): values
        values = wd.f32
        if values.size != int(np.prod(declared)):
            raise ValueError(f"{at} holds {values.size} values, declared {list(declared)}")
        return values.reshape(declared)  # type: ignore[return-value]
    return wd


def execute_op(
    op: Operation, operand_values: Sequence[Value], weights: WeightStore | None = None
) -> list[Value]:
    """Run one op on values given in operand order; returns one value per result (see the module
    docstring). Raises NotImplementedError for an op or field the executor does not compute."""
    if len(operand_values) != len(op.operands):
        raise ValueError(f"{op.name} takes {len(op.operands)} operands, given {len(operand_values)}")
    env = dict(zip(op.operands, operand_values))
    return _run_op(op, env, weights)


def _run_op(op: Operation, env: dict[SSAValue, Value], weights: WeightStore | None) -> list[Value]:
    def get(v: SSAValue | None) -> Value | None:
        return None if v is None else env[v]

    # activations are float32 (legality refuses the rest); a weight may be a float16/bfloat16 tensor
    weights_at = getattr(op, "WEIGHT_OPERANDS", frozenset())
    acts = [] if isinstance(op, fwd.WeightOp | fwd.FusedOp) else [  # a fused op's parts check their own
        *(v for i, v in enumerate(op.operands) if i not in weights_at), *op.results]
    for v in acts:
        if isinstance(v.type, TensorType) and not isinstance(v.type.element_type, Float32Type):
            raise _refuse(op, f"{v.type.element_type} values")
    if isinstance(op, fwd.WeightOp):
        return [_load_weight(op, weights)]
    if isinstance(op, fwd.FusedOp):
        outs = _run_block(op.body.block, [env[v] for v in op.operands], weights)
        return [_shaped(v, r.type) for v, r in zip(outs, op.results)]
    handler = _HANDLERS.get(type(op))
    if handler is None:
        raise _refuse(op, "this op")
    try:
        return [_shaped(handler(op, get), op.results[0].type)]
    except (ValueError, ZeroDivisionError, IndexError) as e:  # sizes the verifier lets through (`kv 0`)
        if str(e).startswith(where(op)):
            raise
        raise ValueError(f"{where(op)}: the reference executor cannot compute this `{op.name}` ({e})") from None


def _run_block(block: Block, args: Sequence[Value], weights: WeightStore | None) -> list[Value]:
    """Run a block's ops in order; returns the operands of its terminator (`fwd.yield`/`func.return`)."""
    env: dict[SSAValue, Value] = dict(zip(block.args, args))
    for op in block.ops:
        if isinstance(op, fwd.YieldOp | ReturnOp):
            return [env[v] for v in op.operands]
        for r, value in zip(op.results, _run_op(op, env, weights)):
            env[r] = value
    raise ValueError("block has no terminator")


def _entry(root: FuncOp | ModuleOp, entry: str | None) -> FuncOp:
    if isinstance(root, FuncOp):
        return root
    funcs = [op for op in root.walk() if isinstance(op, FuncOp)]
    names = ", ".join(f.sym_name.data for f in funcs) or "none"
    if entry is not None:
        funcs = [f for f in funcs if f.sym_name.data == entry.removeprefix("@")]
    if len(funcs) != 1:
        raise ValueError(f"no single function to execute (entry {entry!r}; found: {names})")
    return funcs[0]


def _input(arg: SSAValue, value, index: int) -> Value:
    if isinstance(value, QAct | WeightData):
        return value
    name = arg.name_hint or f"#{index}"
    if np.iscomplexobj(value):  # NumPy would drop the imaginary parts with a warning
        raise ValueError(f"input `{name}` holds complex numbers: the step computes on real values")
    try:
        arr = np.asarray(value, dtype=F32)
    except (TypeError, ValueError) as e:
        raise ValueError(f"input `{name}` is not an array of numbers ({e})") from None
    dims = fwd.dims_of(arg.type)
    if dims is None or arr.shape == dims:
        return arr
    if arr.size == int(np.prod(dims)):
        return arr.reshape(dims)
    if len(dims) == 2 and arr.ndim == 2 and arr.shape[1] == dims[1] and arr.shape[0] <= dims[0]:
        return arr  # the rows of a cache written so far
    raise ValueError(f"input `{name}` has shape {list(arr.shape)}, declared {list(dims)}")


def execute(
    func: FuncOp | ModuleOp,
    inputs: Mapping[str, object] | Sequence[object],
    weights: WeightStore | None = None,
    *,
    entry: str | None = None,
) -> list[Value]:
    """Run a function of the `fwd` dialect on NumPy inputs; returns its results (module docstring).

    NaN and inf propagate as IEEE arithmetic has them, as on the GPU, without NumPy's warnings:
    the caller judges the results (the runner stops on logits that are not finite)."""
    with np.errstate(all="ignore"):
        return _execute(func, inputs, weights, entry)


def _check_reads(f: FuncOp) -> None:
    """ValueError at the first stage reading an activation in another format than the numerics of
    the module's contract (`fwd.numerics`, as `fwd-legalize` writes it) say
    (`ForwardShim.read_mismatch`): the executor computes what the IR says, and IR whose reads
    disagree with its contract would compute numerics the contract does not name. IR without a
    contract names none to disagree with (the executor runs each read as written)."""
    from fwdshim.shim.contract import NUMERICS_ATTR, shim_of

    module = f.parent_op()
    while module is not None and not isinstance(module, ModuleOp):
        module = module.parent_op()
    if module is None or NUMERICS_ATTR not in module.attributes:
        return
    shim = shim_of(module)
    for op in f.body.block.ops:
        why = shim.read_mismatch(op) if isinstance(op, fwd.StageOp) else None
        if why is not None:
            raise ValueError(f"{where(op)}: {why}")


def _execute(func, inputs, weights, entry) -> list[Value]:
    f = _entry(func, entry)
    _check_reads(f)
    args = f.body.block.args
    if isinstance(inputs, Mapping):
        names = [a.name_hint or f"arg{i}" for i, a in enumerate(args)]
        missing = [n for n in names if n not in inputs]
        if missing:
            raise ValueError(f"inputs lack {', '.join(missing)} (expected: {', '.join(names)})")
        values = [inputs[n] for n in names]
    else:
        values = list(inputs)
        if len(values) != len(args):
            raise ValueError(f"@{f.sym_name.data} takes {len(args)} inputs, given {len(values)}")
    return _run_block(f.body.block, [_input(a, v, i) for i, (a, v) in enumerate(zip(args, values))], weights)
