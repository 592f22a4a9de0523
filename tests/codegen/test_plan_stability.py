"""Every kernel's generated source, byte for byte, as recorded before the back end's redesign (issue
39): the plans of `examples/`, of SmolLM2's step (as shipped and requantized to Q8_0) and of both
`bench/decode_step.py` shapes, under every numerics and lowering setting, in the simulator's mode and
the GPU's (`tests/support/plan_sources.py`; `python tests/support/plan_sources.py --write` records anew, for a change
that means to change kernels)."""

from __future__ import annotations

import pytest
from support import plan_sources as ps

# CI checks the default setting and merging off in both modes (`slow`: tests/slow_tests.txt); the other
# settings are a `sweep` (about 18 s of CPU each).
_FAST = {"default", "merge_off"}
_CASES = [
    pytest.param(mode, setting, marks=() if setting in _FAST else pytest.mark.sweep)
    for mode in ps.MODES
    for setting in ps.SETTINGS
]


@pytest.mark.parametrize(("mode", "setting"), _CASES)
def test_kernel_sources_as_recorded(mode, setting):
    want = ps.wanted(mode, setting)
    assert len(want) == 18  # 6 steps x 3 numerics: a lost case fails, not passes
    got = ps.collect_one(mode, setting)
    assert ps.differences(want, got) == []
