"""The legality verdict of one stage: `check`, the function `fwd-legalize` refuses with, the report
explains with and the lowering asserts with.

Source: DESIGN.md §1.3 and §4; the seed's `supports`, `fits` and `kernel_refusal` (`forward.py`).
"""

from __future__ import annotations

from xdsl.ir import Operation

from fwdshim.diagnostics import where
from fwdshim.dialects.fwd import FusedOp
from fwdshim.shim.forward import REFUSED_CLASSES, ForwardShim
from fwdshim.shim.refusal import Refusal

DECOMPOSED_ATTR = "fwd.decomposed_from"
"""On a part split from a DECOMPOSE fused op: the class it was a part of."""


def check(shim: ForwardShim, op: Operation) -> Refusal | None:
    """The refusal of one stage, or None when the forward runs it (a DECOMPOSE fused op is not
    judged here: its parts are). Does not change the IR."""
    if isinstance(op, FusedOp):
        for f in (op, *(p for p in op.body.walk() if isinstance(p, FusedOp))):
            branch = REFUSED_CLASSES.get(f.class_id)
            if branch is not None:
                return Refusal(op.name, where(op), branch.reason, branch.id)
    return shim.refusal(op)
