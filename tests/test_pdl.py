"""Programmatic dependent launch (`kernel.PDL`, `FWDSHIM_PDL`): where `build` places the waits in a
kernel's source; `ahead` by default."""

from __future__ import annotations

import pytest

from fwdshim.codegen import kernel

BODY = """\
@cuda.jit(device=True, inline=True)
def helper(a):
    return a


@cuda.jit(cache=True)
def entry_k(x, y):
    i = cuda.grid(1)
    y[i] = helper(x[i])
"""


def test_pdl_is_ahead_unless_asked(monkeypatch):
    monkeypatch.delenv("FWDSHIM_PDL", raising=False)
    assert kernel._pdl_mode() == "ahead"
    for value, mode in (("0", "off"), ("1", "early"), ("wait", "wait"), ("EARLY", "early"), ("ahead", "ahead")):
        monkeypatch.setenv("FWDSHIM_PDL", value)
        assert kernel._pdl_mode() == mode
    monkeypatch.setenv("FWDSHIM_PDL", "sometimes")
    with pytest.warns(UserWarning, match="none of off, wait, ahead, early"):
        assert kernel._pdl_mode() == "ahead"


def test_waits_open_the_kernel_function_only():
    assert kernel._with_pdl(BODY, "entry_k", "off") == BODY
    wait = kernel._with_pdl(BODY, "entry_k", "wait").splitlines()
    i = wait.index("def entry_k(x, y):")
    assert wait[i + 1] == "    pdl_wait()" and wait[i + 2] == "    i = cuda.grid(1)"
    assert "pdl_launch()" not in "\n".join(wait)
    early = kernel._with_pdl(BODY, "entry_k", "early").splitlines()
    assert early[i + 1 : i + 3] == ["    pdl_launch()", "    pdl_wait()"]
    assert early[: i - 1] == wait[: i - 1]  # the device function is left as it is
    ahead = kernel._with_pdl(BODY, "entry_k", "ahead").splitlines()
    assert ahead[i + 1 : i + 4] == ["    pdl_wait()", "    pdl_launch()", "    i = cuda.grid(1)"]


def test_a_kernel_placing_its_own_wait_keeps_it():
    own = BODY.replace("    i = cuda.grid(1)\n", "    i = cuda.grid(1)\n    pdl_wait()\n")
    assert kernel._with_pdl(own, "entry_k", "early") == own
    # a wait inside a device function is not the kernel's own
    inner = BODY.replace("    return a\n", "    pdl_wait()\n    return a\n")
    assert kernel._with_pdl(inner, "entry_k", "wait").count("pdl_wait()") == 2
    with pytest.raises(ValueError, match="no kernel function `other_k`"):
        kernel._with_pdl(BODY, "other_k", "wait")


def test_pre_wait_copies_wait_after_the_pipeline_prologue(monkeypatch):
    """`gemv.PRE_WAIT`: a pipelined GEMV issues its first weight copies, then waits (`LATE_WAIT`):
    `_with_pdl` adds no wait at its top, and the results are bit for bit those without it."""
    import numpy as np
    import seeds

    from fwdshim.codegen import gemv

    g = seeds.rng()
    n, k = 48, 1024
    shape = gemv.Shape(16, 4, 4, 1, 1, stages=2)
    args = dict(qs=g.integers(-127, 128, size=n * k, dtype=np.int8), dw=(g.random(n * k // 32) * 0.02).astype(np.float32),
                x=g.standard_normal(k).astype(np.float32))  # fmt: skip
    monkeypatch.setattr(kernel, "PDL", "ahead")
    outs = {}
    for pre in (False, True):
        monkeypatch.setattr(gemv, "PRE_WAIT", pre)
        gemv.q8_0.cache_clear()
        mm = gemv.gemv_q8(n, k, 1, "f32", shape)
        lines = [ln.strip() for ln in mm.body.splitlines()]
        top = lines.index("def gemv_k(qs, dw, x, y):")
        if pre:
            wait = lines.index("pdl_wait()")
            assert lines[wait - 2 : wait + 2] == ["cp_async_commit()", kernel.LATE_WAIT, "pdl_wait()", "pdl_launch()"]
            assert lines.count("pdl_wait()") == 1 and "cp_async16(sq, (0 + tid) * 4, qs, w0 + ca * 16)" in lines[top:wait]
            assert not any(ln.startswith("for t0") for ln in lines[top:wait])  # before the main loop
        else:
            assert lines[top + 1 : top + 3] == ["pdl_wait()", "pdl_launch()"]
        outs[pre] = mm.run(**args)["y"]
    gemv.q8_0.cache_clear()
    np.testing.assert_array_equal(outs[True].view(np.uint32), outs[False].view(np.uint32))


def test_a_merged_set_of_late_waiting_parts_adds_no_wait(monkeypatch):
    """A merged parallel set whose every part waits after its weight copies opens with no wait of its
    own; with a part that waits at its top, the launch waits first."""
    from fwdshim.codegen import gemv, merge

    monkeypatch.setattr(kernel, "PDL", "ahead")
    monkeypatch.setattr(gemv, "PRE_WAIT", True)
    piped = gemv.Shape(16, 2, 2, 1, 1, stages=2)
    for second, late in ((piped, True), (gemv.Shape(16, 1, 2, 1, 1), False)):
        parts = [gemv.gemv_q8(n, 512, 1, "f32", s) for n, s in zip((5, 3), (piped, second), strict=True)]
        maps = [[0, 1, 2, 3], [4, 5, 2, 6]]
        params = list(parts[0].params) + [parts[1].params[0], parts[1].params[1], parts[1].params[-1]]
        params = [p.__class__(f"a{j}", p.dtype, p.size, p.role, p.doc) for j, p in enumerate(params)]
        mk = merge.merged_kernel(parts, [], maps, len(params), params)
        entry = mk.body[mk.body.index("def merged_k(") :].splitlines()
        assert any(ln.strip() == kernel.LATE_WAIT for ln in entry) == late
        assert (entry[1:3] == ["    pdl_wait()", "    pdl_launch()"]) == (not late)
        assert "pdl_wait()" not in "\n".join(entry[1:]) or not late
