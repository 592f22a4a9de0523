"""The MoE kernels (codegen.moe) against the reference executor's `moe_route` and `moe`: router
top-k with ties (the lower expert index wins, also at the edge of the kept set), the renormalized
weights, gate-up SwiGLU over only the chosen experts and down-and-combine, under f32 and int8
activations. Weights are quantized by gguf."""

from __future__ import annotations

import numpy as np
import pytest
from support.checks_moe import F32, check_moe, check_router
from support.kernels_common import close, fast_simulator, q8_0, rng  # noqa: F401

from fwdshim.codegen import moe


@pytest.mark.parametrize("act", ["f32", "int8"])
def test_router_ties_lower_index_wins(act):
    # expert 2 and 5 tie for the best, 1 and 3 for the third place: top 3 is 2, 5, 1
    idx, _ = check_router(6, 64, 3, act, [0.1, 0.5, 0.9, 0.5, 0.2, 0.9])
    assert list(idx) == [2, 5, 1]


def test_router_many_experts():
    scales = rng().permutation(np.linspace(0.1, 1.0, 40))
    check_router(40, 32, 4, "f32", scales)


@pytest.mark.parametrize("act", ["f32", "int8"])
def test_moe_matches_reference(act):
    check_moe(6, 64, 32, 2, act)


def test_moe_kernel_interfaces():
    lg = moe.logits(8, 4096, act="int8")  # the family's GEMV: merges as one (the norm its prologue, the top-k its tail)
    assert lg.param_names == ("qs", "dw", "xq", "xd", "y") and lg.spec.family == "gemv" and lg.spec.n == 8
    tk = moe.topk(128, 8)
    assert tk.param_names == ("lg", "idx", "wts") and tk.grid == (1,) and tk.block == (32,)
    assert not tk.facts.barriers and not tk.facts.shared_bytes  # warp-free: a tail of any block size
    gu = moe.gate_up(8, 4096, 14336, 2)  # the family's pair GEMV: gate's and up's rows a group, 8 warps a block
    assert gu.param_names == ("qs", "dw", "qs2", "dw2", "x", "idx", "y", "y2", "z0") and gu.grid == (14336 * 2 // 16, 2)
    assert gu.spec.experts == (8, 2) and gu.spec.pair is moe.SWIGLU
    dn = moe.down(8, 4096, 14336, 2)
    assert dn.param_names == ("qs", "dw", "x", "idx", "y", "wts", "ccount", "out") and dn.grid == (4096 // 32, 2)
    assert "ex = min(max(int64(idx[m]), 0), 7)" in dn.source and "xo = m * 14336" in dn.source and "xo = 0" in gu.source


def test_router_nan_logits_stay_inside_the_expert_stacks():
    """A NaN activation makes every logit NaN: the router's chosen indices must still name experts
    (gate-up and down index the expert stacks with them), never `n_expert`."""
    e, d = 6, 64
    router = rng().standard_normal((e, d)).astype(F32)
    _, rq, rd = q8_0(router)
    x = np.full(d, np.nan, dtype=F32)
    from support.checks_moe import route

    out = route(e, d, 2, "f32", rq, rd, {"x": x})
    assert all(0 <= int(i) < e for i in out["idx"]), list(out["idx"])


@pytest.mark.parametrize("pdl", ["ahead", "early"])
def test_expert_gemvs_read_the_routers_choice_after_their_wait(pdl):
    """The chosen experts come from the router's launch just before: under programmatic dependent
    launch a GEMV that read `idx` (or loaded an expert's rows) before its `pdl_wait()` would read the
    previous token's choice. The dense GEMVs hoist weight loads above the wait
    (`Tuning.pre_wait_loads`); the expert GEMVs must not (the GPU suite caught it: four MoE graph
    tests failed, every simulated one passed, the simulator having no PDL)."""
    from fwdshim.codegen.tuning import Tuning

    t = Tuning(pdl=pdl)
    for k in (moe.gate_up(8, 256, 64, 2, tuning=t), moe.down(8, 256, 64, 2, tuning=t),
              moe.gate_up(8, 256, 64, 2, act="int8", tuning=t)):  # fmt: skip
        body = k.source[k.source.index("def gemv_k"):]
        assert body.index("pdl_wait()") < body.index("idx[") and "ld_i32x4(qs" in body, k.name
        assert body.count("pdl_wait()") == 1


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"shape": "v32"}, ValueError, r"whole-block lanes \(vec 32\)"),  # built a GEMV without idx, wts, out
        ({"experts": (6, 2.5)}, TypeError, "experts' top_k must be an integer, got 2.5"),
        ({"experts": (True, True)}, TypeError, "experts' e must be an integer, got True"),
        ({"experts": 6}, TypeError, r"`experts` is \(e, top_k\), got 6"),
        ({"n": 64.0}, TypeError, "n must be an integer, got 64.0"),
        ({"combine": "no"}, TypeError, "`combine` is True or False"),
        ({"experts": (6, 7)}, ValueError, "top_k > e"),
        ({"shape": "stages"}, ValueError, "async-copy pipeline"),
    ],
)
def test_an_expert_gemv_it_cannot_write_is_an_error(kwargs, error, match):
    """`gemv_blocks(experts=...)` says what it cannot write (a new user's inputs: a vec-32 shape
    silently dropped the experts, floats and bools became sizes in the kernel's source)."""
    from fwdshim.codegen.gemv import Shape, gemv_blocks

    shapes = {"v32": Shape(32, 2, 8, 1, 1), "stages": Shape(16, 2, 4, 1, 1, stages=2)}
    args = {"n": 64, "k": 32, "m": 2, "experts": (6, 2), "combine": True, "shape": Shape(16, 4, 8, 2, 1)}
    args.update({k: shapes.get(v, v) if k == "shape" else v for k, v in kwargs.items()})
    with pytest.raises(error, match=match):
        gemv_blocks(args["n"], args["k"], args["m"], "f32", args["shape"], experts=args["experts"], combine=args["combine"])


def test_an_expert_index_outside_the_stack_reads_no_byte_outside_it():
    """An `idx` outside 0 .. e - 1 (never the router's: it keeps distinct experts of the stack) reads
    the nearest matrix, clamped, not memory past the stack (a new user's -1 and e read outside it)."""
    e, d, ff = 6, 64, 32
    g = rng()
    gate, up = ((g.standard_normal((e, ff, d)) * 0.2).astype(np.float32) for _ in range(2))
    (_, gq, gd), (_, uq, ud) = q8_0(gate), q8_0(up)
    x = g.standard_normal(d).astype(np.float32)
    k = moe.gate_up(e, d, ff, 2)
    out = k.run(qs=gq, dw=gd, qs2=uq, dw2=ud, x=x, idx=np.array([-1, e], np.int32))
    want = k.run(qs=gq, dw=gd, qs2=uq, dw2=ud, x=x, idx=np.array([0, e - 1], np.int32))
    assert np.array_equal(out["z0"], want["z0"]) and np.abs(out["z0"]).max() > 0
