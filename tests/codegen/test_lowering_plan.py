"""The launch plan (`codegen.plan`), the `fwd-lower-numba` pass and the `-t numba` target.

No kernel runs here: the plan only generates and imports kernel source."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from support.attention_ir import attentions_src
from support.llama_ir import TINY, legalize_only, llama_src, parse, pipeline
from xdsl.dialects.builtin import ModuleOp

from fwdshim.codegen.launch import CACHE_LEN
from fwdshim.codegen.plan import PlanError, build_plan, plan_for
from fwdshim.codegen.tuning import Tuning

ROOT = Path(__file__).resolve().parents[2]


def tiny_plan(numerics: str):
    return plan_for(pipeline(parse(llama_src(**TINY)), numerics))


@pytest.mark.parametrize(
    ("numerics", "kernels"),
    [("dequant", 14), ("int8-act", 15), ("two-pass-int8", 18)],
)
def test_one_kernel_per_stage(numerics, kernels):
    plan = tiny_plan(numerics)
    assert len(plan.stages) == kernels and len(plan.stage_launches) == kernels
    assert plan.kernel_count == len(plan.merged) + 1 < kernels  # merged launches (codegen.merge) + kv_append
    assert all(len(s.launches) == 1 for s in plan.stages)
    assert [s.number for s in plan.stages] == list(range(len(plan.stages)))
    assert [launch.name for launch in plan.maintenance] == [f"kv_append_1x{TINY['kv'] * TINY['hd']}_r{TINY['l'] - 1}"]
    assert plan.launches[-1] is plan.maintenance[0]


def test_kv_append_appends_every_attention_at_cache_len():
    plan = tiny_plan("int8-act")
    (app,) = plan.maintenance
    assert app.stage == len(plan.stages) and app.grid == (1,)
    assert [(a.param, a.ref, a.role) for a in app.args] == [
        ("k0", "%k_r", "in"), ("v0", "%v", "in"), ("k_cache0", "%k_cache", "inout"),
        ("v_cache0", "%v_cache", "inout"), ("pos", CACHE_LEN, "in"),
    ]  # fmt: skip
    assert app.reads == ("%k_r", "%v", "%k_cache", "%v_cache", CACHE_LEN)
    assert app.writes == ("%k_cache", "%v_cache")
    text = plan.text()
    assert "// maintenance (after the last stage, in the graph):" in text
    assert f"//     kernel {app.name} grid 1 block 32" in text
    assert "//       args   (k0=%k_r, v0=%v, k_cache0=%k_cache, v_cache0=%v_cache, pos=%cache_len)" in text


def test_kv_append_launches_hold_at_most_sixteen_attentions():
    from fwdshim.codegen import attention

    n = 2 * attention.APPEND_LAYERS + 1  # 33 attentions: three launches of 11
    plan = plan_for(legalize_only(parse(attentions_src(n))))
    assert [launch.grid for launch in plan.maintenance] == [(11,), (11,), (11,)]
    assert len({launch.name for launch in plan.maintenance}) == 1 and len(plan.stage_launches) == n
    assert plan.kernel_count == len(plan.merged) + 3  # independent attentions merge 8 a launch
    caches = [a.buffer for launch in plan.maintenance for a in launch.args if a.param.startswith("k_cache")]
    assert caches == [f"%kc{i}" for i in range(n)]
    assert all(launch.args[-1].buffer == CACHE_LEN for launch in plan.maintenance)


def test_kv_append_once_per_cache():
    plan = plan_for(legalize_only(parse(attentions_src(3, shared=True))))
    (app,) = plan.maintenance
    assert [a.ref for a in app.args] == ["%k", "%v", "%kc0", "%vc0", CACHE_LEN]


def test_no_attention_no_kv_append():
    src = """\
func.func @f(%x: tensor<64xf32>) -> tensor<64xf32> {
  %z = fwd.silu %x : tensor<64xf32> -> tensor<64xf32>
  func.return %z : tensor<64xf32>
}
"""
    plan = plan_for(parse(src))
    assert plan.maintenance == () and plan.kernel_count == 1 and "maintenance" not in plan.text()


def test_plan_text_is_legible():
    text = tiny_plan("int8-act").text()
    assert text.startswith("// launch plan @decode_step: 15 stages, 8 kernels,")
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
        "test.mlir:2:3: error: this lane has no kernel for the op (fwd.relu)",
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


def test_one_gguf_tensor_declared_with_two_shapes_is_a_located_error():
    """Two `fwd.weight` ops naming one GGUF tensor must agree on its shape and type (the plan had taken
    both, and the runtime could bind only one); the same declaration twice is fine."""
    src = (ROOT / "examples" / "llama_layer.mlir").read_text()
    again = '  %wq2 = fwd.weight "blk.0.attn_q.weight" : !fwd.weights<192x576, q8_0>\n'
    same = '  %wq3 = fwd.weight "blk.0.attn_q.weight" : !fwd.weights<576x576, q8_0>\n'
    lines = src.splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if "%wq = fwd.weight" in ln) + 1
    with pytest.raises(PlanError, match=r'test.mlir:13:3: error: weight "blk.0.attn_q.weight" declared again as '
                       r"!fwd.weights<192x576, q8_0>, first as !fwd.weights<576x576, q8_0>"):  # fmt: skip
        plan_for(pipeline(parse("".join(lines[:at] + [again] + lines[at:])), "dequant"))
    plan_for(pipeline(parse("".join(lines[:at] + [same] + lines[at:])), "dequant"))


def test_a_tensor_past_cudas_grid_is_a_located_error():
    """A stage whose kernel would need more blocks than CUDA launches is an error at the stage (the
    plan had printed `grid 15625000000`)."""
    n = 4_000_000_000_000
    src = f"""\
func.func @f(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %y = fwd.silu %x : tensor<{n}xf32> -> tensor<{n}xf32>
  func.return %y : tensor<{n}xf32>
}}
"""
    with pytest.raises(PlanError, match=r"test.mlir:2:3: error: kernel silu_4000000000000 needs 15625000000 blocks along x, past CUDA's 2147483647"):
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
    from support.llama_ir import context

    from fwdshim.passes.lower_numba import LowerNumbaPass, plan_of

    m = pipeline(parse(llama_src(**TINY)), "int8-act")
    LowerNumbaPass().apply(context(), m)
    f = next(iter(m.body.block.ops))
    assert plan_of(f).kernel_count == 8  # 15 stages in 7 merged launches, and kv_append
    assert f.attributes["fwd.plan"].data["kernels"].value.data == 8
    first = next(op for op in f.body.block.ops if op.name == "fwd.fused")
    assert [a.data for a in first.attributes["fwd.kernels"].data] == [plan_of(f).stages[0].launches[0].name]
    LowerNumbaPass.__doc__.splitlines()[0].startswith("Plan the Numba CUDA kernel launches")


def test_a_pass_after_the_lowering_drops_its_plan():
    """`-p 'fwd-lower-numba,forward-shim'`: the plan of the unfused step described ops that fusion
    replaced, yet `-t numba` printed it (18 stages where the fused step has 14) and the IR kept its
    `fwd.plan` and `fwd.kernels`. Each rewriting pass now drops them, and `plan_of` answers None for
    a function changed since its plan."""
    from support.llama_ir import context

    from fwdshim.passes.lower_numba import LowerNumbaPass, plan_of
    from fwdshim.tools.numba_target import NumbaTarget

    m = parse(llama_src(**TINY))
    LowerNumbaPass().apply(context(), m)
    f = next(iter(m.body.block.ops))
    assert len(plan_of(f).stages) == 18 and "fwd.kernels" in str(m)
    pipeline(m, "dequant")
    assert plan_of(f) is None and "fwd.plan" not in str(m) and "fwd.kernels" not in str(m)
    out = io.StringIO()
    NumbaTarget(plan_only=True).emit(context(), m, out)
    assert out.getvalue() == tiny_plan("dequant").text()
    assert out.getvalue().startswith("// launch plan @decode_step: 14 stages, ")
    LowerNumbaPass().apply(context(), m)
    assert len(plan_of(f).stages) == 14 and f.attributes["fwd.plan"].data["stages"].value.data == 14


def test_target_prints_the_llama_example_plan():
    from fwdshim.tools.driver import main

    out = io.StringIO()
    import contextlib

    with contextlib.redirect_stdout(out):
        rc = main([str(ROOT / "examples/llama_layer.mlir"), "-p", "forward-shim{numerics=int8-act}", "-t", "numba"])
    text = out.getvalue()
    assert rc == 0
    assert "// launch plan @decode_step: 15 stages, 6 kernels, 34 buffers" in text  # no tail's count word: the pair quantize's
    assert "//   %launch3.qcount12  intermediate  i32[48] = data i32[48]" in text  # a count a block of 32 of the 1536
    assert "every block first: stage 8 rms_norm_res_w_sum_one_word_1x576_b256; then holds stage 9 gemv_q8_0_int8_1x1536x576_v16r2w8u1s1" in text
    assert text.count("//     kernel ") == 16
    assert "# ---- kernel kv_append_1x192_r4095:" in text
    assert "| gemv_q8_0_int8_1x1536x576_v16r2w8u1s1_pair_silu_mul_" in text  # gate and up, silu·mul their epilogue
    assert "gemv_q8_0_int8_1x576x576_v16r2w8u1s1_rope64h32, " in text  # Q with its rope as its epilogue
    assert "each block on its rows: stage 11 fused_chain_silu_mul_1536; each 32 values once stored: stage 12 quantize_one_word_1x1536;" in text
    assert "merged launch: gemv_q8_0_int8_1x576x1536_v16r2w8u1s4_eadd |" in text  # the down launch: no prologue
    assert "# ---- prelude" in text


def test_ops_of_other_dialects_are_named_as_written(capsys):
    """Ops of an unregistered dialect are named as written (`foo.bar`, not xDSL's
    `builtin.unregistered`), and a stage inside one's region is said to be there (it read "a value
    from outside the function")."""
    from fwdshim.tools.driver import main

    src = ROOT / "tests" / "cases" / "ir_stage_in_foreign_region.mlir"
    rc = main([str(src), "--allow-unregistered-dialect", "-p", "forward-shim,fwd-lower-numba"])
    err = capsys.readouterr().err.splitlines()
    inside = "a stage inside a `foo.baz` region — the launch plan lowers the function's top-level stages only"
    line = src.read_text().splitlines()  # each error: its source line and a caret follow it
    assert rc == 1 and err == [
        f"{src}:6:5: error: {inside}", line[5], "    ^",
        f"{src}:7:5: error: {inside}", line[6], "    ^",
        f"{src}:3:3: error: foo.bar in a decode step — the launch plan lowers fwd stages only", line[2], "  ^",
        f"{src}:5:3: error: foo.baz in a decode step — the launch plan lowers fwd stages only", line[4], "  ^",
    ]  # fmt: skip
    rc = main([str(src), "--allow-unregistered-dialect", "-p", "forward-shim", "--explain"])
    out = capsys.readouterr().out
    assert rc == 0 and "read by foo.bar)" in out and "builtin.unregistered" not in out


@pytest.mark.parametrize("given, named", [(None, "NoneType"), ("f", "str"), (ModuleOp([]), "ModuleOp")])
def test_plan_of_something_else_is_a_type_error_naming_it(given, named):
    """`plan_of` of a value that is no `func.func` says what it takes and what it got (it raised
    "cannot create weak reference to 'NoneType' object"); of a module, how to pick its function."""
    from fwdshim.passes.lower_numba import plan_of

    with pytest.raises(TypeError) as e:
        plan_of(given)
    assert str(e.value).startswith(f"plan_of(func): func is a func.func op (FuncOp), not {named}")
    assert ("module.walk()" in str(e.value)) == (named == "ModuleOp")


def test_two_norms_of_different_eps_are_two_kernels_both_kept():
    """Two norms whose eps differ are two kernels: two sources and two names (a non-default eps is in
    the name, so `fwdshim profile` shows two rows). The plan's kernels hold both — compiled before
    capture, printed by `-t numba` — where once, by name alone, the second norm's source was dropped
    (its launch would have compiled at its first run)."""
    src = (
        "func.func @decode_step(%x: tensor<576xf32>) -> tensor<576xf32> {\n"
        "  %a = fwd.rms_norm %x eps 1.0e-05 : tensor<576xf32> -> tensor<576xf32>\n"
        "  %b = fwd.rms_norm %a eps 1.0e-06 : tensor<576xf32> -> tensor<576xf32>\n"
        "  func.return %b : tensor<576xf32>\n}\n"
    )
    m = pipeline(parse(src), "dequant")
    plan = plan_for(m, tuning=Tuning(merge=False, prefetch_bytes=0))
    norms = [k for k in plan.kernels() if k.name.startswith("rms_norm")]
    assert [k.name for k in norms] == ["rms_norm_1x576_b256", "rms_norm_1x576_eps1em06_b256"]
    assert norms[0].source != norms[1].source
    text = plan.source_text()
    assert all(text.count(f"# ---- kernel {k.name}:") == 1 for k in norms)
    assert len({k.name for k in plan.kernels()}) == len(plan.kernels())  # one name, one source
