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
