"""fwd-quantize-activations: where `fwd.quantize` goes, in which format, shared by whom."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func

from fwdshim.classes import Q8MatKind
from fwdshim.diagnostics import LocatingParser
from fwdshim.dialects.attributes import QActType, QuantFormat
from fwdshim.dialects.fwd import Fwd, MatmulOp, MoeOp, QuantizeOp, stages
from fwdshim.passes.quantize_activations import QuantizeActivationsPass, quantize_activations
from fwdshim.shim.forward import ForwardShim

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def context() -> Context:
    ctx = Context()
    for d in (Builtin, Func, Fwd):
        ctx.load_dialect(d)
    return ctx


def parse(text: str) -> ModuleOp:
    module = LocatingParser(context(), text, "t.mlir").parse_module()
    module.verify()
    return module


LAYER = """
func.func @f(%x: tensor<64xf32>, %y: tensor<64xf32>) -> (tensor<64xf32>, tensor<32xf32>, tensor<32xf32>, tensor<64xf32>, tensor<64xf32>) {
  %wq = fwd.weight "q" : !fwd.weights<64x64, q8_0>
  %wk = fwd.weight "k" : !fwd.weights<32x64, q8_0>
  %wv = fwd.weight "v" : !fwd.weights<32x64, q8_0>
  %wf = fwd.weight "f" : !fwd.weights<64x64, f16>
  %n = fwd.rms_norm %x eps 1.0e-05 : tensor<64xf32> -> tensor<64xf32>
  %q = fwd.matmul %n, %wq : tensor<64xf32>, !fwd.weights<64x64, q8_0> -> tensor<64xf32>
  %k = fwd.matmul %n, %wk : tensor<64xf32>, !fwd.weights<32x64, q8_0> -> tensor<32xf32>
  %v = fwd.matmul %n, %wv : tensor<64xf32>, !fwd.weights<32x64, q8_0> -> tensor<32xf32>
  %f = fwd.matmul %n, %wf : tensor<64xf32>, !fwd.weights<64x64, f16> -> tensor<64xf32>
  %z = fwd.matmul %y, %wq : tensor<64xf32>, !fwd.weights<64x64, q8_0> -> tensor<64xf32>
  func.return %q, %k, %v, %f, %z : tensor<64xf32>, tensor<32xf32>, tensor<32xf32>, tensor<64xf32>, tensor<64xf32>
}
"""


def quantizes(m: ModuleOp) -> list[QuantizeOp]:
    return [op for op in stages(m) if isinstance(op, QuantizeOp)]


@pytest.mark.parametrize(
    "kind, fmt", [(Q8MatKind.INT8_ACT, QuantFormat.ONE_WORD), (Q8MatKind.TWO_PASS_INT8, QuantFormat.TWO_WORDS)]
)
def test_one_quantize_per_value_shared_and_placed_after_its_producer(kind, fmt):
    m = parse(LAYER)
    quantize_activations(m, ForwardShim(kind))
    m.verify()
    qs = quantizes(m)
    assert len(qs) == 2, "one for %n (read by q, k, v), one for the block argument %y"
    order = [op.results[0].name_hint for op in stages(m)]
    # %y's quantize opens the block; %n's follows the norm
    assert order[:3] == ["y_q", "n", "n_q"]
    n_q = qs[1]
    assert n_q.format.data == fmt and n_q.result.type == QActType(64, fmt)
    readers = sorted(use.operation.result.name_hint for use in n_q.result.uses)
    assert readers == ["k", "q", "v"]
    # the f16 projection reads the norm in f32
    f = next(op for op in stages(m) if op.results[0].name_hint == "f")
    assert isinstance(f, MatmulOp) and f.x.type == f.result.type
    # each quantized consumer's operand 0 has the qact type; operand 1 is untouched
    for op in stages(m):
        if isinstance(op, MatmulOp) and op is not f:
            assert isinstance(op.x.type, QActType) and op.x.type.format.data == fmt


def test_dequant_quantizes_nothing():
    m = parse(LAYER)
    before = str(m)
    QuantizeActivationsPass("dequant").apply(context(), m)
    assert str(m) == before


def test_idempotent_and_reuses_an_existing_quantize():
    m = parse(LAYER)
    shim = ForwardShim(Q8MatKind.INT8_ACT)
    quantize_activations(m, shim)
    once = str(m)
    quantize_activations(m, shim)
    assert str(m) == once
    m2 = parse(LAYER.replace(
        "  %q = fwd.matmul %n,",
        "  %nq = fwd.quantize %n one_word : tensor<64xf32> -> !fwd.qact<64, one_word>\n  %q = fwd.matmul %n,",
    ))  # fmt: skip
    quantize_activations(m2, shim)
    assert len(quantizes(m2)) == 2
    assert quantizes(m2)[1].result.name_hint == "nq"


def test_moe_reads_its_input_quantized():
    m = parse((EXAMPLES / "mixtral_layer.mlir").read_text())
    quantize_activations(m, ForwardShim(Q8MatKind.TWO_PASS_INT8))
    m.verify()
    moe = next(op for op in stages(m) if isinstance(op, MoeOp))
    assert moe.x.type == QActType(576, QuantFormat.TWO_WORDS)
    assert [q.x.name_hint for q in quantizes(m)] == ["h0", "att", "h1"]


@pytest.mark.parametrize("example,numerics", [("llama_layer", "int8-act"), ("llama_layer", "two-pass-int8"),
                                              ("mixtral_layer", "int8-act")])  # fmt: skip
def test_quantizes_inserted_into_fused_ir_take_numbers_of_their_own(example, numerics):
    """fwd-fuse, then the numerics' quantizes: they go between fused ops, whose covers move on to
    make room (the attention [8] and the add+norm after it had both been given 9), and the IR is what
    the numerics' pipeline makes from the unfused layer."""
    import io

    from xdsl.printer import Printer

    from fwdshim.dialects.fwd import FusedOp
    from fwdshim.passes.fuse import FusePass
    from fwdshim.passes.pipeline import ForwardShimPass

    def text(m):
        out = io.StringIO()
        Printer(stream=out).print_op(m)
        return out.getvalue()

    src = (EXAMPLES / f"{example}.mlir").read_text()
    direct, twice = parse(src), parse(src)
    ForwardShimPass(numerics=numerics).apply(context(), direct)
    FusePass().apply(context(), twice)
    ForwardShimPass(numerics=numerics).apply(context(), twice)
    assert text(twice) == text(direct)
    numbers = [n for op in stages(twice) for n in (op.cover_list if isinstance(op, FusedOp) else ())]
    assert len(numbers) == len(set(numbers))
    assert any(isinstance(op, QuantizeOp) or (isinstance(op, FusedOp) and "quant" in op.class_id.value) for op in stages(twice))
