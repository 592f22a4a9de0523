"""The kernels of one stage: `lower_stage(op) -> [Binding]`, each binding a kernel of the stage's
family (`norms`, `unary`, `gemv`, `quantize`, `rope`, `attention`, `moe`; a `fwd.fused`
op through `codegen.fused`) and the buffer parts its parameters read and write.

Every stage is one kernel, a `fwd.moe` four. Legality runs first (`shim.legality.check`, or the
`fwd.refused` marks): the `kernel_refusal` conditions are asserts here; what no kernel computes
raises `Unlowerable` with the reason.
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from fwdshim.codegen import attention, gemv, moe, norms, quantize, rope, unary
from fwdshim.codegen.buffers import type_parts
from fwdshim.codegen.fused import (
    DEFAULT_EPS,
    attention_refs,
    attention_sizes,
    lower_fused,
    qact_refs,
)
from fwdshim.codegen.gemv_decode import BLOCK_TYPES, decoder
from fwdshim.codegen.launch import Binding, Ref, Unlowerable
from fwdshim.codegen.tuning import DEFAULT, Tuning
from fwdshim.dialects.attributes import QActType, WeightsType
from fwdshim.dialects.fwd import (
    AttentionOp,
    ElementwiseOp,
    FusedOp,
    LayerNormOp,
    MatmulOp,
    MoeOp,
    QuantizeOp,
    RmsNormOp,
    RopeOp,
    SiluOp,
    SoftmaxOp,
    StageOp,
    TransposeOp,
    dims_of,
    numel,
)
from fwdshim.ggml_blocks import GEMV_TYPES, names


def _rows_n(v: SSAValue) -> tuple[int, int]:
    d = dims_of(v.type) or (0,)
    rows = 1
    for x in d[:-1]:
        rows *= x
    return rows, d[-1]


def _eps(op) -> float:
    return op.eps.value.data if op.eps is not None else DEFAULT_EPS


def _matmul(op: MatmulOp, tuning: Tuning) -> list[Binding]:
    wt, xt = op.w.type, op.x.type
    wd = dims_of(wt)
    if not wd or len(wd) != 2:
        raise Unlowerable("a matmul over a weight that is not [N, K]")
    n, k = wd
    m = (numel(xt) or 0) // k
    ggml = wt.type.value if isinstance(wt, WeightsType) else type_parts(wt)[0]
    if isinstance(wt, WeightsType) and ggml in BLOCK_TYPES:  # Q8_0 and the affine types: one family
        refs = {name: Ref(op.w, name) for name, _, _ in decoder(ggml).arrays(n, k)} | {"y": Ref(op.result)}
        if isinstance(xt, QActType):
            kern = gemv.blocks(ggml, n, k, m, act="int8", tuning=tuning)
            return [Binding(kern, {**refs, "xq": Ref(op.x, "q"), "xd": Ref(op.x, "d")})]
        return [Binding(gemv.blocks(ggml, n, k, m, tuning=tuning), {**refs, "x": Ref(op.x)})]
    if isinstance(xt, QActType):
        raise Unlowerable(f"a quantized activation read by {ggml} weights — only the block-quantized GEMVs read int8 activations")
    dtype = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}.get(ggml)
    if dtype is None:
        raise Unlowerable(f"a matmul over {ggml.upper()} weights — its kernels dequantize {names(GEMV_TYPES)} rows only")
    if k % decoder(ggml).block == 0:  # the one family (`gemv_decode.DenseDecoder`: rows of whole blocks of 32)
        return [Binding(gemv.blocks(ggml, n, k, m, tuning=tuning), {"wv": Ref(op.w), "x": Ref(op.x), "y": Ref(op.result)})]
    return [Binding(gemv.dense(n, k, m, dtype=dtype, tuning=tuning), {"w": Ref(op.w), "x": Ref(op.x), "y": Ref(op.result)})]


def _elementwise(op: ElementwiseOp, tuning: Tuning) -> list[Binding]:
    assert op.row is None, "kernel_refusal K01: legality runs first (_Builder.stage)"
    kern = unary.elementwise(op.kind.data.value, numel(op.result.type) or 0, tuning=tuning)
    return [Binding(kern, {"a": Ref(op.a), "b": Ref(op.b), "y": Ref(op.result)})]


def _silu(op: SiluOp, tuning: Tuning) -> list[Binding]:
    return [Binding(unary.silu(numel(op.result.type) or 0, tuning=tuning), {"x": Ref(op.x), "y": Ref(op.result)})]


def _transpose(op: TransposeOp, tuning: Tuning) -> list[Binding]:
    d = dims_of(op.x.type)
    if not d or len(d) != 2:
        raise Unlowerable("a transpose of a value that is not [rows, cols]")
    return [Binding(unary.transpose(d[0], d[1], tuning=tuning), {"x": Ref(op.x), "y": Ref(op.result)})]


def _rms_norm(op: RmsNormOp, tuning: Tuning) -> list[Binding]:
    assert op.bias is None, "kernel_refusal K02: legality runs first (_Builder.stage)"
    rows, n = _rows_n(op.x)
    kern = norms.rms_norm(n, rows, _eps(op), weight=op.weight is not None, residual=op.residual is not None, tuning=tuning)
    refs = {"x": Ref(op.x), "y": Ref(op.result)}
    refs.update({name: Ref(v) for name, v in (("weight", op.weight), ("residual", op.residual)) if v is not None})
    return [Binding(kern, refs)]


def _layer_norm(op: LayerNormOp, tuning: Tuning) -> list[Binding]:
    assert op.residual is None, "kernel_refusal K04: legality runs first (_Builder.stage)"
    rows, n = _rows_n(op.x)
    kern = norms.layer_norm(n, rows, _eps(op), weight=op.weight is not None, bias=op.bias is not None, tuning=tuning)
    refs = {"x": Ref(op.x), "y": Ref(op.result)}
    refs.update({name: Ref(v) for name, v in (("weight", op.weight), ("bias", op.bias)) if v is not None})
    return [Binding(kern, refs)]


def _softmax(op: SoftmaxOp, tuning: Tuning) -> list[Binding]:
    assert op.weight is None and op.residual is None and op.bias is None, "kernel_refusal K03: legality runs first"
    rows, n = _rows_n(op.x)
    return [Binding(norms.softmax(n, rows, tuning=tuning), {"x": Ref(op.x), "y": Ref(op.result)})]


def _rope(op: RopeOp, tuning: Tuning) -> list[Binding]:
    hd, half, rows = (op.properties[p].value.data for p in ("hd", "half", "rows"))  # type: ignore[attr-defined]
    assert op.from_ is None and rows == 1, "kernel_refusal K05, K06: legality runs first (_Builder.stage)"
    if numel(op.angles.type) != 2 * half:
        raise Unlowerable(f"rope angles of {numel(op.angles.type)} values — its kernel reads one row of 2x{half}")
    kern = rope.rope(numel(op.x.type) or 0, hd, half, tuning=tuning)
    return [Binding(kern, {"x": Ref(op.x), "angles": Ref(op.angles), "y": Ref(op.result)})]


def _attention(op: AttentionOp, tuning: Tuning) -> list[Binding]:
    h, kv, hd, l = attention_sizes(op)  # noqa: E741
    try:
        kern = attention.attention(h, kv, hd, l, tuning=tuning)
    except ValueError as e:
        raise Unlowerable(str(e)) from None
    refs = attention_refs(op)
    refs["y"] = Ref(op.result)
    return [Binding(kern, refs)]


def _quantize(op: QuantizeOp, tuning: Tuning) -> list[Binding]:
    rows, n = _rows_n(op.x)
    fmt = op.format.data.value
    kern = quantize.quantize(n, rows, fmt, tuning=tuning)
    refs = {"x": Ref(op.x), **qact_refs(op.result, fmt)}
    return [Binding(kern, refs)]


def _moe(op: MoeOp, tuning: Tuning) -> list[Binding]:
    """Four kernels: the router's logits (`moe.logits`) and its top-k (`moe.topk`), gate-up (SwiGLU)
    and down-and-combine (all but the top-k the GEMV family's), sharing the stage's scratch buffers
    `lg` (the logits), `idx` (the chosen experts), `wts` (their weights) and `h` (the SwiGLU rows);
    `g`, `u` (the gate and up products), `yk` (each expert's down product) and `ccount` (down's
    row-block counts) are the launches' own."""
    assert op.router_bias is None and all(b is None for b in op.biases), "kernel_refusal K19: legality runs first"
    assert op.renormalize is not None and op.act.data.value == "swiglu", "kernel_refusal K20, K21: legality runs first"
    assert op.weighs_outputs_by_softmax(), "kernel_refusal K22: legality runs first (_Builder.stage)"
    ws = (op.router, op.gate_exps, op.up_exps, op.down_exps)
    assert all(isinstance(w.type, WeightsType) and w.type.type.value == "q8_0" for w in ws), "fits F02: legality runs first"
    e, top_k = op.n_expert.value.data, op.top_k.value.data
    d = numel(op.x.type) or 0
    ff = dims_of(op.gate_exps.type)[1]  # type: ignore[index]
    if isinstance(op.x.type, QActType):
        act, xs = "int8", {"xq": Ref(op.x, "q"), "xd": Ref(op.x, "d")}
    else:
        act, xs = "f32", {"x": Ref(op.x)}
    q = lambda w, qn, dn: {qn: Ref(w, "qs"), dn: Ref(w, "dw")}  # noqa: E731
    idx, wts, h = Ref(None, scratch="idx"), Ref(None, scratch="wts"), Ref(None, scratch="h")
    return [
        Binding(moe.logits(e, d, act=act, tuning=tuning), {**q(op.router, "qs", "dw"), **xs, "y": Ref(None, scratch="lg")}),
        Binding(moe.topk(e, top_k, tuning=tuning), {"lg": Ref(None, scratch="lg"), "idx": idx, "wts": wts}),
        Binding(
            moe.gate_up(e, d, ff, top_k, act=act, tuning=tuning),
            {**q(op.gate_exps, "qs", "dw"), **q(op.up_exps, "qs2", "dw2"), **xs, "idx": idx,
             "y": Ref(None, scratch="g"), "y2": Ref(None, scratch="u"), "z0": h},
        ),  # fmt: skip
        Binding(
            moe.down(e, d, ff, top_k, tuning=tuning),
            {**q(op.down_exps, "qs", "dw"), "x": h, "idx": idx, "y": Ref(None, scratch="yk"), "wts": wts,
             "ccount": Ref(None, scratch="ccount"), "out": Ref(op.result)},
        ),  # fmt: skip
    ]


def _fused(op: FusedOp, tuning: Tuning) -> list[Binding]:
    return lower_fused(op, tuning)


_LOWER = {
    MatmulOp: _matmul,
    ElementwiseOp: _elementwise,
    SiluOp: _silu,
    TransposeOp: _transpose,
    RmsNormOp: _rms_norm,
    LayerNormOp: _layer_norm,
    SoftmaxOp: _softmax,
    RopeOp: _rope,
    AttentionOp: _attention,
    QuantizeOp: _quantize,
    MoeOp: _moe,
    FusedOp: _fused,
}


def lower_stage(op: StageOp, tuning: Tuning = DEFAULT) -> list[Binding]:
    """The kernel launches of one stage, built under `tuning`; `Unlowerable` with the reason where no
    kernel computes it."""
    fn = _LOWER.get(type(op))
    if fn is None:
        raise Unlowerable(f"{op.name}: this lane has no kernel for the op")
    return fn(op, tuning)
