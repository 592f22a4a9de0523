"""Programmatic dependent launch (`Tuning.pdl`, `FWDSHIM_PDL` in the tools): where `build` places the
waits in a kernel's source; `ahead` by default."""

from __future__ import annotations

import pytest

from fwdshim.codegen import source
from fwdshim.codegen.tuning import Tuning
from fwdshim.tools.tuning_env import tuning_from_env

BODY = """\
@cuda.jit(device=True, inline=True)
def helper(a):
    return a


@cuda.jit(cache=True)
def entry_k(x, y):
    i = cuda.grid(1)
    y[i] = helper(x[i])
"""


def test_pdl_is_ahead_unless_asked():
    assert Tuning().pdl == "ahead" and tuning_from_env({}).pdl == "ahead"
    for value, mode in (("0", "off"), ("1", "early"), ("wait", "wait"), ("EARLY", "early"), ("ahead", "ahead")):
        assert tuning_from_env({"FWDSHIM_PDL": value}).pdl == mode
    with pytest.warns(UserWarning, match="none of off, wait, ahead, early"):
        assert tuning_from_env({"FWDSHIM_PDL": "sometimes"}).pdl == "ahead"
    with pytest.raises(ValueError, match="tuning pdl='sometimes': one of off, wait, ahead, early"):
        Tuning(pdl="sometimes")


def test_waits_open_the_kernel_function_only():
    assert source._with_pdl(BODY, "entry_k", "off") == BODY
    wait = source._with_pdl(BODY, "entry_k", "wait").splitlines()
    i = wait.index("def entry_k(x, y):")
    assert wait[i + 1] == "    pdl_wait()" and wait[i + 2] == "    i = cuda.grid(1)"
    assert "pdl_launch()" not in "\n".join(wait)
    early = source._with_pdl(BODY, "entry_k", "early").splitlines()
    assert early[i + 1 : i + 3] == ["    pdl_launch()", "    pdl_wait()"]
    assert early[: i - 1] == wait[: i - 1]  # the device function is left as it is
    ahead = source._with_pdl(BODY, "entry_k", "ahead").splitlines()
    assert ahead[i + 1 : i + 4] == ["    pdl_wait()", "    pdl_launch()", "    i = cuda.grid(1)"]


def test_a_kernel_placing_its_own_wait_keeps_it():
    own = BODY.replace("    i = cuda.grid(1)\n", "    i = cuda.grid(1)\n    pdl_wait()\n")
    assert source._with_pdl(own, "entry_k", "early") == own
    # a wait inside a device function is not the kernel's own
    inner = BODY.replace("    return a\n", "    pdl_wait()\n    return a\n")
    assert source._with_pdl(inner, "entry_k", "wait").count("pdl_wait()") == 2
    with pytest.raises(ValueError, match="no kernel function `other_k`"):
        source._with_pdl(BODY, "other_k", "wait")


def test_pre_wait_copies_wait_after_the_pipeline_prologue():
    """`Tuning.pre_wait`: a pipelined GEMV issues its first weight copies, then waits (`LATE_WAIT`):
    `_with_pdl` adds no wait at its top, and the results are bit for bit those without it."""
    import numpy as np
    from support import seeds

    from fwdshim.codegen import gemv

    g = seeds.rng()
    n, k = 48, 1024
    shape = gemv.Shape(16, 4, 4, 1, 1, stages=2)
    args = dict(qs=g.integers(-127, 128, size=n * k, dtype=np.int8), dw=(g.random(n * k // 32) * 0.02).astype(np.float32),
                x=g.standard_normal(k).astype(np.float32))  # fmt: skip
    outs = {}
    for pre in (False, True):
        mm = gemv.gemv_q8(n, k, 1, "f32", shape, tuning=Tuning(pdl="ahead", pre_wait=pre))
        lines = [ln.strip() for ln in mm.body.splitlines()]
        top = lines.index("def gemv_k(qs, dw, x, y):")
        if pre:
            wait = lines.index("pdl_wait()")
            assert lines[wait - 2 : wait + 2] == ["cp_async_commit()", source.LATE_WAIT, "pdl_wait()", "pdl_launch()"]
            assert lines.count("pdl_wait()") == 1 and "cp_async16(sq, (0 + tid) * 4, qs, w0 + ca * 16)" in lines[top:wait]
            assert not any(ln.startswith("for t0") for ln in lines[top:wait])  # before the main loop
        else:
            assert lines[top + 1 : top + 3] == ["pdl_wait()", "pdl_launch()"]
        outs[pre] = mm.run(**args)["y"]
    np.testing.assert_array_equal(outs[True].view(np.uint32), outs[False].view(np.uint32))


@pytest.mark.parametrize("act", ["f32", "int8"])
@pytest.mark.parametrize(("n", "k", "shape"), [
    (40, 576, (16, 2, 8, 1, 1)),  # one full step and a tail of 4 pieces (SmolLM2's int8-act rows)
    (24, 1536, (16, 4, 8, 1, 4)),  # a tail only, four warps a row (SmolLM2's dequant rows)
    (9, 2048, (16, 1, 4, 2, 1)),  # four full steps, unrolled 2: the loop straightened
    (6, 544, (4, 3, 2, 1, 2)),  # 4-byte pieces, rows past N in the last group
    (8, 32 * 138, (32, 1, 4, 2, 2)),  # whole-block lanes: two steps of 64 lanes and a tail of 10 blocks
    (5, 32 * 101, (32, 1, 2, 1, 1)),  # whole-block lanes, one warp a row: three steps and a tail of 5
    (8, 32 * 128, (32, 2, 4, 2, 2)),  # whole-block lanes, two rows of two steps (Llama-3-8B's int8-act O)
])  # fmt: skip
def test_short_rows_load_their_weights_before_the_wait(act, n, k, shape):
    """`Tuning.pre_wait_loads`: a GEMV of at most that many steps (16- or 4-byte pieces, or whole-block
    lanes) issues every weight load (quants and scales) before `pdl_wait()`, reads its activations
    after it, and computes the same bits as the kernel that waits first."""
    import numpy as np
    from support import seeds

    from fwdshim.codegen import gemv

    g = seeds.rng()
    shape = gemv.Shape(*shape)
    qs, dw = g.integers(-127, 128, size=n * k, dtype=np.int8), (g.random(n * k // 32) * 0.02).astype(np.float32)
    if act == "f32":
        acts = dict(x=g.standard_normal(k).astype(np.float32))
    else:
        acts = dict(xq=g.integers(-127, 128, size=k, dtype=np.int8), xd=(g.random(k // 32) * 0.05).astype(np.float32))
    outs = {}
    for hoist in (4, 0):
        kern = gemv.gemv_q8(n, k, 1, act, shape, tuning=Tuning(pdl="ahead", pre_wait_loads=hoist))
        lines = [ln.strip() for ln in kern.body.splitlines()]
        top = lines.index(next(ln for ln in lines if ln.startswith("def gemv_k(")))
        wait = lines.index("pdl_wait()")
        before, after = "\n".join(lines[top:wait]), "\n".join(lines[wait:])
        if hoist:
            assert lines[wait - 1] == source.LATE_WAIT and lines.count("pdl_wait()") == 1
            assert "(qs, " in before and "dw[" in before and "(qs, " not in after and "dw[" not in after
            assert "(x, " not in before and "(xq, " not in before and "for " not in before
        else:
            assert wait == top + 1
        outs[hoist] = kern.run(qs=qs, dw=dw, **acts)["y"]
    np.testing.assert_array_equal(outs[4].view(np.uint32), outs[0].view(np.uint32))
    ref = (qs.reshape(n, k // 32, 32).astype(np.float64) * dw.reshape(n, k // 32, 1))
    x = acts["x"].astype(np.float64) if act == "f32" else (acts["xq"].reshape(-1, 32) * acts["xd"][:, None].astype(np.float64)).ravel()
    np.testing.assert_allclose(outs[4], ref.reshape(n, k) @ x, rtol=2e-5, atol=2e-5 * np.abs(ref.reshape(n, k) @ x).max())


def test_a_merged_set_of_late_waiting_parts_adds_no_wait():
    """A merged parallel set whose every part waits after its weight copies opens with no wait of its
    own; with a part that waits at its top, the launch waits first."""
    from fwdshim.codegen import gemv, merge

    tuning = Tuning(pdl="ahead", pre_wait=True, pre_wait_loads=0)  # the short-row part then waits at its top
    piped = gemv.Shape(16, 2, 2, 1, 1, stages=2)
    for second, late in ((piped, True), (gemv.Shape(16, 1, 2, 1, 1), False)):
        parts = [gemv.gemv_q8(n, 512, 1, "f32", s, tuning=tuning) for n, s in zip((5, 3), (piped, second), strict=True)]
        maps = [[0, 1, 2, 3], [4, 5, 2, 6]]
        params = list(parts[0].params) + [parts[1].params[0], parts[1].params[1], parts[1].params[-1]]
        params = [p.__class__(f"a{j}", p.dtype, p.size, p.role, p.doc) for j, p in enumerate(params)]
        mk = merge.merged_kernel(parts, [], maps, len(params), params, tuning=tuning)
        entry = mk.body[mk.body.index("def merged_k(") :].splitlines()
        assert any(ln.strip() == source.LATE_WAIT for ln in entry) == late
        assert (entry[1:3] == ["    pdl_wait()", "    pdl_launch()"]) == (not late)
        assert "pdl_wait()" not in "\n".join(entry[1:]) or not late


def test_whole_block_lanes_holding_too_many_blocks_wait_first():
    """A whole-block-lane GEMV that would hold more than `Tuning.pre_wait_blocks` blocks a lane across
    its wait (Llama-3-8B's int8-act down projection: three steps and a tail of two rows, 8) waits first."""
    from fwdshim.codegen import gemv

    tuning = Tuning(pdl="ahead", pre_wait_loads=4)
    held = {}
    for shape in (gemv.Shape(32, 2, 8, 2, 4), gemv.Shape(32, 2, 4, 2, 2)):
        kern = gemv.gemv_q8(4096, 14336 if shape.split == 4 else 4096, 1, "int8", shape, tuning=tuning)
        lines = [ln.strip() for ln in kern.body.splitlines()]
        top = next(i for i, ln in enumerate(lines) if ln.startswith("def gemv_k("))
        held[shape.split] = lines.index("pdl_wait()") > top + 1
    assert held == {4: False, 2: True}
