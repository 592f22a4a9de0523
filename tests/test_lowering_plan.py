"""The launch plan (`codegen.plan`), the `fwd-lower-numba` pass and the `-t numba` target.

No kernel runs here: the plan only generates and imports kernel source."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from test_lowering_modules import TINY, TINY_MOE, legalize_only, llama_src, parse, pipeline

from fwdshim.codegen.fused import CACHE_LEN
from fwdshim.codegen.plan import PlanError, build_plan, plan_for

ROOT = Path(__file__).resolve().parent.parent


def tiny_plan(numerics: str):
    return plan_for(pipeline(parse(llama_src(**TINY)), numerics))


@pytest.mark.parametrize(
    ("numerics", "kernels"),
    [("dequant", 14), ("int8-act", 15), ("two-pass-int8", 18)],
)
def test_one_kernel_per_stage(numerics, kernels):
    plan = tiny_plan(numerics)
    assert plan.kernel_count == kernels == len(plan.stages)
    assert all(len(s.launches) == 1 for s in plan.stages)
    assert [s.number for s in plan.stages] == list(range(len(plan.stages)))


def test_int8_act_stages_and_buffers():
    plan = tiny_plan("int8-act")
    d, q, kvw, ff = TINY["d"], TINY["h"] * TINY["hd"], TINY["kv"] * TINY["hd"], TINY["ff"]
    s0 = plan.stages[0]
    assert s0.what == "fwd.fused norm_quant" and s0.covers == (0, 1, 2)
    (k0,) = s0.launches
    assert k0.name.startswith("rms_norm_w_one_word")
    assert k0.reads == ("%x", "%anw") and k0.writes == ("%h0_q",)
    assert [(a.param, a.ref) for a in k0.args] == [("x", "%x"), ("weight", "%anw"), ("q", "%h0_q.q"), ("d", "%h0_q.d")]
    att = next(s for s in plan.stages if s.what == "fwd.fused attn_output_quant")
    assert att.launches[0].reads == ("%q_r", "%k_r", "%v", "%k_cache", "%v_cache", CACHE_LEN)
    add_norm = next(s for s in plan.stages if s.what == "fwd.fused add_norm_quant").launches[0]
    assert add_norm.reads == ("%x", "%o", "%fnw") and set(add_norm.writes) == {"%x1", "%h1_q"}
    gemv = plan.stages[1].launches[0]
    assert gemv.name.startswith("gemv_q8_0_int8") and gemv.writes == ("%q",)
    roles = {b.name: b.role for b in plan.buffers}
    assert roles["%x"] == roles["%angles"] == "input"
    assert roles["%k_cache"] == roles["%v_cache"] == "cache"
    assert roles["%wq"] == roles["%anw"] == "weight"
    assert roles["%out"] == roles["%k_r"] == roles["%v"] == "output"
    assert roles["%gu"] == "intermediate" and roles[CACHE_LEN] == "step"
    wq = plan.buffer("%wq")
    assert wq.tensor == "blk.0.attn_q.weight" and wq.dtype == "q8_0" and wq.shape == (q, d)
    assert [(p.name, p.dtype, p.size) for p in wq.parts] == [("qs", "int8", q * d), ("dw", "float32", q * d // 32)]
    gu_q = plan.buffer("%gu_q")
    assert [(p.name, p.dtype, p.size) for p in gu_q.parts] == [("q", "int8", ff), ("d", "float32", ff // 32)]
    assert plan.buffer("%k_cache").shape == (TINY["l"] - 1, kvw)
    assert plan.inputs == ("%x", "%angles", "%k_cache", "%v_cache")
    assert plan.outputs == ("%out", "%k_r", "%v")


def test_two_words_quantize_stage():
    plan = tiny_plan("two-pass-int8")
    quant = [s for s in plan.stages if s.what == "fwd.quantize"]
    assert len(quant) == 4
    assert [a.ref for a in quant[0].launches[0].args] == ["%h0", "%h0_q.q", "%h0_q.d", "%h0_q.s"]


@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
def test_moe_is_three_kernels_sharing_scratch_buffers(numerics):
    plan = plan_for(pipeline(parse(llama_src(**TINY_MOE)), numerics))
    assert plan.kernel_count == len(plan.stages) + 2
    moe = next(s for s in plan.stages if s.what == "fwd.moe")
    router, gate_up, down = moe.launches
    assert [k.name.split("_")[1] for k in moe.launches] == ["router", "gate", "down"]
    x = ("%h1_q",) if numerics == "int8-act" else ("%h1",)
    assert router.reads == ("%router", *x) and router.writes == ("%dn.idx", "%dn.wts")
    assert gate_up.reads == ("%gexps", "%uexps", *x, "%dn.idx") and gate_up.writes == ("%dn.h",)
    assert down.reads == ("%dexps", "%dn.h", "%dn.idx", "%dn.wts") and down.writes == ("%dn",)
    idx = plan.buffer("%dn.idx")
    assert (idx.role, idx.parts[0].dtype, idx.parts[0].size) == ("intermediate", "int32", 2)
    assert plan.buffer("%gexps").parts[0].size == 4 * 32 * 32


def test_plan_text_is_legible():
    text = tiny_plan("int8-act").text()
    assert text.startswith("// launch plan @decode_step: 15 stages, 15 kernels,")
    assert "//   %wq " in text and "q8_0[64x32] = qs i8[2048], dw f32[64]" in text
    assert "//   stage 0: fwd.fused norm_quant covers [0, 1, 2] at test.mlir:" in text
    assert "//       args   (x=%x, weight=%anw, q=%h0_q.q, d=%h0_q.d)" in text


def test_source_text_prints_every_kernel_once():
    plan = tiny_plan("int8-act")
    src = plan.source_text()
    for k in plan.kernels():
        assert src.count(f"# ---- kernel {k.name}:") == 1
        assert f"def {k.source.split('def ')[-1].split('(')[0]}(" in src
    assert src.count("from numba import cuda") == 1


# ---------------------------------------------------------------------------------------------
# errors: never a silent skip


def test_marked_refusal_is_a_located_error():
    src = llama_src(**TINY).replace("rows 1 : tensor<64xf32>, tensor<32xf32>, tensor<32xf32>", "rows 1 softcap 30.0 : tensor<64xf32>, tensor<32xf32>, tensor<32xf32>")
    m = legalize_only(parse(src), "dequant", mode="mark")
    with pytest.raises(PlanError) as e:
        plan_for(m)
    msg = str(e.value)
    line = 1 + next(i for i, t in enumerate(src.splitlines()) if "fwd.attention" in t)
    assert msg.startswith(f"test.mlir:{line}:3: error: a soft-capped attention")
    assert "a soft-capped attention" in msg and "refused by fwd-legalize" in msg


def test_unlegalized_refusal_gives_the_seed_reason():
    src = """\
func.func @f(%x: tensor<64xf32>) -> tensor<64xf32> {
  %y = fwd.relu %x : (tensor<64xf32>) -> tensor<64xf32>
  %z = fwd.silu %y : tensor<64xf32> -> tensor<64xf32>
  %w = fwd.elementwise add %z, %y row : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  func.return %w : tensor<64xf32>
}
"""
    with pytest.raises(PlanError) as e:
        plan_for(parse(src))
    lines = str(e.value).splitlines()
    assert lines == [
        "test.mlir:2:3: error: this lane has no kernel for the op",
        "test.mlir:4:3: error: an elementwise op over a row combined with every row of a block — its kernel reads both at one index",
    ]


def test_foreign_op_in_the_step_is_an_error():
    src = """\
func.func @f(%x: tensor<64xf32>) -> tensor<64xf32> {
  %y = "test.op"(%x) : (tensor<64xf32>) -> tensor<64xf32>
  %z = fwd.silu %y : tensor<64xf32> -> tensor<64xf32>
  func.return %z : tensor<64xf32>
}
"""
    with pytest.raises(PlanError, match=r"test.mlir:2:3: error: test.op in a decode step"):
        plan_for(parse(src))


def test_decompose_class_left_in_the_ir_is_an_error():
    src = """\
func.func @f(%a: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {
  %y = fwd.fused glu_act_mul covers [0, 1] ins(%a, %b) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%p: tensor<64xf32>, %r: tensor<64xf32>):
    %s = fwd.silu %p : tensor<64xf32> -> tensor<64xf32>
    %m = fwd.elementwise mul %s, %r : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
    fwd.yield %m : tensor<64xf32>
  }
  func.return %y : tensor<64xf32>
}
"""
    with pytest.raises(PlanError, match=r"test.mlir:2:3: error: a fused glu_act_mul — the forward builds no kernel"):
        plan_for(parse(src))


def test_entry_must_name_one_function():
    m = parse(llama_src(**TINY))
    with pytest.raises(PlanError, match="expected one function with stages named @nope, found: @decode_step"):
        plan_for(m, "nope")
    assert build_plan(next(iter(m.body.block.ops))).function == "decode_step"


# ---------------------------------------------------------------------------------------------
# the pass and the target


def test_pass_attaches_the_plan():
    from fwdshim.passes.lower_numba import LowerNumbaPass, plan_of
    from test_lowering_modules import context

    m = pipeline(parse(llama_src(**TINY)), "int8-act")
    LowerNumbaPass().apply(context(), m)
    f = next(iter(m.body.block.ops))
    assert plan_of(f).kernel_count == 15
    assert f.attributes["fwd.plan"].data["kernels"].value.data == 15
    first = next(op for op in f.body.block.ops if op.name == "fwd.fused")
    assert [a.data for a in first.attributes["fwd.kernels"].data] == [plan_of(f).stages[0].launches[0].name]
    LowerNumbaPass.__doc__.splitlines()[0].startswith("Plan the Numba CUDA kernel launches")


def test_target_prints_the_llama_example_plan():
    from fwdshim.driver import main

    out = io.StringIO()
    import contextlib

    with contextlib.redirect_stdout(out):
        rc = main([str(ROOT / "examples/llama_layer.mlir"), "-p", "forward-shim{numerics=int8-act}", "-t", "numba"])
    text = out.getvalue()
    assert rc == 0
    assert "// launch plan @decode_step: 15 stages, 15 kernels, 30 buffers" in text
    assert text.count("//     kernel ") == 15
    assert "# ---- kernel fused_chain_silu_mul_1536:" in text
    assert "# ---- prelude" in text
