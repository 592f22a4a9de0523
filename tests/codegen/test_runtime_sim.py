"""The runtime's stagewise path under Numba's CUDA simulator: tiny decode steps against the NumPy
reference executor, the per-step cache length (first token included), cache maintenance, and
fused == unfused bit for bit (this last one counts on the GPU: `test_runtime_gpu.py` runs its twin).
"""

from __future__ import annotations

import numpy as np
import pytest
from support import seeds
from support.llama_ir import (
    TINY,
    TINY_MOE,
    llama_inputs,
    llama_src,
    llama_weights,
    parse,
    pipeline,
)
from support.runtime_checks import (
    FUSED_CASES,
    TOL,
    fused_vs_unfused,
    layer_fused_vs_unfused,
    to_host,
    tol_close,
)

from fwdshim import reference
from fwdshim.codegen.device import simulating
from fwdshim.codegen.runtime import CompiledForward
from fwdshim.weights import DictWeights

pytestmark = pytest.mark.skipif(not simulating(), reason="the simulator suite (FWDSHIM_GPU=1 runs the gpu suite)")

# int8 activations: the kernels' f32 norm may round a quant the other way than the reference's f64
# one (one quant step of one block), so the end-to-end check allows a fraction of the output scale.


@pytest.mark.parametrize("numerics", ["dequant", "int8-act", "two-pass-int8"])
def test_stagewise_matches_reference_and_appends_caches(numerics):
    rng = seeds.rng()
    m = pipeline(parse(llama_src(**TINY)), numerics)
    weights = llama_weights(rng, **TINY)
    fw = CompiledForward(m, weights)
    assert fw.graph is None and fw.capacity() == TINY["l"] - 1
    rows = TINY["l"] - 2
    inputs = llama_inputs(rng, **TINY, rows=rows)
    got = to_host(fw.run_stagewise(inputs))
    tol_close(got, reference.execute(m, inputs, weights), TOL[numerics])
    # cache maintenance: this step's k, v become row `rows`; the next step attends rows + 1 rows
    fw.append_caches(rows)
    nxt = {"x": rng.standard_normal(TINY["d"]).astype(np.float32), "angles": inputs["angles"]}
    got2 = to_host(fw.step(nxt, cache_len=rows + 1))
    k_all = np.vstack([inputs["k_cache"], got[1][None]])
    v_all = np.vstack([inputs["v_cache"], got[2][None]])
    want2 = reference.execute(m, {**nxt, "k_cache": k_all, "v_cache": v_all}, weights)
    tol_close(got2, want2, TOL[numerics])


@pytest.mark.parametrize("numerics", ["int8-act"])
def test_moe_stagewise_matches_reference(numerics):
    rng = seeds.rng()
    m = pipeline(parse(llama_src(**TINY_MOE)), numerics)
    weights = llama_weights(rng, **TINY_MOE)
    fw = CompiledForward(m, weights)
    inputs = llama_inputs(rng, **TINY_MOE, rows=2)
    got = to_host(fw.run_stagewise(inputs))
    tol_close(got, reference.execute(m, inputs, weights), TOL[numerics])


def test_first_token_attends_itself_alone():
    rng = seeds.rng()
    m = pipeline(parse(llama_src(**TINY)), "dequant")
    weights = llama_weights(rng, **TINY)
    fw = CompiledForward(m, weights)
    inputs = llama_inputs(rng, **TINY, rows=0)
    # stale cache rows beyond cache_len must not be read
    fw.write("k_cache", rng.standard_normal((TINY["l"] - 1, TINY["kv"] * TINY["hd"])).astype(np.float32) * 100)
    got = to_host(fw.run_stagewise(inputs))
    tol_close(got, reference.execute(m, inputs, weights), TOL["dequant"])
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


@pytest.mark.parametrize("case", sorted(FUSED_CASES))
def test_fused_equals_unfused_sim(case):
    """Bit-exact in the simulator too (NumPy rounds every float32 op); counts on the GPU twin."""
    got, want, classes = fused_vs_unfused(case)
    assert classes == FUSED_CASES[case][1]
    for g, w in zip(got, want):
        assert np.array_equal(g.view(np.uint32), w.view(np.uint32))


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
    tol_close(to_host(fw.step(inputs)), reference.execute(m, inputs, weights), 1e-5)


@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
def test_qk_norm_stagewise_matches_reference(numerics):
    """issue 41: Qwen3's qk-norm (q and k typed as heads, each head's row RMS-normed by its own weight
    before the rope) runs as a norm launch of `h` (`kv`) rows; the step's outputs, the k row as heads,
    match the executor's."""
    rng = seeds.rng()
    sizes = dict(TINY, h=2, kv=1, hd=32)
    m = pipeline(parse(llama_src(**sizes, qk_norm=True)), numerics)
    weights = llama_weights(rng, **sizes, qk_norm=True)
    fw = CompiledForward(m, weights)
    inputs = llama_inputs(rng, **sizes, rows=2)
    got = to_host(fw.run_stagewise(inputs))
    want = reference.execute(m, inputs, weights)
    assert want[1].shape == (1, 32)
    tol_close(got, want, TOL[numerics])
    # the norm is not an identity here: the same layer without it computes another k row
    plain = reference.execute(pipeline(parse(llama_src(**sizes)), numerics), inputs, llama_weights(seeds.rng(), **sizes))
    assert not np.allclose(np.ravel(plain[1]), np.ravel(want[1]), rtol=1e-2)
