"""Merged launches (codegen.merge) under the simulator: each merged launch computes bit for bit what
the stage launches it holds compute alone — every output and every intermediate buffer of a tiny
layer and a two-layer step, under each numerics — and the plan shows each launch and its stages."""

from __future__ import annotations

import contextlib
import re

import numpy as np
import pytest
from support import seeds
from support.kernels_common import fast_simulator  # noqa: F401
from support.llama_ir import TINY, llama_inputs, llama_src, llama_weights, parse, pipeline

from fwdshim.codegen import merge, merge_groups
from fwdshim.codegen.device import simulating
from fwdshim.codegen.plan import build_plan, functions
from fwdshim.codegen.runtime import CompiledForward
from fwdshim.codegen.tuning import Tuning

STAGEWISE = Tuning(merge=False, prefetch_bytes=0)
"""One launch a stage, no L2 prefetch: the plan a merged plan is compared with."""

sim_only = pytest.mark.skipif(not simulating(), reason="the simulator suite (FWDSHIM_GPU=1 runs the gpu suite)")


def run_both(m, weights, inputs, cache_len=None, tuning=Tuning()):
    func = functions(m)[0]
    plans = {False: build_plan(func, m, STAGEWISE), True: build_plan(func, m, tuning)}
    assert plans[True].merged and not plans[False].merged
    out = {}
    for flag, plan in plans.items():
        fw = CompiledForward(m, weights, plan=plan)
        run = fw.run_stagewise if fw.graph is None else fw.step
        # twice, both runs' results kept: the counts reset, and no launch reads what the run before left
        res = [np.asarray(a.copy_to_host()) for _ in range(2) for a in run(inputs, cache_len)]
        bufs = {b.name: np.asarray(fw.array(b.name, b.parts[0].name).copy_to_host()) for b in plan.buffers}
        out[flag] = (res, bufs, plan)
    return out


def same_bits(out):
    """(stage plan's buffers, merged plan's buffers, stage plan, merged plan) of `run_both`'s result,
    after asserting that both runs' outputs, and every buffer both plans hold, are the same bits."""
    (r0, b0, p0), (r1, b1, p1) = out[False], out[True]
    for a, b in zip(r0, r1, strict=True):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    for name in set(b0) & set(b1):
        assert b0[name].tobytes() == b1[name].tobytes(), name
    return b0, b1, p0, p1


@contextlib.contextmanager
def gemv_shapes(shape_of):
    """Every block type's GEMV built at `shape_of(n, k, act, tuning)` inside the block: `gemv.launch_shape`
    patched, and every cached GEMV (`q8_0`, `q8_0_int8`, `blocks`) dropped before and after, so no
    kernel of another shape is reused in or leaks out of it (the plan builds through `gemv.blocks`: a
    test that dropped only the Q8_0 caches once got its kernels at the default shape)."""
    from fwdshim.codegen import gemv

    def fresh():
        for cached in (gemv.q8_0, gemv.q8_0_int8, gemv.blocks):
            cached.cache_clear()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gemv, "launch_shape", shape_of)
        fresh()
        try:
            yield
        finally:
            fresh()


@sim_only
@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
def test_merged_launches_are_bit_for_bit_their_stages(numerics):
    rng = seeds.rng()
    m = pipeline(parse(llama_src(**TINY)), numerics)
    weights = llama_weights(rng, **TINY)
    inputs = llama_inputs(rng, **TINY, rows=TINY["l"] - 2)
    out = run_both(m, weights, inputs)
    (r0, b0, p0), (r1, b1, p1) = out[False], out[True]
    for a, b in zip(r0, r1, strict=True):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    common = set(b0) & set(b1)
    assert len(common) == len(b0)  # the merged plan adds only its count words (and a pair quantize's)
    for name in common:
        assert b0[name].tobytes() == b1[name].tobytes(), name
    for name in set(b1) - common:
        assert re.search(r"\.(count|qcount\d+)$", name) and not b1[name].any(), name  # left at zero for the next launch
    assert p1.kernel_count < p0.kernel_count
    held = [h for launch in p1.merged for h in (launch.holds or (launch,))]
    assert [(h.stage, h.name) for h in held] == [(h.stage, h.name) for h in p0.stage_launches]


BLOCKS = dict(d=256, h=2, kv=1, hd=128, ff=256, l=4)
"""A layer whose rows are whole K-quant super-blocks (256 values)."""


@sim_only
@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
@pytest.mark.parametrize("wtype", ["q4_1", "q4_k", "q6_k"])  # nibbles alone; 32-value sub-blocks; 2 bit planes, 16-value
def test_every_block_types_merged_launches_are_bit_for_bit_their_stages(wtype, numerics):
    """A layer of one GGML block type's matrices (random blocks): its merged launches (the norm a
    prologue, the rope, silu·mul and residual add epilogues of the one GEMV family) store the same
    bits as one launch a stage."""
    rng = seeds.rng()
    m = pipeline(parse(llama_src(**BLOCKS, wtype=wtype)), numerics)
    out = run_both(m, llama_weights(rng, **BLOCKS, wtype=wtype), llama_inputs(rng, **BLOCKS, rows=BLOCKS["l"] - 2))
    _, _, p0, p1 = same_bits(out)
    names = " ".join(h.name for launch in p1.merged for h in (launch.holds or (launch,)))
    assert f"gemv_{wtype}_" in names  # the block type's own GEMV, not a requantized copy
    # merged as the Q8_0 layer is: launch for launch the same parts, prologues, epilogues and tails (a
    # pair epilogue once went untaken where a type has more than two weight arrays)
    q8 = pipeline(parse(llama_src(**BLOCKS)), numerics)
    form = lambda plan: [(len(x.holds), x.prologue, x.epilogues, x.tails) for x in plan.merged]  # noqa: E731
    assert form(p1) == form(build_plan(functions(q8)[0], q8, Tuning())) and p1.kernel_count < p0.kernel_count


@sim_only
@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
@pytest.mark.parametrize("wtype", ["f16", "bf16"])
def test_dense_types_merged_launches_are_bit_for_bit_their_stages(wtype, numerics):
    """issue 40: a layer of F16 (BF16) matrices goes through the one GEMV family (`DenseDecoder`):
    its merged launches store the same bits as one launch a stage, and under dequant they merge as
    the Q8_0 layer's do (the norm a prologue, the rope, silu·mul and residual epilogues); under
    int8-act its GEMVs read float32 (no quantize launches)."""
    rng = seeds.rng()
    m = pipeline(parse(llama_src(**BLOCKS, wtype=wtype)), numerics)
    out = run_both(m, llama_weights(rng, **BLOCKS, wtype=wtype), llama_inputs(rng, **BLOCKS, rows=BLOCKS["l"] - 2))
    _, _, p0, p1 = same_bits(out)
    names = " ".join(h.name for launch in p1.merged for h in (launch.holds or (launch,)))
    assert f"gemv_{wtype}_" in names and "gemv_dense" not in names and p1.kernel_count < p0.kernel_count
    if numerics == "dequant":
        q8 = pipeline(parse(llama_src(**BLOCKS)), numerics)
        form = lambda plan: [(len(x.holds), x.prologue, x.epilogues, x.tails) for x in plan.merged]  # noqa: E731
        assert form(p1) == form(build_plan(functions(q8)[0], q8, Tuning()))


@sim_only
@pytest.mark.parametrize("at_wait", [True, False], ids=["prologue-at-wait", "prologue-first"])
@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
def test_prologues_are_bit_for_bit_their_stages(numerics, at_wait):
    """With one-warp GEMVs (the block of the tiny layer's 32-value RMS norms) every norm before a set of
    GEMVs, and the silu·mul (or quantize) before the down projection, runs as the set's prologue:
    each block computes it into shared memory first, block 0 also stores it. Every output and
    every buffer is bit for bit the stage launches'. With `Tuning.pre_wait_prologue` the short-row parts
    issue their weight loads first and run the prologue (`_pro`) at their wait, with no wait at the
    launch's top."""
    from fwdshim.codegen import gemv
    from fwdshim.codegen.source import LATE_WAIT

    tuning = Tuning(pre_wait_prologue=at_wait, pre_wait_loads=4)  # the parts load their weights before their wait

    with gemv_shapes(lambda n, k, act, tuning=None: gemv.Shape(16, 1, 1, 1, 1)):
        rng = seeds.rng()
        m = pipeline(parse(llama_src(**TINY)), numerics)
        out = run_both(m, llama_weights(rng, **TINY), llama_inputs(rng, **TINY, rows=TINY["l"] - 2), tuning=tuning)
    *_, p1 = same_bits(out)
    pros = [launch.holds[0].name for launch in p1.merged if launch.prologue]
    assert pros[0].startswith("rms_norm_w") and any(p.startswith("rms_norm_res_w_sum") for p in pros), pros
    assert "every block first: stage 0 rms_norm_w" in p1.text()
    for launch in (x for x in p1.merged if x.prologue):
        src = launch.kernel.source
        entry = src[src.index("def merged_k(") :].splitlines()
        assert ("    _pro(" in src) == at_wait and ("    pdl_wait()" in entry) != at_wait, launch.name
        if at_wait:  # each part: its weight loads, the wait, then the prologue
            part = src[src.index("def part0(") :]
            assert part.index("(qs, ") < part.index(LATE_WAIT) < part.index("    _pro(") < part.index("xd[" if numerics == "int8-act" else "(x, ")


@sim_only
@pytest.mark.parametrize("shape", [(16, 4, 1, False), (16, 2, 4, False), (32, 2, 2, False), (16, 2, 1, True), (16, 2, 4, True)],
                         ids=["v16r4s1", "v16r2s4", "v32r2s2", "v16r2s1-block", "v16r2s4-block"])  # fmt: skip
@pytest.mark.parametrize("numerics", ["int8-act", "two-pass-int8"])
def test_pair_quantize_is_bit_for_bit_its_stages(numerics, shape):
    """With `Tuning.quant_epilogue_values` the quantize of silu·mul's result runs in the gate/up launch after its
    pair epilogue (the warp or block completing 32 values quantizes them), not as the down projection's
    prologue: every output and buffer bit for bit the stage launches' (both formats; groups of one
    warp and of four warps splitting a row; 16-byte pieces and whole blocks a lane; counted a warp
    or a block at a time, `Tuning.pair_quant_block`), the counts left
    at zero, the quantize held by the gate/up launch. Off, it is the down projection's prologue
    again."""
    from fwdshim.codegen import gemv

    vec, rows, split, block = shape  # vec 32: the whole-block-lane GEMV (`gemv._q8_kernel`); block: `pair_quant_block`
    with gemv_shapes(lambda n, k, act, tuning=None: gemv.Shape(vec, rows, 8, 1, split)):
        rng = seeds.rng()
        m = pipeline(parse(llama_src(**TINY)), numerics)
        inputs = llama_inputs(rng, **TINY, rows=TINY["l"] - 2)
        out = run_both(m, llama_weights(rng, **TINY), inputs, tuning=Tuning(pair_quant_block=block))
        off = build_plan(functions(m)[0], m, Tuning(quant_epilogue_values=0))
    (r0, b0, _), (r1, b1, p1) = out[False], out[True]
    for a, b in zip(r0, r1, strict=True):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    for name in b0:
        assert b0[name].tobytes() == b1[name].tobytes(), name
    counts = [name for name in set(b1) - set(b0) if re.search(r"\.qcount\d+$", name)]
    assert len(counts) == 1 and b1[counts[0]].size == TINY["ff"] // 32 and not b1[counts[0]].any()
    fmt = "one_word" if numerics == "int8-act" else "two_words"
    gate_up = next(launch for launch in p1.merged if any(h.name.startswith("fused_chain_silu_mul") for h in launch.holds))
    assert [h.name for h in gate_up.holds[-2:]] == [f"fused_chain_silu_mul_{TINY['ff']}", f"quantize_{fmt}_1x{TINY['ff']}"]
    assert f"_q{fmt}" in gate_up.kernel.notes and p1.merged[p1.merged.index(gate_up) + 1].prologue == 0  # the down launch
    assert ("_qf" in gate_up.kernel.source) == block
    down = next(launch for launch in off.merged if launch.holds and launch.holds[0].stage == gate_up.holds[-1].stage)
    assert down.prologue == 1 and down.holds[0].name == f"quantize_{fmt}_1x{TINY['ff']}"


@pytest.mark.parametrize("ff, inside", [(1536, True), (14336, False)], ids=["smollm2", "llama8b"])
def test_pair_quantize_only_as_wide_as_a_prologue(ff, inside):
    """The quantize of silu·mul runs in the gate/up launch up to `Tuning.prologue_values` values (SmolLM2's
    1536: in place of the down projection's prologue); Llama-3-8B's 14336-wide one keeps its own
    launch (measured faster there: `Tuning.quant_epilogue_values`)."""
    m = pipeline(parse(llama_src(d=576 if ff == 1536 else 4096, h=9, kv=3, hd=64, ff=ff, l=256)), "int8-act")
    plan = build_plan(functions(m)[0], m)
    quantize = f"quantize_one_word_1x{ff}"
    gate_up = next(x for x in plan.merged if f"fused_chain_silu_mul_{ff}" in [h.name for h in x.holds])
    assert ([h.name for h in gate_up.holds][-1] == quantize) == inside
    assert (quantize in [x.kernel.name for x in plan.merged]) == (not inside)  # its own launch
    assert not any(x.prologue and x.holds[0].name == quantize for x in plan.merged)


@sim_only
def test_plan_shows_each_launch_and_its_stages():
    m = pipeline(parse(llama_src(**TINY)), "dequant")
    plan = build_plan(functions(m)[0], m)
    text = plan.text()
    assert f"{len(plan.merged)} for {len(plan.stage_launches)} stage kernels" in text
    qkv = next(launch for launch in plan.merged if sum(h.name.startswith("gemv_") for h in launch.holds) == 3)
    gemvs = qkv.holds[qkv.prologue : qkv.prologue + 3]
    assert qkv.tails == 0 and qkv.epilogues == 2 and all(h.name.startswith("gemv_") for h in gemvs)
    assert all(h.name.startswith("rope_") for h in qkv.holds[qkv.prologue + 3 :])  # `Tuning.rope_epilogues`
    line = next(ln for ln in text.splitlines() if ln.startswith(f"//   launch {plan.merged.index(qkv)}:"))
    assert f"holds stage {gemvs[0].stage} gemv_" in line and f"; each block on its rows: stage {gemvs[2].stage + 1} rope_" in line


@sim_only
def test_groups_keep_dependent_and_atomic_launches_apart():
    m = pipeline(parse(llama_src(**TINY)), "dequant")
    plan = build_plan(functions(m)[0], m, STAGEWISE)
    groups = merge_groups.groups(plan.stage_launches, Tuning())
    for pro, par, epi, tails in groups:
        for i, a in enumerate(par):
            assert all(merge_groups._independent(a, b) for b in par[i + 1 :])
        assert not any(x.name.startswith("attention") for x in pro + par[1:] + epi + tails)
    assert sum(len(r) + len(p) + len(e) + len(t) for r, p, e, t in groups) == len(plan.stage_launches)


def test_a_set_stays_within_cudas_grid(monkeypatch):
    """A parallel set's blocks run end to end in one grid: a set stops before its blocks would pass
    `MAX_GRID` (CUDA's 2^31 - 1 along x), so every merged launch can be launched."""
    m = pipeline(parse(llama_src(**TINY)), "dequant")
    plan = build_plan(functions(m)[0], m, STAGEWISE)
    sizes = [sum(merge_groups._grid1(x.kernel) for x in par) for _, par, _, _ in merge_groups.groups(plan.stage_launches, Tuning()) if len(par) > 1]
    assert sizes, "the tiny layer merges Q/K/V and gate/up"
    monkeypatch.setattr(merge_groups, "MAX_GRID", min(sizes) - 1)
    for _, par, _, _ in merge_groups.groups(plan.stage_launches, Tuning()):
        assert len(par) == 1 or sum(merge_groups._grid1(x.kernel) for x in par) <= merge_groups.MAX_GRID


@pytest.mark.parametrize("ff, merged", [(1536, True), (14336, False)], ids=["smollm2", "llama8b"])
def test_a_wide_ffn_tail_gets_its_own_launch(monkeypatch, ff, merged):
    """silu·mul after gate/up rides in the gate/up launch up to `Tuning.tail_threads` threads (SmolLM2's 1536;
    the quantize after it is the down projection's prologue), and silu·mul and the quantize run as
    launches of their own past it (Llama-3-8B's 14336: one block would take them ~112 rounds of its
    threads; a 14336-wide prologue is past `prologue_values`). Without `pair_epilogues`, which runs the
    silu·mul in the gate/up launch at both widths."""
    shape = dict(d=576 if ff == 1536 else 4096, h=9, kv=3, hd=64, ff=ff, l=256)
    m = pipeline(parse(llama_src(**shape)), "int8-act")
    plan = build_plan(functions(m)[0], m, Tuning(pair_epilogues=False))
    gate_up = next(launch for launch in plan.merged if len(launch.holds) - launch.tails - launch.prologue == 2)
    tails = [h.name for h in gate_up.holds[gate_up.prologue + 2 :]]
    if merged:
        assert tails == [f"fused_chain_silu_mul_{ff}"]
        down = plan.merged[plan.merged.index(gate_up) + 1]
        assert [h.name for h in down.holds[: down.prologue]] == [f"quantize_one_word_1x{ff}"]
    else:
        assert tails == []
        own = [launch.kernel.name for launch in plan.merged if not launch.holds]
        assert f"fused_chain_silu_mul_{ff}" in own and f"quantize_one_word_1x{ff}" in own
    assert Tuning().tail_threads == 4096


@pytest.mark.gpu
@pytest.mark.skipif(simulating(), reason="the gpu suite runs on a device (FWDSHIM_GPU=1)")
@pytest.mark.parametrize("rope", [False, True], ids=["rope-tails", "rope-epilogues"])
@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
def test_merged_graph_is_bit_for_bit_the_stages_graph_on_the_gpu(monkeypatch, numerics, rope):
    """A SmolLM2-sized layer, each plan captured as a graph and replayed twice at a cache fill of 1000
    (with `Tuning.rope_epilogues` off and on, the default)."""
    from support.llama_ir import SMOL

    rng = np.random.default_rng(1130)  # fixed: CI and the gpu suite are deterministic
    m = pipeline(parse(llama_src(**SMOL)), numerics)
    weights = llama_weights(rng, **SMOL)
    inputs = llama_inputs(rng, **SMOL, rows=1000)
    out = run_both(m, weights, inputs, tuning=Tuning(rope_epilogues=rope))
    *_, p1 = same_bits(out)
    print(f"\n{numerics}: {len(p1.merged)} merged launches for {len(p1.stage_launches)} stage kernels, bit for bit")


@pytest.mark.gpu
@pytest.mark.skipif(simulating(), reason="the gpu suite runs on a device (FWDSHIM_GPU=1)")
@pytest.mark.parametrize("family", ["bias", "qk_norm"])
@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
def test_each_familys_merged_graph_is_bit_for_bit_the_stages_graph_on_the_gpu(numerics, family):
    """issue 41: a SmolLM2-sized layer with Qwen2's Q/K/V biases (each an epilogue, the ropes of the
    sums after them) or Qwen3's qk-norm, each plan captured as a graph and replayed twice at a cache
    fill of 1000."""
    from support.llama_ir import SMOL

    rng = np.random.default_rng(1207)
    kw = {family: True}
    m = pipeline(parse(llama_src(**SMOL, **kw)), numerics)
    out = run_both(m, llama_weights(rng, **SMOL, **kw), llama_inputs(rng, **SMOL, rows=1000))
    *_, p1 = same_bits(out)
    print(f"\n{numerics} {family}: {len(p1.merged)} merged launches for {len(p1.stage_launches)} stage kernels, bit for bit")


@pytest.mark.gpu
@pytest.mark.skipif(simulating(), reason="the gpu suite runs on a device (FWDSHIM_GPU=1)")
@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
@pytest.mark.parametrize("wtype", ["q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "f16", "bf16"])
def test_every_block_types_merged_graph_is_bit_for_bit_the_stages_graph_on_the_gpu(wtype, numerics):
    """A layer of each GGML block type's matrices, and of F16 and BF16 ones (SmolLM2's sizes; rows of
    1024 for the K-quants' super-blocks), each plan captured as a graph and replayed twice at a cache
    fill of 1000."""
    sizes = dict(d=576, h=9, kv=3, hd=64, ff=1536, l=4096) if wtype[-1] != "k" else dict(d=1024, h=8, kv=2, hd=128, ff=2048, l=4096)
    rng = np.random.default_rng(1207)  # fixed: the gpu suite is deterministic
    m = pipeline(parse(llama_src(**sizes, wtype=wtype)), numerics)
    out = run_both(m, llama_weights(rng, **sizes, wtype=wtype), llama_inputs(rng, **sizes, rows=1000))
    *_, p0, p1 = same_bits(out)
    assert p1.kernel_count < p0.kernel_count


@pytest.mark.parametrize("act", ["f32", "int8"])
def test_pipelined_parts_share_their_shared_memory(act):
    """Two pipelined GEMV parts (`gemv.Shape.stages`) merged into one launch declare their shared
    arrays once, at the kernel's top level (each part's blocks use them alone), and compute bit for
    bit what each computes alone (simulator; the GPU suite runs the plans that hold them)."""
    from fwdshim.codegen import gemv

    rng = seeds.rng()
    k = 512
    shapes = [gemv.Shape(16, 2, 2, 1, 1, stages=2), gemv.Shape(16, 1, 2, 1, 1, stages=3)]
    parts = [gemv.gemv_q8(n, k, 1, act, s) for n, s in zip((5, 3), shapes, strict=True)]
    xs = ["x"] if act == "f32" else ["xq", "xd"]
    # merged parameters: qs0, dw0, the activation (shared), y0, qs1, dw1, y1
    nx = len(xs)
    maps = [list(range(3 + nx)), [3 + nx, 4 + nx, *range(2, 2 + nx), 5 + nx]]
    params = list(parts[0].params) + [parts[1].params[0], parts[1].params[1], parts[1].params[-1]]
    params = [p.__class__(f"a{j}", p.dtype, p.size, p.role, p.doc) for j, p in enumerate(params)]
    mk = merge.merged_kernel(parts, [], maps, len(params), params)
    assert mk.source.count("cuda.shared.array(") == 3  # _flag, one int32 and one float32 pool
    decls = dict((name, size) for name, size, _ in merge.shared_decls(mk))
    assert decls["_h0_int32"] == max(4 * gemv.pipeline_bytes(s) // 20 for s in shapes)
    given = {}
    for part, m in zip(parts, maps, strict=True):
        for p, j in zip(part.params, m, strict=True):
            if p.role == "in" and f"a{j}" not in given:
                given[f"a{j}"] = (rng.integers(-127, 128, p.size, dtype=np.int8) if p.dtype == "int8"
                                  else (rng.random(p.size) + 0.5).astype(p.dtype))
    out = mk.run(**given)
    for part, m in zip(parts, maps, strict=True):
        alone = part.run(**{p.name: given[f"a{j}"] for p, j in zip(part.params, m, strict=True) if p.role == "in"})
        y = out[f"a{m[-1]}"]
        assert np.array_equal(alone["y"].view(np.uint32), y.view(np.uint32))


@pytest.mark.parametrize("act, shape", [("f32", (16, 2, 4, 1, 2, 0, False, 0)), ("int8", (16, 2, 2, 1, 1, 0, False, 2)),
                                        ("int8", (32, 2, 2, 1, 1, 0, False, 0))], ids=["split", "pipelined", "vec32"])  # fmt: skip
@pytest.mark.parametrize("kind, y_first", [("add", False), ("sub", True), ("div", False)])
def test_an_epilogue_is_bit_for_bit_the_gemv_then_the_elementwise_kernel(act, shape, kind, y_first):
    """A GEMV with an elementwise epilogue (`gemv.binary_variant`, run as the one part of a merged
    launch) stores `y` and `y kind e` (or `e kind y`) bit for bit as the GEMV and then the elementwise
    kernel launched alone, for each store form of `codegen.gemv` (split warps, pipelined, whole-block
    lanes) and operand order."""
    from fwdshim.codegen import gemv, unary
    from fwdshim.codegen.kernel import Param

    rng = seeds.rng()
    n, k = 24, 512
    part = gemv.gemv_q8(n, k, 1, act, gemv.Shape(*shape))
    epi = gemv.binary_variant(part, kind, y_first, Tuning())
    params = [Param(f"a{j}", p.dtype, p.size, p.role, p.doc) for j, p in enumerate(epi.params)]
    mk = merge.merged_kernel([epi], [], [list(range(len(params)))], len(params), params)
    given = {}
    for j, p in enumerate(part.params):
        if p.role == "in":
            given[f"a{j}"] = (rng.integers(-127, 128, p.size, dtype=np.int8) if p.dtype == "int8"
                              else (rng.random(p.size) + 0.5).astype(p.dtype))  # fmt: skip
    e = (rng.standard_normal(n) + 3.0).astype(np.float32)
    out = mk.run(**given, **{f"a{len(params) - 2}": e})
    alone = part.run(**{p.name: given[f"a{j}"] for j, p in enumerate(part.params) if p.role == "in"})["y"]
    ab = (alone, e) if y_first else (e, alone)
    expect = unary.elementwise(kind, n).run(a=ab[0], b=ab[1])["y"]
    assert np.array_equal(out[f"a{len(params) - 3}"].view(np.uint32), alone.view(np.uint32))
    assert np.array_equal(out[f"a{len(params) - 1}"].view(np.uint32), expect.view(np.uint32))
    assert not np.array_equal(expect, alone)


def test_epilogues_take_only_an_elementwise_op_of_one_gemvs_whole_output():
    """`merge_groups._epilogue_of`: an elementwise op of a GEMV's output and a buffer written before the group
    joins that GEMV; not one of two GEMV outputs (silu·mul's inputs, or `y + y`), nor one whose other
    operand or result the group writes or reads, nor another kind of kernel."""
    from fwdshim.codegen import gemv, unary
    from fwdshim.codegen.launch import Arg, Launch

    def launch(kern, *bufs):
        return Launch(0, kern, tuple(Arg(p.name, b, "", p.role) for p, b in zip(kern.params, bufs, strict=True)))

    g = gemv.gemv_q8(32, 64, 1, "f32", gemv.Shape(16, 1, 1, 1, 1))
    p0, p1 = launch(g, "w0q", "w0d", "x", "y0"), launch(g, "w1q", "w1d", "x", "y1")
    add = unary.elementwise("add", 32)
    assert merge_groups._epilogue_of(launch(add, "r", "y1", "out"), [p0, p1], [p0, p1]) == (1, False)
    assert merge_groups._epilogue_of(launch(add, "y0", "r", "out"), [p0, p1], [p0, p1]) == (0, True)
    assert merge_groups._epilogue_of(launch(add, "y0", "y1", "out"), [p0, p1], [p0, p1]) is None  # two outputs: a tail
    assert merge_groups._epilogue_of(launch(add, "y0", "y0", "out"), [p0, p1], [p0, p1]) is None
    assert merge_groups._epilogue_of(launch(add, "y1", "x", "out"), [p0, p1], [p0, p1]) == (1, True)  # read-only x
    assert merge_groups._epilogue_of(launch(add, "y0", "r", "x"), [p0, p1], [p0, p1]) is None  # the set reads x
    assert merge_groups._epilogue_of(launch(add, "y0", "y1", "out"), [p0], [p0]) == (0, True)  # y1 from before
    assert merge_groups._epilogue_of(launch(add, "y0", "r", "out"), [p0], [p0, launch(add, "s", "t", "r")]) is None
    silu = unary.silu(32)
    assert merge_groups._epilogue_of(launch(silu, "y0", "out"), [p0], [p0]) is None
    assert merge_groups._epilogue_of(launch(unary.elementwise("add", 16), "y0", "r", "out"), [p0], [p0]) is None  # sizes


@sim_only
def test_the_residual_add_is_the_down_projections_epilogue(monkeypatch):
    """The add after the down projection runs on each block's own rows in the down launch (SmolLM2's
    and Llama-3-8B's shapes: no tail there, and Llama-3-8B's add no launch of its own); with
    `Tuning.binary_epilogues` off it is the launch's tail (SmolLM2) or its own launch (Llama-3-8B)."""
    for shape, d in ((dict(d=576, h=9, kv=3, hd=64, ff=1536, l=256), 576), (dict(d=4096, h=32, kv=8, hd=128, ff=14336, l=256), 4096)):
        m = pipeline(parse(llama_src(**shape)), "dequant")
        for on in (True, False):
            plan = build_plan(functions(m)[0], m, Tuning(binary_epilogues=on))
            down = next(x for x in plan.merged if f"gemv_q8_0_1x{d}x{shape['ff']}" in " ".join(h.name for h in x.holds or (x,)))
            names = [h.name for h in down.holds]
            if on:
                assert down.epilogues == 1 and down.tails == 0 and names[-1] == f"elementwise_add_{d}", names
                assert f"each block on its rows: stage {down.holds[-1].stage} elementwise_add_{d}" in plan.text()
            else:
                assert down.epilogues == 0 and f"elementwise_add_{d}" not in names[:-1]


@pytest.mark.parametrize("act", ["f32", "int8"])
@pytest.mark.parametrize("shape", [(16, 2, 2, 1, 1, 0, False, 0), (16, 6, 4, 1, 2, 0, False, 0), (16, 2, 2, 1, 1, 0, False, 2),
                                   (4, 4, 2, 1, 1, 0, False, 0), (32, 2, 2, 2, 1, 0, False, 0), (32, 4, 4, 1, 2, 0, False, 0)],
                         ids=["warp", "split-partial", "pipelined", "vec4", "vec32", "vec32-split"])  # fmt: skip
def test_a_rope_epilogue_is_bit_for_bit_the_gemv_then_the_rope_kernel(act, shape):
    """`gemv.rope_variant`: the GEMV whose groups take rows in rope pairs `(i, i + half)` stores `y` bit
    for bit as the GEMV alone, and `z` as the rope kernel over that `y` (five heads of 64: the last
    block of the split shape holds a partial group)."""
    from fwdshim.codegen import gemv, rope

    rng = seeds.rng()
    n, k, hd, half = 5 * 64, 1024, 64, 32
    base = gemv.gemv_q8(n, k, 1, act, gemv.Shape(*shape))
    paired = gemv.rope_variant(base, hd, half, Tuning())
    assert paired is not None and [p.name for p in paired.params][-2:] == ["angles", "z"]
    given = {p.name: (rng.integers(-127, 128, p.size, dtype=np.int8) if p.dtype == "int8" else (rng.random(p.size) + 0.5).astype(p.dtype))
             for p in base.params if p.role == "in"}  # fmt: skip
    angles = rng.standard_normal(2 * half).astype(np.float32)
    y = base.run(**given)["y"]
    out = paired.run(**given, angles=angles)
    z = rope.rope(n, hd, half).run(x=y, angles=angles)["y"]
    assert np.array_equal(out["y"].view(np.uint32), y.view(np.uint32))
    assert np.array_equal(out["z"].view(np.uint32), z.view(np.uint32))
    assert not np.array_equal(z, y)


def test_a_rope_epilogue_needs_pairs_in_one_group():
    """`gemv.rope_variant` is None for a GEMV it cannot pair (odd rows a group, a looping grid, more
    than one row of x, a rope not over whole heads) or another kernel (not a Q8_0 GEMV, or one with an
    epilogue already); `gemv_q8`
    refuses such a rope with the shape named."""
    from fwdshim.codegen import gemv

    ok = gemv.gemv_q8(128, 64, 1, "f32", gemv.Shape(16, 2, 1, 1, 1))
    assert gemv.rope_variant(ok, 64, 32, Tuning()) is not None
    assert gemv.rope_variant(ok, 64, 16, Tuning()) is None  # copied dims past 2 * half
    assert gemv.rope_variant(ok, 96, 48, Tuning()) is None  # 128 rows are not whole heads of 96
    for shape, m in (((16, 1, 1, 1, 1), 1), ((32, 1, 2, 1, 1), 1), ((16, 2, 1, 1, 1, 4), 1), ((16, 2, 1, 1, 1), 2)):
        k = gemv.gemv_q8(128, 64, m, "f32", gemv.Shape(*shape))
        assert gemv.rope_variant(k, 64, 32, Tuning()) is None, k.name
    assert gemv.rope_variant(gemv.dense(128, 64), 64, 32, Tuning()) is None  # not a Q8_0 GEMV
    assert gemv.rope_variant(gemv.rope_variant(ok, 64, 32, Tuning()), 64, 32, Tuning()) is None  # one epilogue
    with pytest.raises(ValueError, match="a rope epilogue of heads of 64 .* v16r1w1u1s1"):
        gemv.gemv_q8(128, 64, 1, "f32", gemv.Shape(16, 1, 1, 1, 1), rope=(64, 32))


def _tiny_layer_bit_for_bit(numerics: str):
    """Run the tiny layer merged and unmerged (`run_both`); assert every output and every buffer of the
    stage launches is bit for bit the merged plan's; return the merged plan."""
    rng = seeds.rng()
    m = pipeline(parse(llama_src(**TINY)), numerics)
    out = run_both(m, llama_weights(rng, **TINY), llama_inputs(rng, **TINY, rows=TINY["l"] - 2))
    (r0, b0, _), (r1, b1, p1) = out[False], out[True]
    for a, b in zip(r0, r1, strict=True):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    for name in b0:
        assert b0[name].tobytes() == b1[name].tobytes(), name
    return p1


@sim_only
@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
def test_rope_epilogues_are_bit_for_bit_their_stages(monkeypatch, numerics):
    """With `Tuning.rope_epilogues` the Q and K ropes run in the Q/K/V launch on each block's own rows (no
    tail left there); every output and every buffer of the tiny layer is bit for bit the stage
    launches'."""
    p1 = _tiny_layer_bit_for_bit(numerics)
    qkv = next(x for x in p1.merged if x.epilogues)
    assert qkv.epilogues == 2 and qkv.tails == 0 and [h.name for h in qkv.holds[-2:]] == ["rope_2x32_h16", "rope_1x32_h16"]


def _silu_mul(n: int, gate_first: bool):
    """A fused chain `silu(a0) * a1` over `n` values and its `gemv.Pair` with a0 the first matrix's
    product (`gate_first`) or the second's."""
    from fwdshim.codegen import fused

    spec = fused.ElementwiseSpec("elementwise_chains", n, 2, (fused.Step("silu", (("x", 0),)), fused.Step("mul", (("t", 0), ("x", 1)))), (1,))
    return fused.elementwise_kernel(spec), fused.pair_epilogue(spec, [gate_first, not gate_first])


@pytest.mark.parametrize("act", ["f32", "int8"])
@pytest.mark.parametrize("shape", [(16, 2, 2, 1, 1, 0, False, 0), (16, 6, 4, 1, 2, 0, False, 0), (16, 2, 2, 1, 1, 0, False, 2),
                                   (4, 4, 2, 1, 1, 0, False, 0), (32, 2, 2, 2, 1, 0, False, 0), (32, 4, 4, 1, 2, 0, False, 0)],
                         ids=["warp", "split-partial", "pipelined", "vec4", "vec32", "vec32-split"])  # fmt: skip
def test_a_pair_epilogue_is_bit_for_bit_the_two_gemvs_then_the_chain(act, shape):
    """`gemv.pair_variant`: the GEMV of two matrices whose groups take row i of both stores `y` and
    `y2` bit for bit as each matrix's GEMV alone, and `z0` as the silu·mul kernel over those (70 rows:
    the split shape's last block holds a partial group; the chain's operands either way round)."""
    from fwdshim.codegen import gemv

    rng = seeds.rng()
    n, k = 70, 512
    base = gemv.gemv_q8(n, k, 1, act, gemv.Shape(*shape))

    def draw(p):  # scales small enough that silu's exp stays finite (the simulator's math.exp raises)
        if p.dtype == "int8":
            return rng.integers(-127, 128, p.size, dtype=np.int8)
        return ((rng.random(p.size) - 0.5) * ((2e-3 if act == "f32" else 2e-5) if p.name == "dw" else 2)).astype(np.float32)

    first = {p.name: draw(p) for p in base.params if p.role == "in"}
    second = {p.name: draw(p) for p in base.params if p.name in ("qs", "dw")}
    g, u = base.run(**first)["y"], base.run(**{**first, **second})["y"]
    for gate_first in (True, False):
        chain, pair = _silu_mul(n, gate_first)
        paired = gemv.pair_variant(base, pair, Tuning())
        assert paired is not None and [p.name for p in paired.params][:4] == ["qs", "dw", "qs2", "dw2"]
        assert [p.name for p in paired.params][-3:] == ["y", "y2", "z0"] and paired.grid == (-(-2 * n // (shape[1] * shape[2] // shape[4])), 1)
        out = paired.run(**first, qs2=second["qs"], dw2=second["dw"])
        z = chain.run(a0=g, a1=u)["y0"] if gate_first else chain.run(a0=u, a1=g)["y0"]
        assert np.array_equal(out["y"].view(np.uint32), g.view(np.uint32))
        assert np.array_equal(out["y2"].view(np.uint32), u.view(np.uint32))
        assert np.array_equal(out["z0"].view(np.uint32), z.view(np.uint32))
        assert not np.array_equal(z, g * u) and np.all(np.isfinite(z))


def test_a_pair_epilogue_needs_pairs_in_one_group():
    """`gemv.pair_variant` is None for a GEMV it cannot pair (odd rows a group, a looping grid, a
    prefetch, more than one row of x) or another kernel (not a Q8_0 GEMV, or one with an epilogue
    already); `gemv_q8` refuses such a pair with the shape named."""
    from fwdshim.codegen import gemv

    _, pair = _silu_mul(128, True)
    ok = gemv.gemv_q8(128, 64, 1, "f32", gemv.Shape(16, 2, 1, 1, 1))
    assert gemv.pair_variant(ok, pair, Tuning()) is not None
    for shape, m in (((16, 1, 1, 1, 1), 1), ((32, 1, 2, 1, 1), 1), ((16, 2, 1, 1, 1, 4), 1), ((16, 2, 1, 1, 1, 0, True), 1), ((16, 2, 1, 1, 1), 2)):
        k = gemv.gemv_q8(128, 64, m, "f32", gemv.Shape(*shape))
        assert gemv.pair_variant(k, pair, Tuning()) is None, k.name
    assert gemv.pair_variant(gemv.dense(128, 64), pair, Tuning()) is None  # not a Q8_0 GEMV
    assert gemv.pair_variant(gemv.pair_variant(ok, pair, Tuning()), pair, Tuning()) is None  # one epilogue
    with pytest.raises(ValueError, match=r"a pair epilogue \(silu_mul\) on the GEMV 1x128x64 v16r1w1u1s1"):
        gemv.gemv_q8(128, 64, 1, "f32", gemv.Shape(16, 1, 1, 1, 1), pair=pair)


@sim_only
def test_gate_up_take_their_silu_mul_as_a_pair_epilogue(monkeypatch):
    """With `Tuning.pair_epilogues` gate and up become one part of their launch that runs silu·mul on each
    pair of rows (SmolLM2's and Llama-3-8B's shapes, both numerics): no tail there, no prologue before
    down (SmolLM2 dequant), no launch of its own (Llama-3-8B); off, the plans are as before. (The
    quantize after it, `quant_epilogue_values`, is left out here: test_pair_quantize_*.)"""
    for d, ff in ((576, 1536), (4096, 14336)):
        m = pipeline(parse(llama_src(d=d, h=9, kv=3, hd=64, ff=ff, l=256)), "int8-act")
        m2 = pipeline(parse(llama_src(d=d, h=9, kv=3, hd=64, ff=ff, l=256)), "dequant")
        for mod in (m, m2):
            for on in (True, False):
                plan = build_plan(functions(mod)[0], mod, Tuning(pair_epilogues=on, quant_epilogue_values=0))
                silu = f"fused_chain_silu_mul_{ff}"
                holder = [x for x in plan.merged if silu in [h.name for h in x.holds]]
                if on:
                    assert len(holder) == 1 and holder[0].epilogues == 1 and holder[0].tails == 0, [x.name for x in plan.merged]
                    names = [h.name for h in holder[0].holds]
                    assert names[-1] == silu and sum(h.startswith(f"gemv_q8_0_") and f"x{ff}x{d}" in h for h in names) == 2
                    assert "_pair_silu_mul_" in holder[0].kernel.source
                    assert f"each block on its rows: stage {holder[0].holds[-1].stage} {silu}" in plan.text()
                else:
                    epis = [h.name for x in plan.merged for h in x.holds[len(x.holds) - x.tails - x.epilogues : len(x.holds) - x.tails]]
                    assert silu not in epis and not any("_pair_silu_mul_" in x.kernel.source for x in plan.merged)
                    assert holder or any(x.name == silu for x in plan.merged)


@sim_only
@pytest.mark.parametrize("numerics", ["dequant", "int8-act", "two-pass-int8"])
def test_pair_epilogues_are_bit_for_bit_their_stages(numerics):
    """The tiny layer with gate/up's silu·mul as their pair epilogue (the default): every output and
    every buffer, gate's and up's products included, is bit for bit the stage launches' (under int8
    activations with the quantize of its result after it, `Tuning.quant_epilogue_values`)."""
    p1 = _tiny_layer_bit_for_bit(numerics)
    pair = [x for x in p1.merged if "_pair_silu_mul_" in x.kernel.source]
    assert len(pair) == 1 and pair[0].holds[-1 if numerics == "dequant" else -2].name.startswith("fused_chain_silu_mul_")
    assert numerics == "dequant" or pair[0].holds[-1].name.startswith("quantize_")


def test_one_wave_launch_bounds(monkeypatch):
    """`merge.one_wave_blocks`: the blocks an SM that run a merged grid in one wave (132 SMs here),
    only when 2..`Tuning.one_wave_blocks` and within the threads and the shared memory an SM holds."""
    from fwdshim.codegen import merge

    pipeline = 8192 * 4 + 2048 * 4  # a pipelined GEMV's `sq` and `sd`: 40 KiB
    assert merge.one_wave_blocks(384, 256, pipeline, Tuning()) == 3  # Llama-3-8B's Q/K/V launch: 1.45 waves unbounded
    assert merge.one_wave_blocks(896, 128, pipeline, Tuning()) == 0  # 7 an SM: past the 5 its 40 KiB allow
    assert merge.one_wave_blocks(896, 128, 0, Tuning()) == 7
    assert merge.one_wave_blocks(1536, 128, 0, Tuning()) == 0  # 12 an SM: past `one_wave_blocks`
    assert merge.one_wave_blocks(120, 256, pipeline, Tuning()) == 0  # one block an SM is no bound
    assert merge.one_wave_blocks(400, 1024, 0, Tuning()) == 0  # 4 blocks of 1024 threads: past 2048 threads
    assert merge.one_wave_blocks(384, 256, pipeline, Tuning(one_wave_blocks=0)) == 0


@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
def test_generated_calls_stay_within_cpythons_argument_limit(numerics):
    """Every call in SmolLM2's merged launches passes at most `merge.MAX_CALL_ARGS` arguments: CPython
    compiles a longer call as `f(*args)`, which Numba's inlining refuses on a GPU (the simulator runs
    it as Python, so only this test sees it). With the weight loads before the wait
    (`Tuning.pre_wait_loads`) each part passes its prologue's arguments on (`_pro`): the int8-act Q/K/V
    launch once passed 31. `_pro` is inlined by NVVM, not Numba: typed once, not once a part (SmolLM2's
    int8-act step built in 132 s on the H200 with Numba's inlining, 45 s with NVVM's)."""
    import ast

    from fwdshim.codegen import gemv

    with gemv_shapes(gemv.launch_shape):  # the defaults, built afresh
        m = pipeline(parse(llama_src(d=576, h=9, kv=3, hd=64, ff=1536, l=1024)), numerics)
        plan = build_plan(functions(m)[0], m, Tuning(pre_wait_loads=4, pre_wait_prologue=True))
    at_wait = [launch.name for launch in plan.merged if "    _pro(" in launch.kernel.source]
    assert len(at_wait) == sum(1 for launch in plan.merged if launch.prologue) >= 2, at_wait
    assert merge.PRO_INLINE == ", forceinline=True"  # NVVM inlines `_pro`: Numba types it once, not once a part
    nvvm = "" if simulating() else merge.PRO_INLINE  # the simulator's `cuda.jit` takes no inlining option
    assert all(f"@cuda.jit(device=True{nvvm})\ndef _pro(" in launch.kernel.source for launch in plan.merged if launch.name in at_wait)
    for launch in plan.merged:
        calls = [c for c in ast.walk(ast.parse(launch.kernel.source)) if isinstance(c, ast.Call)]
        assert max(len(c.args) + len(c.keywords) for c in calls) <= merge.MAX_CALL_ARGS, launch.name


@sim_only
@pytest.mark.parametrize("numerics", ["int8-act"])  # dequant: the same counts (~40 s a numerics under the simulator)
def test_release_counts_are_bit_for_bit_the_stages(numerics):
    """The blocks of launches with tails (rope after Q/K as tails here) and of the attention's splits
    (2 at l = 64) count themselves done with one acquire-release atomic of thread 0 (`source.count_done`;
    the fenced relaxed counts it replaced measured slower, bench/RESULTS.md). Every output and buffer is
    bit for bit the stage launches', and every count is left at zero."""
    shape = dict(TINY, l=64)
    rng = seeds.rng()
    m = pipeline(parse(llama_src(**shape)), numerics)
    weights = llama_weights(rng, **shape)
    inputs = llama_inputs(rng, **shape, rows=shape["l"] - 2)
    out = run_both(m, weights, inputs, tuning=Tuning(rope_epilogues=False, pair_epilogues=False))
    b0, b1, p0, plan = same_bits(out)
    counted = [launch.kernel.name for launch in plan.launches if "atomic_add_acq_rel(count" in launch.kernel.source]
    assert {n.split("_")[0] for n in counted} == {"merged", "attention"}, counted
    assert not any("cuda.atomic.add(count" in launch.kernel.source for launch in plan.launches + p0.launches)
    for name, buf in b1.items():
        if re.search(r"\.(count|qcount\d+)$", name):
            assert not buf.any(), name


@sim_only
@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
def test_qk_norm_merged_launches_are_bit_for_bit_their_stages(numerics):
    """issue 41: a Qwen3 layer (each head's q and k rows RMS-normed before the rope) merged is bit for
    bit its stage launches: the heads' norms (`h` and `kv` rows) are one launch, each carrying the
    rope of its rows (`norms.rope_variant`; at heads of 32, pairs (i, i + 16) across a norm's
    threads, the ropes run as its tails instead)."""
    rng = seeds.rng()
    for hd, how in ((64, "epilogues"), (32, "tails")):
        sizes = dict(TINY, d=128, h=2, kv=1, hd=hd)
        m = pipeline(parse(llama_src(**sizes, qk_norm=True)), numerics)
        out = run_both(m, llama_weights(rng, **sizes, qk_norm=True), llama_inputs(rng, **sizes, rows=2))
        *_, p0, p1 = same_bits(out)
        norm = next(x for x in p1.merged if x.holds and x.holds[0].name.startswith("rms_norm_w_2x"))
        assert [h.name.split("_")[0] for h in norm.holds] == ["rms", "rms", "rope", "rope"], norm.holds
        assert (norm.epilogues, norm.tails) == ((2, 0) if how == "epilogues" else (0, 2)), hd
        assert (f"rope{hd}h{hd // 2}" in norm.kernel.source) == (how == "epilogues")
        assert p1.kernel_count < p0.kernel_count


@sim_only
@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
def test_bias_epilogues_are_bit_for_bit_their_stages(numerics):
    """issue 41: a Qwen2 layer (a bias added to q, k and v after the three projections) merged is bit
    for bit its stage launches: the three GEMVs one launch, each bias its epilogue, and the rope of the
    q and k sums after it in the same part (`gemv.rope_variant` of a GEMV carrying the add)."""
    rng = seeds.rng()
    m = pipeline(parse(llama_src(**TINY, bias=True)), numerics)
    out = run_both(m, llama_weights(rng, **TINY, bias=True), llama_inputs(rng, **TINY, rows=2))
    *_, p0, p1 = same_bits(out)
    qkv = next(x for x in p1.merged if sum(h.name.startswith("gemv") for h in x.holds) == 3)
    assert sum(h.name.startswith("elementwise_add") for h in qkv.holds) == 3 and qkv.epilogues == 5
    assert "fmul_rn(ep_out[" in qkv.kernel.source  # the rope turns the stored sum
    assert p1.kernel_count < p0.kernel_count


@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
def test_no_prologue_for_a_set_whose_warps_may_leave_early(numerics):
    """A GEMV whose grid holds more rows than its matrix (a router over 2 experts: one block of 8
    warps for 2 rows) returns early from the warps past its last row; run at their wait, the
    prologue's work on those warps was skipped (the second half of a quantized activation stayed
    zero: `test_every_legal_stage_lowers_and_matches_the_executor[61-int8-act]`). Such a set takes no
    prologue (`Facts.returns`), and the step is the executor's."""
    from support import random_stages

    from fwdshim import reference
    from fwdshim.dialects.fwd import dims_of
    from passes.test_legal_lowers import shimmed, weights_of

    _, _, text = random_stages.draw(61)  # x -> (quantize) -> fwd.moe over 2 experts, top 1
    module = shimmed(text, numerics)
    plan = build_plan(functions(module)[0], module, Tuning())
    logits = next(x for x in plan.launches if any(h.kernel.name.startswith("gemv_q8_0") and "x2k1" not in h.kernel.name
                                                  for h in (x.holds or (x,))))  # fmt: skip
    part = next(h for h in (logits.holds or (logits,)) if h.kernel.name.startswith("gemv_q8_0"))
    assert not (part.kernel.facts.returns and logits.prologue), logits.name
    if numerics == "int8-act":  # the case: the quantize before a GEMV of one warp-group a row (split 1), 2 rows
        assert part.kernel.facts.returns and logits.prologue == 0, logits.name
    rng = seeds.rng()
    weights = weights_of(module, rng)
    func = next(op for op in module.walk() if op.name == "func.func")
    inputs = {a.name_hint: rng.standard_normal(dims_of(a.type) or ()).astype(np.float32) for a in func.body.block.args}
    got = CompiledForward(module, weights).run_stagewise(inputs)
    want = reference.execute(module, inputs, weights)
    tol = 2e-5 if numerics == "dequant" else 2e-2
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g.copy_to_host()), w, rtol=0, atol=tol * max(1.0, float(np.abs(w).max())))
