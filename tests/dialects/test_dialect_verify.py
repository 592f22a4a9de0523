"""`fwd` verifiers built directly in Python: every structural message, and the IR the seed refuses verifies.

Also the dialect's helpers (`stages`, `stage_numbers`, `leaves`, `part_covers`, `accesses`,
`weighs_outputs_by_softmax`, `dims_of`, `numel`, `ggml_type_of`) on small parsed modules.
"""

from __future__ import annotations

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import (
    ArrayAttr,
    Builtin,
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    MemRefType,
    StringAttr,
    TensorType,
    UnitAttr,
    f32,
    f64,
    i64,
)
from xdsl.dialects.func import Func
from xdsl.ir import Block, Region
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.test_value import create_ssa_value

from fwdshim.classes import ClassId
from fwdshim.dialects.attributes import (
    Access,
    AccessAttr,
    ElementwiseKind,
    ElementwiseKindAttr,
    GgmlType,
    MoeAct,
    MoeActAttr,
    MoeScoring,
    MoeScoringAttr,
    QActType,
    QuantFormat,
    QuantFormatAttr,
    WeightsType,
)
from fwdshim.dialects.fwd import (
    REFUSED_PRIMITIVES,
    AttentionOp,
    ElementwiseOp,
    FusedOp,
    Fwd,
    MatmulOp,
    MoeOp,
    QuantizeOp,
    RmsNormOp,
    RopeOp,
    SiluOp,
    SoftcapOp,
    StageOp,
    TransposeOp,
    ViewOp,
    WeightOp,
    YieldOp,
    dims_of,
    ggml_type_of,
    leaves,
    numel,
    stage_numbers,
    stages,
)


def t(*shape: int, el=f32) -> TensorType:
    return TensorType(el, list(shape))


def v(ty):
    return create_ssa_value(ty)


def ints(**kw) -> dict:
    return {k: IntegerAttr(n, i64) for k, n in kw.items()}


def silu(x, out) -> SiluOp:
    return SiluOp(operands=[v(x)], result_types=[out])


def transpose(x, out) -> TransposeOp:
    return TransposeOp(operands=[v(x)], result_types=[out])


def matmul(x, w, out) -> MatmulOp:
    return MatmulOp(operands=[v(x), v(w)], result_types=[out])


def ew(a, b, out, row=False, kind=ElementwiseKind.ADD) -> ElementwiseOp:
    props = {"kind": ElementwiseKindAttr(kind)}
    if row:
        props["row"] = UnitAttr()
    return ElementwiseOp(operands=[v(a), v(b)], result_types=[out], properties=props)


def norm(x, out, weight=None, residual=None, bias=None) -> RmsNormOp:
    opt = [[v(o)] if o is not None else [] for o in (weight, residual, bias)]
    return RmsNormOp(operands=[v(x), *opt], result_types=[out], properties={"eps": FloatAttr(1e-5, f32)})


def rope(x, out, hd=64, half=32, rows=1) -> RopeOp:
    return RopeOp(operands=[v(x), v(t(2, 32))], result_types=[out], properties=ints(hd=hd, half=half, rows=rows))


def attention(h=9, kv=3, hd=64, vd=64, l=4096, rows=1, q=None, k=None, vv=None, kc=None, vc=None, out=None, **extra):
    q = q or t(rows * h * hd)
    k = k or t(rows * kv * hd)
    vv = vv or t(rows * kv * vd)
    kc = kc or t(l - 1, kv * hd)
    vc = vc or t(l - 1, kv * vd)
    out = out or t(rows * h * vd)
    return AttentionOp(
        operands=[v(q), v(k), v(vv), v(kc), v(vc), []],
        result_types=[out],
        properties=ints(h=h, kv=kv, hd=hd, vd=vd, l=l, rows=rows) | extra,
    )


def moe(e=8, k=2, d=576, ff=1536, router=None, gate=None, up=None, down=None, out=None, ggml=GgmlType.Q8_0):
    router = router or WeightsType((e, d), ggml)
    gate = gate or WeightsType((e, ff, d), ggml)
    up = up or WeightsType((e, ff, d), ggml)
    down = down or WeightsType((e, d, ff), ggml)
    return MoeOp(
        operands=[v(t(d)), v(router), v(gate), v(up), v(down), [], [], [], [], []],
        result_types=[out or t(d)],
        properties={
            **ints(n_expert=e, top_k=k),
            "renormalize": UnitAttr(),
            "act": MoeActAttr(MoeAct.SWIGLU),
            "scoring": MoeScoringAttr(MoeScoring.SOFTMAX),
        },
    )


def quantize(n, out_n, fmt=QuantFormat.ONE_WORD, out_fmt=None) -> QuantizeOp:
    return QuantizeOp(
        operands=[v(t(n))],
        result_types=[QActType(out_n, out_fmt or fmt)],
        properties={"format": QuantFormatAttr(fmt)},
    )


def view(x, out, offset=None, access=None) -> ViewOp:
    props = {} if offset is None else ints(offset=offset)
    if access is not None:
        props["access"] = ArrayAttr([AccessAttr(access)])
    return ViewOp(operands=[v(x)], result_types=[out], properties=props)


def fused(cls: str, covers, in_types, out_types, build_parts, arg_types=None) -> FusedOp:
    """A fused op whose region's block gets `arg_types` (default: the operand types)."""
    block = Block(arg_types=arg_types if arg_types is not None else in_types)
    build_parts(block)
    return FusedOp.create(  # `create`: the class may be unknown (FusedOp's own __init__ takes a ClassId)
        operands=[v(ty) for ty in in_types],
        result_types=list(out_types),
        properties={"class": StringAttr(cls), "covers": DenseArrayBase.from_list(i64, list(covers))},
        regions=[Region(block)],
    )


def yield_(*values) -> YieldOp:
    return YieldOp(operands=[list(values)])


def silu_parts(out_type=None):
    def build(block: Block):
        a = block.args[0]
        s = SiluOp(operands=[a], result_types=[out_type or a.type])
        block.add_ops([s, yield_(s.result)])

    return build


def two_silu_parts(block: Block) -> None:
    a = block.args[0]
    s = SiluOp(operands=[a], result_types=[a.type])
    s2 = SiluOp(operands=[s.result], result_types=[a.type])
    block.add_ops([s, s2, yield_(s2.result)])


A576 = t(576)

BAD = [
    ("access count", lambda: SiluOp(operands=[v(A576)], result_types=[A576], properties={"access": ArrayAttr([AccessAttr(Access.WHOLE)] * 2)}), "`access` gives 2 entries for 1 operands"),
    ("unary size", lambda: silu(A576, t(64)), "fwd.silu result has 64 values for 576 inputs"),
    ("transpose size", lambda: transpose(t(4, 8), t(8, 8)), "fwd.transpose result has 64 values for 32 inputs"),
    ("transpose not permuted", lambda: transpose(t(4, 8), t(2, 16)), "transpose result is 2x16, not 8x4 (x is 4x8, its dims reversed)"),
    ("transpose same shape", lambda: transpose(t(4, 8), t(4, 8)), "transpose result is 4x8, not 8x4 (x is 4x8, its dims reversed)"),
    ("transpose rank 3", lambda: transpose(t(2, 3, 4), t(3, 2, 4)), "transpose result is 3x2x4, not 4x3x2 (x is 2x3x4, its dims reversed)"),
    ("transpose scalar", lambda: transpose(f32, f32), "transpose x and result are tensors, not f32 -> f32"),
    # any stage over a memref, a vector or a scalar (legality had said `a per-index kernel over 0 values`)
    ("silu memref", lambda: SiluOp(operands=[v(MemRefType(f32, [64]))], result_types=[MemRefType(f32, [64])]),
     "fwd.silu operand 0 is memref<64xf32>: a stage reads and yields tensors (and !fwd.qact, !fwd.weights)"),
    ("weight type", lambda: WeightOp(result_types=[f32], properties={"name": StringAttr("w")}), "fwd.weight result is !fwd.weights or a tensor"),
    ("matmul rank", lambda: matmul(A576, WeightsType((8, 1536, 576), GgmlType.Q8_0), t(1536)), "matmul w must be a rank-2 weight [N, K], not !fwd.weights<8x1536x576, q8_0>"),
    ("matmul scalar", lambda: matmul(f32, WeightsType((192, 576), GgmlType.Q8_0), t(192)), "matmul x and result must be tensors of rank >= 1, not f32 -> tensor<192xf32>"),
    ("matmul k", lambda: matmul(t(512), WeightsType((192, 576), GgmlType.Q8_0), t(192)), "matmul x rows have 512 values, w rows have 576"),
    ("matmul n", lambda: matmul(A576, WeightsType((192, 576), GgmlType.Q8_0), t(576)), "matmul result rows have 576 values, w has 192 rows"),
    ("matmul heads", lambda: matmul(A576, WeightsType((192, 576), GgmlType.Q8_0), t(4, 64)), "matmul result heads 4x64 hold 256 values, w has 192 rows"),
    ("matmul heads of rows", lambda: matmul(t(2, 576), WeightsType((192, 576), GgmlType.Q8_0), t(3, 3, 64)), "matmul result is 3x3x64, not 2x192 (one row of 192 for each row of x, 2x576)"),
    ("matmul rank 3 of a vector", lambda: matmul(A576, WeightsType((192, 576), GgmlType.Q8_0), t(1, 1, 192)), "matmul result is 1x1x192, not 192 (one row of 192 for each row of x, 576), nor its rows as heads"),
    ("elementwise", lambda: ew(A576, t(192), A576), "elementwise operands and result agree in shape unless `row`"),
    ("elementwise row width", lambda: ew(t(9, 64), t(32), t(9, 64), row=True), "elementwise row b has 32 values for rows of 64 (a is 9x64)"),
    ("elementwise row first", lambda: ew(t(64), A576, A576, row=True), "elementwise row a has 64 values for rows of 576 (b is 576)"),
    ("elementwise row of two rows", lambda: ew(t(9, 64), t(2, 64), t(9, 64), row=True), "elementwise row b has 128 values for rows of 64 (a is 9x64)"),
    ("elementwise row result", lambda: ew(t(9, 64), t(64), t(64), row=True), "elementwise row result has the shape of a (64 is not 9x64)"),
    ("elementwise row scalar", lambda: ew(t(64), f32, t(64), row=True), "elementwise `row` operands are tensors of rank 1 or more, not tensor<64xf32> and f32"),
    ("norm scalar", lambda: norm(f32, f32), "fwd.rms_norm x must be a tensor of rank >= 1, not f32"),
    ("norm weight", lambda: norm(A576, A576, weight=t(64)), "fwd.rms_norm weight has 64 values for rows of 576"),
    ("norm bias", lambda: norm(A576, A576, bias=t(32)), "fwd.rms_norm bias has 32 values for rows of 576"),
    ("norm residual", lambda: norm(t(9, 64), t(9, 64), residual=A576), "fwd.rms_norm residual has the shape of x (576 is not 9x64)"),
    ("norm result", lambda: norm(t(9, 64), A576), "fwd.rms_norm result has the shape of x (576 is not 9x64)"),
    ("rope positive", lambda: rope(A576, A576, half=0), "rope hd, half and rows are positive"),
    ("rope heads", lambda: rope(t(100), t(100)), "rope x of 100 values is not made of 64-wide heads"),
    # pairs past the head are no partial rotary (legality called them one)
    ("rope half past the head", lambda: rope(A576, A576, half=40), "rope half 40 turns pairs (i, i + half) past a head of 64 (2*half <= hd)"),
    ("rope result", lambda: rope(A576, t(9, 64)), "rope result has the shape of x (9x64 is not 576)"),
    ("attention l", lambda: attention(l=0, kc=t(0, 192), vc=t(0, 192)), "attention sizes are non-negative and l >= 1 (h 9 kv 3 hd 64 vd 64 l 0 rows 1)"),
    ("attention q", lambda: attention(q=t(512)), "attention q has 512 values, not rows*h*hd = 576"),
    ("attention k", lambda: attention(k=t(64)), "attention k has 64 values, not rows*kv*hd = 192"),
    ("attention v", lambda: attention(vv=t(64)), "attention v has 64 values, not rows*kv*vd = 192"),
    ("attention k_cache", lambda: attention(kc=t(4096, 192)), "attention k_cache is 4096x192, not (l-1) x kv*hd = 4095x192"),
    ("attention v_cache", lambda: attention(vc=t(192, 4095)), "attention v_cache is 192x4095, not (l-1) x kv*vd = 4095x192"),
    ("attention result", lambda: attention(out=t(192)), "attention result has 192 values, not rows*h*vd = 576"),
    ("attention pos past l", lambda: attention(**ints(pos=5000)), "attention pos 5000 is not a position of its l = 4096 (0 <= pos < l)"),
    ("attention pos l", lambda: attention(**ints(pos=4096)), "attention pos 4096 is not a position of its l = 4096 (0 <= pos < l)"),
    ("attention pos negative", lambda: attention(**ints(pos=-1)), "attention pos -1 is not a position of its l = 4096 (0 <= pos < l)"),
    ("attention window", lambda: attention(**ints(window=-5)), "attention window -5 is not a count of positions (window >= 1)"),
    ("attention window 0", lambda: attention(**ints(window=0)), "attention window 0 is not a count of positions (window >= 1)"),
    ("attention softcap 0", lambda: attention(softcap=FloatAttr(0.0, f32)), "attention softcap 0 is not positive (c·tanh(s/c) caps at c > 0)"),
    ("attention softcap negative", lambda: attention(softcap=FloatAttr(-2.5, f32)), "attention softcap -2.5 is not positive (c·tanh(s/c) caps at c > 0)"),
    ("softcap cap", lambda: SoftcapOp(operands=[v(A576)], result_types=[A576], properties={"cap": FloatAttr(0.0, f32)}),
     "fwd.softcap cap 0 is not positive (c·tanh(x/c) caps at c > 0)"),
    ("moe positive", lambda: moe(k=0), "moe n_expert and top_k are positive"),
    ("moe top_k", lambda: moe(e=2, k=3), "moe top_k = 3 exceeds n_expert = 2"),
    ("moe router", lambda: moe(router=WeightsType((576, 8), GgmlType.Q8_0)), "moe router is not n_expert x d = 8x576"),
    ("moe gate", lambda: moe(gate=WeightsType((1536, 576), GgmlType.Q8_0)), "moe gate_exps is not 8 x ff x 576"),
    ("moe up", lambda: moe(up=WeightsType((8, 1024, 576), GgmlType.Q8_0)), "moe up_exps is not 8x1536x576, like gate_exps"),
    ("moe down", lambda: moe(down=WeightsType((8, 1536, 576), GgmlType.Q8_0)), "moe down_exps is not 8x576x1536"),
    ("moe result", lambda: moe(out=t(1536)), "moe result has the size of x"),
    ("quantize size", lambda: quantize(576, 512), "quantize result holds 512 values, x has 576"),
    ("quantize format", lambda: quantize(576, 576, out_fmt=QuantFormat.TWO_WORDS), "quantize result format differs from `format`"),
    ("view past end", lambda: view(t(96), t(64), offset=40), "view of 64 values at offset 40 reads past the end of x (40 + 64 > 96)"),
    ("view larger", lambda: view(t(96), t(2, 64)), "view of 128 values at offset 0 reads past the end of x (0 + 128 > 96)"),
    ("view negative offset", lambda: view(t(96), t(32), offset=-8), "view offset is negative (-8)"),
    ("view strided offset", lambda: view(t(96), t(32), offset=96, access=Access.STRIDED), "view offset 96 is past the end of x (96 values)"),
    ("view empty", lambda: view(t(96), t(0), offset=8), "fwd.view yields no values (tensor<0xf32>)"),
    ("view of scalar", lambda: view(f32, t(32)), "view x is a tensor, not f32"),
    ("view to scalar", lambda: view(t(96), f32), "view result is a tensor, not f32"),
    ("fused class", lambda: fused("add_norm_silu", [0], [A576], [A576], silu_parts()), "unknown fused class `add_norm_silu`"),
    ("fused covers order", lambda: fused("norm_weight", [2, 1], [A576], [A576], silu_parts()), "fused covers are not strictly increasing"),
    ("fused no parts", lambda: fused("norm_weight", [], [], [], lambda b: b.add_op(yield_())), "fused op has no parts"),
    ("fused covers count", lambda: fused("elementwise_chains", [1], [A576], [A576], two_silu_parts), "fused covers list 1 stages for 2 parts"),
    ("fused args", lambda: fused("norm_weight", [1], [A576], [A576], silu_parts(A576), arg_types=[t(9, 64)]), "fused region arguments do not match its operands"),
    ("fused no yield", lambda: fused("norm_weight", [1], [A576], [], lambda b: b.add_op(SiluOp(operands=[b.args[0]], result_types=[A576]))), "fused region ends in fwd.silu, not in fwd.yield"),
    ("fused yield", lambda: fused("norm_weight", [1], [A576], [t(64)], silu_parts()), "fused yield does not match its results"),
]


@pytest.mark.parametrize(("build", "message"), [(b, m) for _, b, m in BAD], ids=[n for n, _, _ in BAD])
def test_verifier_message(build, message):
    op = build()
    with pytest.raises(VerifyException) as e:
        op.verify(verify_nested_ops=False)  # the op's own message (a part's own checks come first otherwise)
    assert str(e.value).splitlines()[0] == message


def test_fused_part_not_a_stage():
    def build(block: Block):
        w = WeightOp(result_types=[A576], properties={"name": StringAttr("blk.0.attn_norm.weight")})
        s = SiluOp(operands=[w.result], result_types=[A576])
        block.add_ops([w, s, yield_(s.result)])

    op = fused("elementwise_chains", [0, 1], [], [A576], build)
    with pytest.raises(VerifyException) as e:
        op.verify()
    assert str(e.value).splitlines()[0] == "fused part fwd.weight is not a stage"


def test_fused_body_sees_only_its_arguments():
    def build(block: Block):
        outside = v(A576)
        outside.name_hint = "y"
        s = ew(A576, A576, A576)
        s.operands = (block.args[0], outside)
        block.add_ops([s, yield_(s.result)])

    op = fused("elementwise_chains", [0], [A576], [A576], build)
    with pytest.raises(VerifyException) as e:
        op.verify()
    assert str(e.value).splitlines()[0] == (
        "fused body uses %y (fwd.elementwise operand 1), defined outside it: a fused op's body sees only its own arguments"
    )


GOOD = [
    ("silu", lambda: silu(A576, A576)),
    ("silu reshaped", lambda: silu(t(9, 64), A576)),
    ("transpose", lambda: transpose(t(4, 32), t(32, 4))),
    ("transpose square", lambda: transpose(t(8, 8), t(8, 8))),
    ("transpose of a vector", lambda: transpose(A576, A576)),
    ("transpose rank 3", lambda: transpose(t(2, 3, 4), t(4, 3, 2))),
    ("matmul", lambda: matmul(A576, WeightsType((192, 576), GgmlType.Q8_0), t(192))),
    ("matmul rows", lambda: matmul(t(4, 576), WeightsType((192, 576), GgmlType.Q8_0), t(4, 192))),
    ("matmul dense", lambda: matmul(A576, t(192, 576), t(192))),
    ("matmul as heads", lambda: matmul(A576, WeightsType((192, 576), GgmlType.Q8_0), t(3, 64))),
    ("matmul rows as heads", lambda: matmul(t(2, 576), WeightsType((192, 576), GgmlType.Q8_0), t(2, 3, 64))),
    ("elementwise row", lambda: ew(t(9, 64), t(64), t(9, 64), row=True)),
    ("elementwise row first", lambda: ew(t(32), t(4, 32), t(4, 32), row=True)),
    ("elementwise row of one", lambda: ew(t(64), t(64), t(64), row=True)),
    ("elementwise row 1x64", lambda: ew(t(9, 64), t(1, 64), t(9, 64), row=True)),
    ("view", lambda: view(t(96), t(2, 16), offset=8)),
    ("view to the end", lambda: view(t(96), t(32), offset=64)),
    ("view whole", lambda: view(t(96), t(96))),
    ("view strided", lambda: view(t(576), t(9, 64), offset=64, access=Access.STRIDED)),
    ("norm full", lambda: norm(A576, A576, weight=A576, residual=A576, bias=A576)),
    ("norm per head", lambda: norm(t(9, 64), t(9, 64), weight=t(64))),
    ("attention", lambda: attention()),
    ("attention at its last position, a window of 1, a cap", lambda: attention(**ints(pos=4095, window=1), softcap=FloatAttr(1e-3, f32))),
    # what the seed refuses verifies: h % kv != 0, a partial rotary, 64-bit values, l past the 48 KiB row
    ("gqa uneven", lambda: attention(h=9, kv=2)),
    ("score row past 48 KiB", lambda: attention(l=12257)),
    ("partial rotary", lambda: rope(A576, A576, half=16)),
    ("rope rows", lambda: rope(A576, A576, rows=9)),
    ("f64 norm", lambda: norm(t(576, el=f64), t(576, el=f64))),
    ("f64 matmul", lambda: matmul(t(576, el=f64), WeightsType((192, 576), GgmlType.F64), t(192, el=f64))),
    ("q4_1 matmul", lambda: matmul(A576, WeightsType((192, 576), GgmlType.Q4_1), t(192))),
    ("moe", lambda: moe()),
    ("moe f32 router", lambda: moe(router=WeightsType((8, 576), GgmlType.F32))),
    ("moe top_k = n_expert", lambda: moe(k=8)),
    ("quantize", lambda: quantize(576, 576, QuantFormat.TWO_WORDS)),
    ("fused", lambda: fused("norm_weight", [3], [A576], [A576], silu_parts())),
    ("fused refused class", lambda: fused("moe_direct_pairs", [3], [A576], [A576], silu_parts())),
]


@pytest.mark.parametrize("build", [b for _, b in GOOD], ids=[n for n, _ in GOOD])
def test_structurally_valid_ir_verifies(build):
    op = build()
    op.verify()
    assert isinstance(op, StageOp)


def test_dialect_has_every_seed_op():
    names = {op.name for op in Fwd.operations}
    computed = {"matmul", "silu", "transpose", "elementwise", "rms_norm", "softmax", "layer_norm", "rope",
                "attention", "gated_delta", "softcap", "moe"}  # fmt: skip
    refused = {"swiglu", "sigmoid", "gelu", "scale", "decay", "l2_norm", "head_slice", "join", "head_matmul",
               "causal_conv", "full_attention", "row_gather", "rows_gather", "argmax", "set_row", "int_requant",
               "int_clamp", "relu", "lut_attention"}  # fmt: skip
    shim = {"weight", "quantize", "view", "fused", "yield"}
    assert len(refused) == 19
    assert {op.name for op in REFUSED_PRIMITIVES} == {f"fwd.{n}" for n in refused}
    assert names == {f"fwd.{n}" for n in computed | refused | shim}


# ---------------------------------------------------------------------------------------------
# helpers on parsed IR

NESTED = """
func.func @f(%x: tensor<576xf32>, %y: tensor<576xf32>, %w: tensor<576xf32>) -> (tensor<576xf32>, tensor<576xf32>) {
  %s0 = fwd.silu %x : tensor<576xf32> -> tensor<576xf32>
  %f:2 = fwd.fused add_norm covers [1, 2, 3] ins(%s0, %y, %w) : (tensor<576xf32>, tensor<576xf32>, tensor<576xf32>) -> (tensor<576xf32>, tensor<576xf32>) {
  ^bb0(%a: tensor<576xf32>, %b: tensor<576xf32>, %c: tensor<576xf32>):
    %s = fwd.elementwise add %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
    %n = fwd.fused norm_weight covers [2, 3] ins(%s, %c) : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32> {
    ^bb0(%s1: tensor<576xf32>, %c1: tensor<576xf32>):
      %n1 = fwd.rms_norm %s1 eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>
      %n2 = fwd.elementwise mul %n1, %c1 : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
      fwd.yield %n2 : tensor<576xf32>
    }
    fwd.yield %s, %n : tensor<576xf32>, tensor<576xf32>
  }
  %wq = fwd.weight "blk.0.attn_q.weight" : !fwd.weights<576x576, q8_0>
  %q = fwd.matmul %f#1, %wq access [#fwd.access<whole>, #fwd.access<rows>] : tensor<576xf32>, !fwd.weights<576x576, q8_0> -> tensor<576xf32>
  %r = fwd.relu %q, %f#0 : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>
  func.return %q, %r : tensor<576xf32>, tensor<576xf32>
}
"""


def _module(text: str):
    ctx = Context()
    for d in (Builtin, Func, Fwd):
        ctx.load_dialect(d)
    m = Parser(ctx, text).parse_module()
    m.verify()
    return m


def test_stages_numbered_in_program_order():
    m = _module(NESTED)
    names = [op.name for op in stages(m)]
    assert names == ["fwd.silu", "fwd.fused", "fwd.matmul", "fwd.relu"]  # weights and parts are not stages
    numbers = stage_numbers(m)
    assert sorted(numbers.values()) == [0, 1, 2, 3]
    assert [numbers[op] for op in stages(m)] == [0, 1, 2, 3]


def test_leaves_and_part_covers_of_nested_fused():
    m = _module(NESTED)
    outer = next(op for op in stages(m) if isinstance(op, FusedOp))
    assert outer.class_id is ClassId.ADD_NORM
    assert outer.cover_list == (1, 2, 3)
    assert [p.name for p in outer.parts()] == ["fwd.elementwise", "fwd.fused"]
    assert outer.part_covers() == [(1,), (2, 3)]
    assert [op.name for op in leaves(outer)] == ["fwd.elementwise", "fwd.rms_norm", "fwd.elementwise"]
    inner = outer.parts()[1]
    assert isinstance(inner, FusedOp) and inner.class_id is ClassId.NORM_WEIGHT


def test_fused_parts_merged_by_cse_still_verify_and_compute_the_same():
    """xDSL's `cse` merges identical (pure) parts of a fused op's region: the op then covers more
    stages than it has leaves. It still verifies, legalizes and computes what it did; `part_covers`
    gives each nested part its own numbers and each run of primitives the numbers between."""
    import numpy as np
    from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination

    from fwdshim import reference as ref
    from fwdshim.passes.pipeline import ForwardShimPass

    text = """
func.func @f(%a: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {
  %h = fwd.elementwise mul %a, %b : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %h2 = fwd.elementwise mul %a, %b : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %r = fwd.elementwise add %h, %h2 : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %s = fwd.silu %r : tensor<64xf32> -> tensor<64xf32>
  func.return %s : tensor<64xf32>
}
"""
    m = _module(text)
    ctx = Context()
    for d in (Builtin, Func, Fwd):
        ctx.load_dialect(d)
    ForwardShimPass().apply(ctx, m)
    g = np.random.default_rng(7)
    inputs = [g.standard_normal(64).astype(np.float32) for _ in range(2)]
    before = ref.execute(m, inputs)[0]
    CommonSubexpressionElimination().apply(ctx, m)
    m.verify()
    op = next(op for op in stages(m) if isinstance(op, FusedOp))
    assert op.cover_list == (0, 1, 2, 3) and len(op.parts()) == 3
    assert op.part_covers() == [(0, 1), (2,), (3,)]
    ForwardShimPass().apply(ctx, m)  # legalizes again: nothing refused
    np.testing.assert_array_equal(ref.execute(m, inputs)[0], before)
    assert not np.allclose(before, 0)


def test_accesses_default_whole():
    m = _module(NESTED)
    by_name = {op.name: op for op in stages(m)}
    assert by_name["fwd.matmul"].accesses() == ["whole", "rows"]
    assert by_name["fwd.relu"].accesses() == ["whole", "whole"]
    assert by_name["fwd.silu"].accesses() == ["whole"]


def test_dims_numel_and_ggml_type():
    assert dims_of(t(9, 64)) == (9, 64) and numel(t(9, 64)) == 576
    assert dims_of(WeightsType((8, 1536, 576), GgmlType.Q8_0)) == (8, 1536, 576)
    assert numel(WeightsType((8, 1536, 576), GgmlType.Q8_0)) == 8 * 1536 * 576
    assert dims_of(QActType(576, QuantFormat.ONE_WORD)) == (576,)
    assert dims_of(f32) is None and numel(f32) is None
    assert ggml_type_of(v(WeightsType((192, 576), GgmlType.Q4_K))) == "q4_k"
    assert ggml_type_of(v(A576)) is None


def test_fused_op_constructor():
    block = Block(arg_types=[A576])
    silu_parts()(block)
    op = FusedOp(ClassId.ELEMENTWISE_CHAINS, [5], [v(A576)], [A576], Region(block))
    op.verify()
    assert op.class_id is ClassId.ELEMENTWISE_CHAINS
    assert op.class_.data == "elementwise_chains"
    assert op.cover_list == (5,)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, True),
        ({"scoring": MoeScoringAttr(MoeScoring.SIGMOID)}, False),
        ({"groups": IntegerAttr(2, i64)}, False),
        ({"groups": IntegerAttr(1, i64)}, True),
        ({"scale": FloatAttr(2.5, f32)}, False),
        ({"scale": FloatAttr(1.0, f32)}, True),
        ({"weight_inputs": UnitAttr()}, False),
    ],
)
def test_weighs_outputs_by_softmax(change, expected):
    op = moe()
    for k, a in change.items():
        op.properties[k] = a
    op.verify()
    assert op.weighs_outputs_by_softmax() is expected


def test_weighs_outputs_by_softmax_not_with_selection_bias():
    op = moe()
    with_bias = MoeOp(
        operands=[op.x, op.router, op.gate_exps, op.up_exps, op.down_exps, [], [v(t(8))], [], [], []],
        result_types=[A576],
        properties={k: a for k, a in op.properties.items() if k != "operandSegmentSizes"},
    )
    with_bias.verify()
    assert with_bias.selection_bias is not None
    assert with_bias.weighs_outputs_by_softmax() is False


def test_stage_effects_for_xdsls_generic_passes():
    """Stages compute values (xDSL's `dce` removes an unused one, `cse` merges two alike), unless one
    writes rows of a named buffer (`into`): a write, which dce keeps and cse does not merge; every
    stage alike (fwd.relu, an op without kernels, had no effect trait at all); a fused op has its
    parts' effects."""
    from xdsl.traits import is_side_effect_free
    from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
    from xdsl.transforms.dead_code_elimination import DeadCodeElimination

    text = """
func.func @f(%x: tensor<64xf32>) -> tensor<64xf32> {
  %a = fwd.silu %x into "k_cache" : tensor<64xf32> -> tensor<64xf32>
  %a2 = fwd.silu %x into "k_cache" : tensor<64xf32> -> tensor<64xf32>
  %c = fwd.relu %x : (tensor<64xf32>) -> tensor<64xf32>
  %d = fwd.silu %x : tensor<64xf32> -> tensor<64xf32>
  %e = fwd.silu %x : tensor<64xf32> -> tensor<64xf32>
  %g = fwd.elementwise add %d, %e : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %f = fwd.fused elementwise_chains covers [7] ins(%x) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%y: tensor<64xf32>):
    %s = fwd.silu %y into "v_cache" : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return %g : tensor<64xf32>
}
"""
    m = _module(text)
    ctx = Context()
    for d in (Builtin, Func, Fwd):
        ctx.load_dialect(d)
    by_name = {op.results[0].name_hint: op for op in m.walk() if op.results and op.results[0].name_hint}
    assert [is_side_effect_free(by_name[n]) for n in ("a", "c", "d", "f")] == [False, True, True, False]
    DeadCodeElimination().apply(ctx, m)
    CommonSubexpressionElimination().apply(ctx, m)
    m.verify()
    left = [op.results[0].name_hint for op in stages(m)]
    assert left == ["a", "a2", "d", "g", "f"], left  # relu gone (unused), e merged into d; the writes stay
