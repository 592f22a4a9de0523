"""`fwdshim-opt -t numba`: the launch plan and the generated Numba CUDA source of every kernel.

For each function holding stages (a module without one prints a line saying so; a stage outside
any function is an error, as in `fwd-lower-numba`): the plan (`LaunchPlan.text()`, lines starting `//`), then the
source (`LaunchPlan.source_text()`: the prelude every kernel module starts with, once, then each
kernel's own text under `# ---- kernel NAME`). The plan is the one `fwd-lower-numba` attached, or
built here. A stage that cannot be lowered is an error per stage (`file:line:col: error: ...`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.arg_spec import ArgSpec
from xdsl.utils.target import Target

from fwdshim.codegen.plan import PlanError, build_plan, functions, unplanned_stages
from fwdshim.passes.lower_numba import plan_of
from fwdshim.codegen.tuning import DEFAULT
from fwdshim.passes.options import TuningOptions, bare_flags, tuning_of


@dataclass(frozen=True)
class NumbaTarget(TuningOptions, Target):
    """Print the launch plan and the Numba CUDA source of every kernel."""

    name = "numba"

    plan_only: bool = False
    """Print the launch plan without the kernel source (`numba{plan_only}` alone: true)."""

    @classmethod
    def from_spec(cls, spec: ArgSpec):  # type: ignore[override]
        """As xDSL's, except that `plan_only` written bare is true (as a pass's boolean option)."""
        return super().from_spec(bare_flags(cls, spec))

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        plans, errors = [], unplanned_stages(module)
        tuning = tuning_of(self)
        for func in functions(module):
            try:
                given = plan_of(func)  # `fwd-lower-numba`'s, unless the target was given other tuning
                fits = given is not None and (tuning == DEFAULT or given.tuning == tuning)
                plans.append(given if fits else build_plan(func, module, tuning))
            except PlanError as e:
                errors.append(str(e))
        if errors:
            raise PlanError("\n".join(errors))
        if not plans:
            output.write("// no launch plan: no function of the module holds a fwd stage\n")
        for plan in plans:
            output.write(plan.text())
            if not self.plan_only:
                output.write("\n")
                output.write(plan.source_text())
