"""`fwd-lower-numba`: the launch plan of each decode step, and the Numba CUDA source of its kernels.

Source: DESIGN.md §1.4 and §6. The pass builds `codegen.plan.build_plan` for every function that
holds stages (a legalized module: run `forward-shim` or `fwd-legalize` first) and attaches it:

- to the IR, as attributes that print with the module: on the function `fwd.plan = {stages = S,
  kernels = K, buffers = B}`, and on every stage `fwd.kernels = ["<kernel name>", ...]`;
- to Python, as `plan_of(func)`, a side table keyed by the function op (the runtime and the
  `-t numba` target read it; the target builds the plan itself when the pass did not run, or when a
  pass after it changed the function).

A stage it cannot lower (refused, marked `fwd.refused`, or with no kernel) fails the pass with one
`file:line:col: error: <reason>` line per stage.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from fwdshim.codegen.plan import PlanError, build_plan, functions, unplanned_stages
from fwdshim.dialects.fwd import stages
from fwdshim.passes.options import TuningOptions, bare_flags, tuning_of
from fwdshim.passes.plan_attrs import KERNELS_ATTR, PLAN_ATTR, forget_plan


_PLANS: "weakref.WeakKeyDictionary[FuncOp, object]" = weakref.WeakKeyDictionary()


def plan_of(func: FuncOp):
    """The `LaunchPlan` the pass attached to `func`, or None (also when a pass after it changed the
    function: the plan no longer describes it; `-t numba` printed such a stale plan).

    Raises: TypeError when `func` is not a `func.func`."""
    if not isinstance(func, FuncOp):
        raise TypeError(
            f"plan_of(func): func is a func.func op (FuncOp), not {type(func).__name__}"
            + (": pick one of the module's (`op for op in module.walk() if isinstance(op, FuncOp)`)"
               if isinstance(func, ModuleOp) else "")  # fmt: skip
        )
    got = _PLANS.get(func)
    if got is None:
        return None
    plan, text = got
    return plan if str(func) == text else None


def drop_stale_plans(root: Operation) -> None:
    """Remove `fwd.plan` and `fwd.kernels` from each function under `root` that this process lowered
    and a pass changed since (xDSL's `dce`, `cse`: they do not know the attributes describe the IR);
    a function parsed with the attributes keeps them (they print back as they were read)."""
    for func in [f for f in root.walk() if isinstance(f, FuncOp)]:  # one dce left without stages too
        got = _PLANS.get(func)
        if got is not None and str(func) != got[1]:
            forget_plan(func)


@dataclass(frozen=True)
class LowerNumbaPass(TuningOptions, ModulePass):
    """Plan the Numba CUDA kernel launches of each decode step (a kernel a stage, four a MoE, grouped into merged launches)."""

    name = "fwd-lower-numba"

    def __post_init__(self) -> None:
        tuning_of(self)  # a value the back end refuses (`pdl=sometimes`) fails when the pipeline is read

    @classmethod
    def from_spec(cls, spec):  # type: ignore[override]
        """As xDSL's, except that a boolean option written bare (`fwd-lower-numba{pre_wait}`) is true."""
        return super().from_spec(bare_flags(cls, spec))

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        errors = unplanned_stages(op)
        tuning = tuning_of(self)
        for func in functions(op):
            try:
                plan = build_plan(func, op, tuning)
            except PlanError as e:
                errors.append(str(e))
                continue
            func.attributes[PLAN_ATTR] = DictionaryAttr(
                {
                    "stages": IntegerAttr(len(plan.stages), i64),
                    "kernels": IntegerAttr(plan.kernel_count, i64),
                    "buffers": IntegerAttr(len(plan.buffers), i64),
                }
            )
            for stage_op, sp in zip(stages(func), plan.stages, strict=True):
                stage_op.attributes[KERNELS_ATTR] = ArrayAttr([StringAttr(launch.name) for launch in sp.launches])
            _PLANS[func] = (plan, str(func))
        if errors:
            raise PassFailedException("\n".join(errors))
