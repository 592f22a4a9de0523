"""The attributes `fwd-lower-numba` attaches (`fwd.plan` on a function, `fwd.kernels` on a stage),
and `forget_plan`, which every pass that rewrites stages calls first: a plan describes the IR it was
built from, so a pass after the lowering drops it (it printed with the rewritten IR, naming kernels
of stages that were no longer there)."""

from __future__ import annotations

from xdsl.ir import Operation

PLAN_ATTR = "fwd.plan"
KERNELS_ATTR = "fwd.kernels"


def forget_plan(root: Operation) -> None:
    """Remove `fwd.plan` and `fwd.kernels` from every op under `root` (`root` included)."""
    for op in root.walk():
        op.attributes.pop(PLAN_ATTR, None)
        op.attributes.pop(KERNELS_ATTR, None)
