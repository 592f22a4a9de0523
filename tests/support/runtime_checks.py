"""Helpers the tests share (from tests/codegen/test_runtime_sim.py, which imports them from here, as others do)."""

from __future__ import annotations

import numpy as np

from fwdshim.codegen.runtime import CompiledForward
from fwdshim.weights import DictWeights
from support import seeds
from support.llama_ir import (
    legalize_only,
    llama_inputs,
    llama_src,
    llama_weights,
    parse,
    pipeline,
    unfused,
)

TOL = {"dequant": 2e-5, "int8-act": 2e-2, "two-pass-int8": 2e-2}


def gpu_steps_match_the_executor(model, numerics: str, tokens=(3, 9), tol: float = 1e-5, what: str = "") -> None:
    """An imported `model`'s step on the runner's GPU backend (`GpuForward`: the simulator, or the
    device) against the CPU executor (`Decoder`), one token a position: the logits within `tol`
    relative (the 2-norm)."""
    from fwdshim.tools.runner import Decoder, GpuForward, compile_step

    cpu = Decoder(model, numerics, "cpu")
    gpu = GpuForward(compile_step(model, numerics), model)
    embd = model.weights.get("token_embd.weight")
    for pos, tok in enumerate(tokens):
        want = cpu.step(tok)
        got = gpu.step(embd.rows(tok).reshape(-1), cpu.angles(pos), pos)
        assert np.linalg.norm(got - want) / np.linalg.norm(want) < tol, (what, pos)


def to_host(arrays) -> list[np.ndarray]:
    return [np.asarray(a.copy_to_host()) for a in arrays]


def tol_close(got: list[np.ndarray], want: list[np.ndarray], tol: float) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == np.float32
        scale = max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(g, w, rtol=0, atol=tol * scale)


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
