"""The runtime's stagewise path under Numba's CUDA simulator: tiny decode steps against the NumPy
reference executor, the per-step cache length (first token included), cache maintenance, and
fused == unfused bit for bit (this last one counts on the GPU: `test_runtime_gpu.py` runs its twin).
"""

from __future__ import annotations

import numpy as np
import pytest
import seeds
from test_lowering_modules import (
    TINY,
    TINY_MOE,
    legalize_only,
    llama_inputs,
    llama_src,
    llama_weights,
    parse,
    pipeline,
    unfused,
)

from fwdshim import reference
from fwdshim.codegen.device import simulating
from fwdshim.codegen.runtime import CompiledForward
from fwdshim.weights import DictWeights

pytestmark = pytest.mark.skipif(not simulating(), reason="the simulator suite (FWDSHIM_GPU=1 runs the gpu suite)")

# int8 activations: the kernels' f32 norm may round a quant the other way than the reference's f64
# one (one quant step of one block), so the end-to-end check allows a fraction of the output scale.
TOL = {"dequant": 2e-5, "int8-act": 2e-2, "two-pass-int8": 2e-2}


def _host(arrays) -> list[np.ndarray]:
    return [np.asarray(a.copy_to_host()) for a in arrays]


def _close(got: list[np.ndarray], want: list[np.ndarray], tol: float) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == np.float32
        scale = max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(g, w, rtol=0, atol=tol * scale)


@pytest.mark.parametrize("numerics", ["dequant", "int8-act", "two-pass-int8"])
def test_stagewise_matches_reference_and_appends_caches(numerics):
    rng = seeds.rng()
    m = pipeline(parse(llama_src(**TINY)), numerics)
    weights = llama_weights(rng, **TINY)
    fw = CompiledForward(m, weights)
    assert fw.graph is None and fw.capacity() == TINY["l"] - 1
    rows = TINY["l"] - 2
    inputs = llama_inputs(rng, **TINY, rows=rows)
    got = _host(fw.run_stagewise(inputs))
    _close(got, reference.execute(m, inputs, weights), TOL[numerics])
    # cache maintenance: this step's k, v become row `rows`; the next step attends rows + 1 rows
    fw.append_caches(rows)
    nxt = {"x": rng.standard_normal(TINY["d"]).astype(np.float32), "angles": inputs["angles"]}
    got2 = _host(fw.step(nxt, cache_len=rows + 1))
    k_all = np.vstack([inputs["k_cache"], got[1][None]])
    v_all = np.vstack([inputs["v_cache"], got[2][None]])
    want2 = reference.execute(m, {**nxt, "k_cache": k_all, "v_cache": v_all}, weights)
    _close(got2, want2, TOL[numerics])


@pytest.mark.parametrize("numerics", ["int8-act"])
def test_moe_stagewise_matches_reference(numerics):
    rng = seeds.rng()
    m = pipeline(parse(llama_src(**TINY_MOE)), numerics)
    weights = llama_weights(rng, **TINY_MOE)
    fw = CompiledForward(m, weights)
    inputs = llama_inputs(rng, **TINY_MOE, rows=2)
    got = _host(fw.run_stagewise(inputs))
    _close(got, reference.execute(m, inputs, weights), TOL[numerics])


def test_first_token_attends_itself_alone():
    rng = seeds.rng()
    m = pipeline(parse(llama_src(**TINY)), "dequant")
    weights = llama_weights(rng, **TINY)
    fw = CompiledForward(m, weights)
    inputs = llama_inputs(rng, **TINY, rows=0)
    # stale cache rows beyond cache_len must not be read
    fw.write("k_cache", rng.standard_normal((TINY["l"] - 1, TINY["kv"] * TINY["hd"])).astype(np.float32) * 100)
    got = _host(fw.run_stagewise(inputs))
    _close(got, reference.execute(m, inputs, weights), TOL["dequant"])
    assert fw.array("%cache_len").copy_to_host()[0] == 0


def test_inputs_are_checked():
    rng = seeds.rng()
    m = pipeline(parse(llama_src(**TINY)), "dequant")
    fw = CompiledForward(m, llama_weights(rng, **TINY))
    inputs = llama_inputs(rng, **TINY, rows=1)
    with pytest.raises(ValueError, match=r"input %x holds 32 values, got 31"):
        fw.step({**inputs, "x": inputs["x"][:31]})
    with pytest.raises(ValueError, match=r"has no input %y"):
        fw.step({"y": inputs["x"]})
    with pytest.raises(ValueError, match=r"cache length 9 outside 0..3"):
        fw.step({"x": inputs["x"]}, cache_len=9)
    with pytest.raises(ValueError, match=r"give cache_len"):
        fw.step({"x": inputs["x"]})
    with pytest.raises(ValueError, match=r"is float32, got float64"):
        fw.step({"x": inputs["x"].astype(np.float64)}, cache_len=0)
    with pytest.raises(ValueError, match=r"%wq is a weight buffer"):
        fw.write("wq", inputs["x"])


def test_weights_are_checked():
    rng = seeds.rng()
    m = pipeline(parse(llama_src(**TINY)), "dequant")
    w = llama_weights(rng, **TINY)
    bad = DictWeights({n: w.get(n) for n in w.names() if n != "blk.0.attn_norm.weight"})
    from fwdshim.weights import MissingWeight

    with pytest.raises(MissingWeight):
        CompiledForward(m, bad)


# ---------------------------------------------------------------------------------------------
# fused == unfused, bit for bit

FUSED_CASES = {
    # a run: each step carries the last result as exactly one operand, or is a silu of it
    "elementwise_chains": (
        """\
func.func @f(%a: tensor<96xf32>, %b: tensor<96xf32>, %c: tensor<96xf32>) -> (tensor<96xf32>, tensor<96xf32>) {
  %t = fwd.elementwise mul %a, %b : tensor<96xf32>, tensor<96xf32> -> tensor<96xf32>
  %s = fwd.elementwise add %c, %t : tensor<96xf32>, tensor<96xf32> -> tensor<96xf32>
  %y = fwd.silu %s : tensor<96xf32> -> tensor<96xf32>
  %z = fwd.elementwise div %y, %a : tensor<96xf32>, tensor<96xf32> -> tensor<96xf32>
  %w = fwd.elementwise sub %z, %b : tensor<96xf32>, tensor<96xf32> -> tensor<96xf32>
  func.return %w, %s : tensor<96xf32>, tensor<96xf32>
}
""",
        ["elementwise_chains"],
    ),
    # a region: joins and forks, one kernel where a chain would take one arm
    "elementwise_regions": (
        """\
func.func @f(%a: tensor<80xf32>, %b: tensor<80xf32>, %c: tensor<80xf32>, %d: tensor<80xf32>) -> (tensor<80xf32>, tensor<80xf32>) {
  %g = fwd.elementwise add %a, %b : tensor<80xf32>, tensor<80xf32> -> tensor<80xf32>
  %u = fwd.elementwise mul %c, %d : tensor<80xf32>, tensor<80xf32> -> tensor<80xf32>
  %sg = fwd.silu %g : tensor<80xf32> -> tensor<80xf32>
  %y = fwd.elementwise mul %sg, %u : tensor<80xf32>, tensor<80xf32> -> tensor<80xf32>
  %m = fwd.elementwise max %y, %g : tensor<80xf32>, tensor<80xf32> -> tensor<80xf32>
  %n = fwd.elementwise min %m, %u : tensor<80xf32>, tensor<80xf32> -> tensor<80xf32>
  func.return %n, %u : tensor<80xf32>, tensor<80xf32>
}
""",
        ["elementwise_regions"],
    ),
    # add_norm over an add and a weighted norm, writing the sum on
    "add_norm": (
        """\
func.func @f(%x: tensor<200xf32>, %o: tensor<200xf32>) -> (tensor<200xf32>, tensor<200xf32>) {
  %w = fwd.weight "norm.weight" : tensor<200xf32>
  %s = fwd.elementwise add %x, %o : tensor<200xf32>, tensor<200xf32> -> tensor<200xf32>
  %n = fwd.rms_norm %s eps 1.0e-06 : tensor<200xf32> -> tensor<200xf32>
  %h = fwd.elementwise mul %n, %w : tensor<200xf32>, tensor<200xf32> -> tensor<200xf32>
  func.return %h, %s : tensor<200xf32>, tensor<200xf32>
}
""",
        ["add_norm"],
    ),
    "norm_weight": (
        """\
func.func @f(%x: tensor<160xf32>) -> tensor<160xf32> {
  %w = fwd.weight "norm.weight" : tensor<160xf32>
  %n = fwd.rms_norm %x : tensor<160xf32> -> tensor<160xf32>
  %h = fwd.elementwise mul %w, %n : tensor<160xf32>, tensor<160xf32> -> tensor<160xf32>
  func.return %h : tensor<160xf32>
}
""",
        ["norm_weight"],
    ),
}


def fused_vs_unfused(case: str) -> tuple[list[np.ndarray], list[np.ndarray], list[str]]:
    """Run one case fused (`forward-shim`, dequant) and unfused (legalized only) on the same random
    inputs and norm weight; returns (fused results, unfused results, the fused classes formed)."""
    src, _ = FUSED_CASES[case]
    rng = seeds.rng()
    weights = DictWeights({})
    if '"norm.weight" : tensor<' in src:
        n = int(src.split('"norm.weight" : tensor<')[1].split("x")[0])
        weights = DictWeights({"norm.weight": (1 + 0.2 * rng.standard_normal(n)).astype(np.float32)})
    fused = CompiledForward(pipeline(parse(src), "dequant"), weights)
    unfused = CompiledForward(legalize_only(parse(src), "dequant"), weights)
    inputs = {n[1:]: rng.standard_normal(fused.plan.buffer(n).shape).astype(np.float32) for n in fused.plan.inputs}
    classes = [s.what.split()[-1] for s in fused.plan.stages if s.what.startswith("fwd.fused")]
    assert not any(s.what.startswith("fwd.fused") for s in unfused.plan.stages)
    got = [np.asarray(a.copy_to_host()) for a in fused.step(inputs)]
    want = [np.asarray(a.copy_to_host()) for a in unfused.step(inputs)]
    return got, want, classes


@pytest.mark.parametrize("case", sorted(FUSED_CASES))
def test_fused_equals_unfused_sim(case):
    """Bit-exact in the simulator too (NumPy rounds every float32 op); counts on the GPU twin."""
    got, want, classes = fused_vs_unfused(case)
    assert classes == FUSED_CASES[case][1]
    for g, w in zip(got, want):
        assert np.array_equal(g.view(np.uint32), w.view(np.uint32))


def layer_fused_vs_unfused(sizes: dict, numerics: str, rows: int):
    """A whole decode layer fused (`forward-shim`) and unfused (quantized, legalized), same inputs:
    (fused results, unfused results, fused plan)."""
    rng = seeds.rng()
    weights = llama_weights(rng, **sizes)
    fused = CompiledForward(pipeline(parse(llama_src(**sizes)), numerics), weights)
    plain = CompiledForward(unfused(parse(llama_src(**sizes)), numerics), weights)
    assert len(plain.plan.stage_launches) > len(fused.plan.stage_launches)
    inputs = llama_inputs(rng, **sizes, rows=rows)
    got = [np.asarray(a.copy_to_host()) for a in fused.step(inputs)]
    want = [np.asarray(a.copy_to_host()) for a in plain.step(inputs)]
    return got, want, fused.plan


def test_layer_fused_equals_unfused_sim():
    """int8-act: norm_quant, attn_output_quant, add_norm_quant and a chain against their parts."""
    got, want, plan = layer_fused_vs_unfused(TINY, "int8-act", rows=2)
    assert sum(s.what.startswith("fwd.fused") for s in plan.stages) == 4
    for g, w in zip(got, want):
        assert np.array_equal(g.view(np.uint32), w.view(np.uint32))


def test_other_primitives_match_reference():
    """transpose, softmax, layer norm (weight, bias), dense F32/F16 GEMVs (weights and an f16 tensor) and silu, each one kernel."""
    src = """\
func.func @f(%x: tensor<4x32xf32>, %v: tensor<64xf32>) -> (tensor<32x4xf32>, tensor<4x32xf32>, tensor<4x32xf32>, tensor<16xf32>, tensor<16xf32>, tensor<8xf32>) {
  %lw = fwd.weight "ln.weight" : tensor<32xf32>
  %lb = fwd.weight "ln.bias" : tensor<32xf32>
  %w32 = fwd.weight "w32" : !fwd.weights<16x64, f32>
  %w16 = fwd.weight "w16" : !fwd.weights<16x64, f16>
  %t16 = fwd.weight "t16" : tensor<8x64xf16>
  %t = fwd.transpose %x : tensor<4x32xf32> -> tensor<32x4xf32>
  %s = fwd.softmax %x : tensor<4x32xf32> -> tensor<4x32xf32>
  %l = fwd.layer_norm %x weight(%lw : tensor<32xf32>) bias(%lb : tensor<32xf32>) eps 1.0e-05 : tensor<4x32xf32> -> tensor<4x32xf32>
  %a = fwd.matmul %v, %w32 : tensor<64xf32>, !fwd.weights<16x64, f32> -> tensor<16xf32>
  %b = fwd.matmul %v, %w16 : tensor<64xf32>, !fwd.weights<16x64, f16> -> tensor<16xf32>
  %sb = fwd.silu %b : tensor<16xf32> -> tensor<16xf32>
  %c = fwd.matmul %v, %t16 : tensor<64xf32>, tensor<8x64xf16> -> tensor<8xf32>
  func.return %t, %s, %l, %a, %sb, %c : tensor<32x4xf32>, tensor<4x32xf32>, tensor<4x32xf32>, tensor<16xf32>, tensor<16xf32>, tensor<8xf32>
}
"""
    rng = seeds.rng()
    weights = DictWeights({
        "ln.weight": rng.standard_normal(32).astype(np.float32), "ln.bias": rng.standard_normal(32).astype(np.float32),
        "w32": rng.standard_normal((16, 64)).astype(np.float32), "w16": rng.standard_normal((16, 64)).astype(np.float16),
        "t16": rng.standard_normal((8, 64)).astype(np.float16),
    })  # fmt: skip
    m = pipeline(parse(src), "dequant")
    fw = CompiledForward(m, weights)
    assert [s.launches[0].name.split("_")[0] for s in fw.plan.stages] == ["transpose", "softmax", "layer", "gemv", "gemv", "silu", "gemv"]
    assert fw.plan.buffer("%w16").parts[0].dtype == "float16"
    assert fw.plan.buffer("%t16").parts[0].dtype == "float16"  # a tensor-typed f16 weight (legal by B03)
    inputs = {"x": rng.standard_normal((4, 32)).astype(np.float32), "v": rng.standard_normal(64).astype(np.float32)}
    _close(_host(fw.step(inputs)), reference.execute(m, inputs, weights), 1e-5)
