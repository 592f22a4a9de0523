"""Program order of the stages of one block: the IR helpers the fusion rules and the other passes share.

`comes_before` walks out from one op both ways at once (it costs the distance between the two, not the
block's length); `in_program_order` sorts by it, or by the positions a `FuseContext` keeps.
Convexity (`FuseContext.convex`, `between`) stays with the context, whose positions it reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cmp_to_key
from typing import Protocol

from xdsl.ir import Operation, OpResult, SSAValue

from fwdshim.dialects.fwd import FusedOp, StageOp


class Positions(Protocol):
    """What keeps each op's position in its block (`rules.FuseContext`)."""

    def pos(self, op: Operation) -> int: ...


def is_top(op: Operation) -> bool:
    """A stage that is not a part of a fused op."""
    return isinstance(op, StageOp) and not isinstance(op.parent_op(), FusedOp) and op.parent_block() is not None


def producer(v: SSAValue) -> Operation | None:
    """The op that defines `v`, or None for a block argument."""
    return v.op if isinstance(v, OpResult) else None


def comes_before(a: Operation, b: Operation) -> bool:
    """Whether `a` precedes `b` in the block they share. Walks out from `a` both ways at once, so it
    costs the distance between them, not the block's length (`Block.get_operation_index` scans the
    block: sorting by it made fusing a many-layer step quadratic)."""
    if a is b:
        return False
    ahead, behind = a.next_op, a.prev_op
    while ahead is not None or behind is not None:
        if ahead is b:
            return True
        if behind is b:
            return False
        ahead = ahead.next_op if ahead is not None else None
        behind = behind.prev_op if behind is not None else None
    return False


def in_program_order(ops: Iterable[Operation], ctx: Positions | None = None) -> list[Operation]:
    """`ops` (of one block) sorted in program order (by `ctx`'s positions when given)."""
    if ctx is not None:
        return sorted(ops, key=ctx.pos)
    return sorted(ops, key=cmp_to_key(lambda a, b: 0 if a is b else (-1 if comes_before(a, b) else 1)))
