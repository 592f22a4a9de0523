"""`fwd-legalize`: the forward's legality — refuse what its kernels do not compute, with the seed's reason.

Source: DESIGN.md §1.3 and §4; the seed's `supports`, `fits` and `kernel_refusal` (`fwdshim.shim.forward`).

Per top-level stage, in program order:
- a `fwd.fused` of a DECOMPOSE class is split back into its parts (block arguments become the
  operands, yielded values the results; each part keeps its location and is marked
  `fwd.decomposed_from = "<class>"`), and each part is then checked like any stage;
- a `fwd.fused` of a REFUSE class, or holding a part of one, is refused with `supports`' reason;
- a NATIVE `fwd.fused` first has its nested DECOMPOSE parts split in place, then goes to `fits`;
- every other stage goes to `fits` (`kernel_refusal` for a primitive).

`strict` reports every refused op of the module in one run, each as `file:line:col: error: <reason>`,
and fails; `mark` leaves refused ops in place with `fwd.refused = "<reason>"` and succeeds. A
`fwd.refused` mark already in the IR (an earlier run, other numerics) is dropped where the op fits. On success
the module carries the numerics contract as `fwd.numerics` (the `Contract` plus `shim = name()`).
"""

from __future__ import annotations

import sys
import warnings
from collections import deque
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from fwdshim.diagnostics import where
from fwdshim.dialects.fwd import FusedOp, YieldOp, stages
from fwdshim.passes.fuse import unfused_guards
from fwdshim.passes.options import NumericsPass, quantized_for
from fwdshim.passes.plan_attrs import forget_plan
from fwdshim.passes.rules import RULES
from fwdshim.shim.contract import NUMERICS_ATTR, ContractError, contract_attr, shim_of
from fwdshim.shim.forward import ForwardShim
from fwdshim.shim.legality import DECOMPOSED_ATTR, check
from fwdshim.shim.refusal import REFUSED_ATTR, Refusal
from fwdshim.shim.report import report_table

MODES = ("strict", "mark")


def decompose(op: FusedOp) -> list[Operation]:
    """Split `op` into its parts in place: returns the parts, now in `op`'s block."""
    block = op.body.block
    parts = op.parts()
    for p in parts:
        p.attributes[DECOMPOSED_ATTR] = StringAttr(op.class_.data)
    Rewriter.inline_block(block, InsertPoint.before(op), op.operands)
    yield_op = op.prev_op
    assert isinstance(yield_op, YieldOp), "a verified fused region ends in fwd.yield"
    for res, val in zip(op.results, yield_op.operands, strict=True):
        res.replace_all_uses_with(val)
    Rewriter.erase_op(yield_op)
    Rewriter.erase_op(op)
    return parts


def _split_nested(shim: ForwardShim, op: FusedOp) -> None:
    """Split the DECOMPOSE fused parts nested anywhere inside the NATIVE fused op `op`."""
    while True:
        nested = [p for p in op.body.walk() if isinstance(p, FusedOp) and shim.supports(p.class_id).is_decompose]
        if not nested:
            return
        decompose(nested[0])


def split_decomposed(shim: ForwardShim, module: Operation) -> None:
    """Split every `fwd.fused` of a DECOMPOSE class in `module` (top level, or nested in a NATIVE
    one) into its parts, as `legalize` does. `forward-shim` does this first, so that the parts are
    quantized and fused like any stage: split after quantization, a Q8_0 matmul of a
    `merged_gate_up` read f32 under int8-act, against the module's contract, and a second run of the
    pipeline fused what the first left split."""
    work = deque(stages(module))
    while work:
        op = work.popleft()
        if not isinstance(op, FusedOp):
            continue
        support = shim.supports(op.class_id)
        if support.is_decompose:
            work.extendleft(reversed(decompose(op)))
        elif support.is_native:
            _split_nested(shim, op)


def legalize(shim: ForwardShim, module: Operation) -> list[tuple[Operation, Refusal]]:
    """Decompose and check every top-level stage of `module`; returns the refused ops with why."""
    refused: list[tuple[Operation, Refusal]] = []
    work = deque(stages(module))
    while work:
        op = work.popleft()
        if isinstance(op, FusedOp):
            support = shim.supports(op.class_id)
            if support.is_decompose:
                work.extendleft(reversed(decompose(op)))
                continue
            if support.is_native:
                _split_nested(shim, op)
        r = check(shim, op)
        if r is not None:
            refused.append((op, r))
    return refused


def _say_replaced(module: ModuleOp, shim: ForwardShim, numerics: str) -> None:
    """A warning (`ContractReplaced`, located at the module) when the contract this run writes
    replaces another one the module holds, or one that cannot be read: the pass never overwrites a
    module's `fwd.numerics` silently. Nothing when the module holds none or the same one."""
    old = module.attributes.get(NUMERICS_ATTR)
    if old is None:
        return
    try:
        held = shim_of(module)
    except ContractError as e:
        why = str(e).split("error: ", 1)[-1].splitlines()[0]
        warnings.warn(ContractReplaced(f"{where(module)}: the module's {why}; fwd-legalize{{numerics={numerics}}} "
                                       f"replaces it with {shim.name()}"), stacklevel=3)  # fmt: skip
        return
    if held.kind is not shim.kind:
        warnings.warn(ContractReplaced(f"{where(module)}: fwd-legalize{{numerics={numerics}}} replaces the module's "
                                       f"fwd.numerics contract {held.name()} (written for numerics={held.kind.value}) "
                                       f"with {shim.name()}"), stacklevel=3)  # fmt: skip


class ContractReplaced(UserWarning):
    """`fwd-legalize` replaced a module's `fwd.numerics` contract of other numerics, or an unreadable one."""


@dataclass(frozen=True)
class LegalizePass(NumericsPass):
    """Refuse the ops the forward's kernels do not compute (seed reasons); split DECOMPOSE fused ops."""

    name = "fwd-legalize"

    numerics: str = "dequant"
    """The forward's numerics: `dequant` (f32 activations), `int8-act` (quantized in the producer's
    epilogue) or `two-pass-int8` (a separate quantize stage)."""

    mode: str = "strict"
    """`strict`: report every refused op as an error at its location and fail; `mark`: put
    `fwd.refused = "<reason>"` on each refused op and succeed."""

    explain: bool | None = None
    """Print the legality report (as `fwdshim-opt --explain`) when the pass has run."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mode not in MODES:
            raise ValueError(f"option `mode` of `fwd-legalize` takes strict or mark, not `{self.mode}`")
        if self.explain is not None and not isinstance(self.explain, bool):
            raise ValueError(f"option `explain` of `fwd-legalize` takes true or false, not `{self.explain!r}`")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        forget_plan(op)
        shim = self.shim
        before = quantized_for(op, self.numerics)  # other numerics the activations were quantized for, if any
        refused = legalize(shim, op)
        targets = {target for target, _ in refused}
        for o in op.walk():  # a mark left by an earlier run (other numerics) where the op now fits
            if REFUSED_ATTR in o.attributes and o not in targets:
                del o.attributes[REFUSED_ATTR]
        if self.mode == "mark":
            for target, r in refused:
                target.attributes[REFUSED_ATTR] = StringAttr(r.reason)
        if not refused or self.mode == "mark":
            _say_replaced(op, shim, self.numerics)
            op.attributes[NUMERICS_ATTR] = contract_attr(shim)
        if self.explain:  # on stderr with the errors when the pass fails, as `fwdshim-opt --explain`
            failing = bool(refused) and self.mode == "strict"
            print(report_table(op, shim, [r.name for r in RULES], unfused_guards), end="", file=sys.stderr if failing else sys.stdout)
        if refused and self.mode == "strict":
            lines = [r.error_line() for _, r in refused]
            if before is not None:
                lines.append(f"note: the module's activations were quantized for {before[0]} (its {before[1]} blocks); "
                             f"for {self.numerics} run the pipeline on the IR from before that")  # fmt: skip
            raise PassFailedException("\n".join(lines))
