"""fwd-fuse at the Python level: test shims (one with no positions, one supporting every class
natively), covers, locations, remarks, fixed points, and the Llama example's stage counts."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.ir import context, parse
from support.lanes import EveryClassLane, SharedLane
from xdsl.dialects.builtin import FileLineColLoc, ModuleOp

from fwdshim.classes import Q8MatKind
from fwdshim.dialects.fwd import FusedOp, StageOp, leaves, stages
from fwdshim.passes.fuse import REMARK, FusePass, fuse_module
from fwdshim.passes.pipeline import ForwardShimPass
from fwdshim.passes.quantize_activations import QuantizeActivationsPass
from fwdshim.shim.forward import ForwardShim

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def fused(module: ModuleOp) -> list[tuple[str, tuple[int, ...]]]:
    """The top-level fused ops: (class, covers)."""
    return [(op.class_.data, op.cover_list) for op in stages(module) if isinstance(op, FusedOp)]


ORDERING = """
func.func @f(%a: tensor<64xf32>, %b: tensor<64xf32>, %c: tensor<64xf32>) -> tensor<64xf32> {
  %t = fwd.elementwise mul %a, %b : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %s = fwd.elementwise add %t, %c : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %n = fwd.rms_norm %s eps 1.0e-05 : tensor<64xf32> -> tensor<64xf32>
  func.return %n : tensor<64xf32>
}
"""


def test_ordering_forward_keeps_the_add_in_the_chain():
    m = parse(ORDERING)
    fuse_module(m, ForwardShim())
    assert fused(m) == [("elementwise_chains", (0, 1))]
    assert [op.name for op in stages(m)] == ["fwd.fused", "fwd.rms_norm"]


def test_ordering_shared_lane_lets_add_norm_take_the_sum():
    m = parse(ORDERING)
    fuse_module(m, SharedLane())
    assert fused(m) == [("add_norm", (1, 2))]
    assert [op.name for op in stages(m)] == ["fwd.elementwise", "fwd.fused"]


def test_locations_kept_and_fused_op_at_its_first_part():
    m = parse(ORDERING, "order.mlir")
    fuse_module(m, ForwardShim())
    f = next(op for op in stages(m) if isinstance(op, FusedOp))
    locs = [(p.location.line.data, p.location.column.data) for p in f.parts()]
    assert locs == [(3, 3), (4, 3)]
    assert isinstance(f.location, FileLineColLoc)
    assert (f.location.filename.data, f.location.line.data) == ("order.mlir", 3)


OTHER_RULES = """
func.func @f(%x: tensor<64xf32>, %w: !fwd.weights<128x64, q8_0>, %v: !fwd.weights<128x64, q8_0>,
             %qh: tensor<2x32xf32>, %ang: tensor<2x16xf32>) -> (tensor<128xf32>, tensor<64xf32>, tensor<2x32xf32>) {
  %g = fwd.matmul %x, %w : tensor<64xf32>, !fwd.weights<128x64, q8_0> -> tensor<128xf32>
  %u = fwd.matmul %x, %v : tensor<64xf32>, !fwd.weights<128x64, q8_0> -> tensor<128xf32>
  %s = fwd.silu %g : tensor<128xf32> -> tensor<128xf32>
  %y = fwd.elementwise mul %s, %u : tensor<128xf32>, tensor<128xf32> -> tensor<128xf32>
  %r = fwd.relu %x : (tensor<64xf32>) -> tensor<64xf32>
  %r2 = fwd.elementwise mul %r, %r : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %n = fwd.rms_norm %qh eps 1.0e-05 : tensor<2x32xf32> -> tensor<2x32xf32>
  %q = fwd.rope %n, %ang hd 32 half 16 rows 1 : tensor<2x32xf32>, tensor<2x16xf32> -> tensor<2x32xf32>
  func.return %y, %r2, %q : tensor<128xf32>, tensor<64xf32>, tensor<2x32xf32>
}
"""


def test_every_rule_fires_for_a_lane_that_runs_every_class():
    """glu_act_mul, then merged_gate_up (the two projections feeding it), relu_sqr, qk_norm_rope."""
    m = parse(OTHER_RULES)
    fuse_module(m, EveryClassLane())
    assert sorted(fused(m)) == [
        ("glu_act_mul", (2, 3)),
        ("merged_gate_up", (0, 1)),
        ("qk_norm_rope", (6, 7)),
        ("relu_sqr", (4, 5)),
    ]
    m.verify()


def test_forward_forms_none_of_them_and_remarks_the_refused_one():
    m = parse(OTHER_RULES)
    fuse_module(m, ForwardShim())
    assert fused(m) == [("elementwise_chains", (2, 3))]  # silu(gate)·up: glu_act_mul decomposes
    remarks = {op.name: op.attributes[REMARK].data for op in m.walk() if REMARK in op.attributes}
    assert remarks == {"fwd.relu": "relu_sqr: the forward links no ReLU"}


def test_fixed_point_and_idempotent():
    m = parse((EXAMPLES / "llama_layer.mlir").read_text())
    fuse_module(m, ForwardShim())
    once = str(m)
    fuse_module(m, ForwardShim())
    assert str(m) == once


def count_stages(module: ModuleOp) -> int:
    return sum(1 for _ in stages(module))


@pytest.mark.parametrize(
    "numerics, before, after, classes",
    [
        ("dequant", 18, 14, ["norm_weight", "add_norm", "elementwise_chains"]),
        ("int8-act", 22, 15, ["norm_quant", "attn_output_quant", "add_norm_quant", "elementwise_chains"]),
        ("two-pass-int8", 22, 18, ["norm_weight", "add_norm", "elementwise_chains"]),
    ],
)
def test_llama_stage_counts(numerics, before, after, classes):
    """The closing note's numbers: stages before fusion (with the quantize stages) and after."""
    m = parse((EXAMPLES / "llama_layer.mlir").read_text())
    ctx = context()
    QuantizeActivationsPass(numerics).apply(ctx, m)
    assert count_stages(m) == before
    leaves_before = sorted(op.name for op in stages(m))
    FusePass(numerics).apply(ctx, m)
    m.verify()
    assert count_stages(m) == after
    assert [c for c, _ in fused(m)] == classes
    # nothing lost or duplicated: the leaves of the fused module are the stages before fusion
    assert sorted(leaf.name for op in stages(m) for leaf in leaves(op)) == leaves_before
    covers = sorted(n for op in stages(m) if isinstance(op, FusedOp) for n in op.cover_list)
    assert covers == sorted(set(covers))


@pytest.mark.parametrize("numerics", [k.value for k in Q8MatKind])
def test_pipeline_legalizes_the_examples(numerics):
    for example in ("llama_layer.mlir", "mixtral_layer.mlir"):
        m = parse((EXAMPLES / example).read_text())
        ForwardShimPass(numerics).apply(context(), m)
        m.verify()
        assert "fwd.numerics" in m.attributes
        assert all(isinstance(op, StageOp) for op in stages(m))


def test_unknown_options_are_errors():
    with pytest.raises(ValueError, match="unknown numerics `int4`"):
        FusePass("int4")
    with pytest.raises(ValueError, match="option `order` of `fwd-fuse` takes shim or shared, not `forward`"):
        FusePass(order="forward")


SIDE_EFFECTS = """
func.func private @log_a(tensor<64xf32>) -> ()
func.func private @log_b(tensor<64xf32>) -> ()
func.func @f(%x: tensor<64xf32>, %o: tensor<64xf32>) -> tensor<64xf32> {
  %s = fwd.elementwise add %x, %o : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  func.call @log_a(%s) : (tensor<64xf32>) -> ()
  CALL_B
  %n = fwd.rms_norm %s eps 1.0e-05 : tensor<64xf32> -> tensor<64xf32>
  func.return %n : tensor<64xf32>
}
"""


def _calls(module: ModuleOp) -> list[str]:
    return [op.callee.string_value() for op in module.walk() if op.name == "func.call"]


def test_fusion_keeps_the_order_of_ops_with_side_effects():
    """An outside op between the parts that reads one moves after the fused op: where it may have side
    effects (a `func.call`) and would pass another such op, the match is not fused (a remark says
    which ops); where it passes none, it moves and the match fuses."""
    m = parse(SIDE_EFFECTS.replace("CALL_B", "func.call @log_b(%x) : (tensor<64xf32>) -> ()"))
    fuse_module(m, ForwardShim(Q8MatKind.DEQUANT))
    assert fused(m) == [] and _calls(m) == ["log_a", "log_b"]
    add = next(op for op in stages(m) if op.name == "fwd.elementwise")
    assert add.attributes[REMARK].data == (
        "add_norm: func.call (t.mlir:6:3) reads a part and would move after the fused op, past func.call"
        " (t.mlir:7:3): both may have side effects"
    )
    m = parse(SIDE_EFFECTS.replace("CALL_B", ""))
    fuse_module(m, ForwardShim(Q8MatKind.DEQUANT))
    assert fused(m) == [("add_norm", (0, 1))] and _calls(m) == ["log_a"]
    ops = [op.name for op in m.walk() if op.parent_op() is not None and op.parent_op().name == "func.func"]
    assert ops.index("fwd.fused") < ops.index("func.call")
