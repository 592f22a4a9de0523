"""Each model family's step merges as a Llama step does (issue 41): the launches of the imported
steps' plans, built on the CPU (no kernel runs)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from support.llama_numpy import TINY
from support.runtime_checks import gpu_steps_match_the_executor

from fwdshim.codegen.plan import build_plan, functions
from fwdshim.codegen.tuning import Tuning
from fwdshim.frontend.export import random_llama, write_llama
from fwdshim.frontend.importer import import_gguf
from fwdshim.tools.runner import compile_step

P = dataclasses.replace(TINY, d=256, h=4, kv=2, hd=64, rope_dim=64, ff=512)


def _plan(tmp_path, arch: str, numerics: str, biases: bool = False):
    p = dataclasses.replace(P, arch=arch)
    w = random_llama(p, seed=1)
    rng = np.random.default_rng(2)
    for i in range(p.n_layer if biases else 0):
        for name, n in (("attn_q", p.h * p.hd), ("attn_k", p.kv * p.hd), ("attn_v", p.kv * p.hd)):
            w[f"blk.{i}.{name}.bias"] = (0.5 * rng.standard_normal(n)).astype(np.float32)
    module = compile_step(import_gguf(write_llama(tmp_path / f"{arch}.gguf", p, w), context=64), numerics)
    return build_plan(functions(module)[0], module, Tuning())


@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
def test_each_family_merges_as_llama(tmp_path, monkeypatch, numerics):
    """Qwen2's Q/K/V biases are emitted after the three projections, so the three GEMVs are one launch
    with each bias its epilogue and the ropes of the sums after them (before: three launches, 2 more
    a layer);
    Phi-3's row slices merge as separate tensors do; Qwen3's qk-norm adds one launch a layer (both
    heads' norms in one launch, each carrying its rope: `norms.rope_variant`)."""
    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    llama = _plan(tmp_path, "llama", numerics).kernel_count
    qwen2 = _plan(tmp_path, "qwen2", numerics, biases=True)
    assert qwen2.kernel_count == llama
    qkv = next(x for x in qwen2.merged if len(x.holds) == 8)
    assert [h.name.split("_")[0] for h in qkv.holds] == ["gemv"] * 3 + ["elementwise"] * 3 + ["rope"] * 2
    assert (qkv.epilogues, qkv.tails) == (5, 0)  # each bias, then the rope of q's and k's sums
    assert _plan(tmp_path, "phi3", numerics).kernel_count == llama
    qwen3 = _plan(tmp_path, "qwen3", numerics)
    assert qwen3.kernel_count == llama + P.n_layer
    norms = [x for x in qwen3.merged if x.holds and x.holds[0].name.startswith("rms_norm_w_4x64")]
    assert len(norms) == P.n_layer and all((x.epilogues, x.tails) == (2, 0) for x in norms)


FAMILIES = ["qwen2", "qwen3", "qwen3moe", "phi3"]


@pytest.mark.parametrize("arch", FAMILIES)
def test_each_family_on_the_gpu_path_is_the_executor(tmp_path, monkeypatch, arch):
    """Each family's imported step on the GPU runtime (the simulator; on the device,
    `test_each_family_on_the_gpu_is_the_executor`) against the CPU executor, two positions, 1e-5:
    Qwen2's bias epilogues, Qwen3's heads' norms with the ropes as tails, Qwen3-MoE's mixture, Phi-3's
    row slices of the fused tensors."""
    _gpu_vs_executor(tmp_path, monkeypatch, arch)


@pytest.mark.gpu
@pytest.mark.parametrize("arch", FAMILIES)
def test_each_family_on_the_gpu_is_the_executor(tmp_path, monkeypatch, arch):
    _gpu_vs_executor(tmp_path, monkeypatch, arch)


def _gpu_vs_executor(tmp_path, monkeypatch, arch: str) -> None:
    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    p = dataclasses.replace(P, arch=arch, n_layer=1, d=64, h=2, kv=1, hd=32, rope_dim=32, ff=64, vocab=64)
    if arch == "qwen3moe":
        p = dataclasses.replace(p, ff=32, n_expert=4, top_k=2)
    w = random_llama(p, seed=3)
    rng = np.random.default_rng(4)
    for name, n in (("attn_q", 64), ("attn_k", 32), ("attn_v", 32)) if arch == "qwen2" else ():
        w[f"blk.0.{name}.bias"] = (0.5 * rng.standard_normal(n)).astype(np.float32)
    gpu_steps_match_the_executor(import_gguf(write_llama(tmp_path / f"{arch}.gguf", p, w), context=8), "dequant", what=arch)
