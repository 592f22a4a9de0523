"""`fwd-quantize-activations`: quantize the activations the shim reads quantized.

Source: the seed's `activation(consumer, operand)` and DESIGN.md §3/§4. For every top-level stage and
operand 0 (the operand the forward's int8 projections read), `shim.activation(consumer, 0)` gives the
format: `one_word` under int8-act, `two_words` under two-pass-int8, for a Q8_0 matmul or a MoE;
nothing under dequant. There is one `fwd.quantize` per (value, format), shared by all its consumers
(q, k and v read one), placed right after the value's producer (at the start of its block for a block
argument), so it is the stage after its producer and is defined wherever the value is (consumers in
nested regions, e.g. both arms of an `scf.if`, share it). Its location names the pass and, inside, the
value it reads (`loc("inserted by fwd-quantize-activations"(<the producer's location>))`; a block
argument's: its first consumer's), so a report shows it at that value, as inserted.
An existing quantize is reused only where it is defined before the consumer in an enclosing block.
The consumer's operand 0 then has type `!fwd.qact<N, format>`; a consumer reading rows (a rank-2
operand 0) is an error at its location, as `!fwd.qact` holds one vector.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import PassFailedException

from fwdshim.dialects.attributes import QActType, QuantFormat, QuantFormatAttr
from fwdshim.diagnostics import error_at, file_location, inserted_location
from fwdshim.dialects.fwd import FusedOp, QuantizeOp, StageOp, dims_of, numel
from fwdshim.passes.options import NumericsPass
from fwdshim.passes.ir_order import comes_before
from fwdshim.passes.rules import make_room
from fwdshim.shim.protocol import Shim
from fwdshim.passes.plan_attrs import forget_plan


def _defined_before(q: Operation, consumer: Operation) -> bool:
    """Whether `q` sits before `consumer` (or before the op enclosing it) in an enclosing block."""
    a: Operation | None = consumer
    while a is not None and a.parent_block() is not q.parent_block():
        a = a.parent_op()
    return a is not None and comes_before(q, a)


def _quantize_of(v: SSAValue, fmt: QuantFormat, consumer: Operation) -> QuantizeOp | None:
    """An existing top-level `fwd.quantize` of `v` in format `fmt` that `consumer` may read."""
    for use in v.uses:
        q = use.operation
        if (
            isinstance(q, QuantizeOp)
            and q.format.data == fmt
            and not isinstance(q.parent_op(), FusedOp)
            and _defined_before(q, consumer)
        ):
            return q
    return None


def _insert_point(v: SSAValue) -> InsertPoint:
    """Right after `v`'s producer, or at the start of the block `v` is an argument of."""
    if isinstance(v, OpResult):
        return InsertPoint.after(v.op)
    assert isinstance(v, BlockArgument)
    return InsertPoint.at_start(v.block)


class QuantizeOperand0(RewritePattern):
    """Quantize operand 0 of a stage the shim reads it quantized in."""

    def __init__(self, shim: Shim):
        self.shim = shim

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if not isinstance(op, StageOp) or isinstance(op.parent_op(), FusedOp) or not op.operands:
            return
        x = op.operands[0]
        if isinstance(x.type, QActType):
            return
        fmt = self.shim.activation(op, 0)
        if fmt is None:
            return
        dims = dims_of(x.type)
        if dims is None or len(dims) != 1:
            why = f"{op.name} reads operand 0 of shape {list(dims or ())} quantized; a !fwd.qact holds one vector"
            raise PassFailedException(error_at(op, why))
        q = _quantize_of(x, fmt, op)
        if q is None:
            size = numel(x.type)
            assert size is not None
            q = QuantizeOp.create(
                operands=[x],
                result_types=[QActType(size, fmt)],
                properties={"format": QuantFormatAttr(fmt)},
            )
            q.location = inserted_location(QuantizeActivationsPass.name, _read_at(x, op))
            q.result.name_hint = f"{x.name_hint}_q" if x.name_hint else None
            rewriter.insert(q, _insert_point(x))
        op.operands = [q.result, *op.operands[1:]]
        rewriter.notify_op_modified(op)


def _read_at(x: SSAValue, consumer: Operation):
    """Where the value a quantize reads is made: its producer's location, else (a block argument, a
    producer without a file location) its first consumer's."""
    if isinstance(x, OpResult) and file_location(x.op.location) is not None:
        return x.op.location
    return consumer.location


def quantize_activations(module: ModuleOp, shim: Shim) -> None:
    """Insert the `fwd.quantize` stages `shim.activation` asks for in `module` (in IR already fused,
    the fused ops after them renumbered: `rules.make_room`)."""
    before = {op for op in module.walk() if isinstance(op, QuantizeOp)}
    PatternRewriteWalker(QuantizeOperand0(shim), apply_recursively=False).rewrite_module(module)
    make_room(module, [op for op in module.walk() if isinstance(op, QuantizeOp) and op not in before])


@dataclass(frozen=True)
class QuantizeActivationsPass(NumericsPass):
    """Insert fwd.quantize before operand 0 of each matmul over block-quantized weights (Q8_0, Q4_x, Q5_x, K-quants) and each MoE, as the numerics ask."""

    name = "fwd-quantize-activations"

    numerics: str = "dequant"
    """`dequant`: quantize nothing; `int8-act`: `one_word` blocks (folded into the producer by
    `fwd-fuse`); `two-pass-int8`: `two_words` blocks, a stage of their own."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        self.check_not_quantized_otherwise(op)
        self.run(op)

    def run(self, op: ModuleOp) -> None:
        """The pass on `op` without `apply`'s check of the numerics it was quantized for (`forward-shim`
        leaves that to its legality pass, which locates each op those numerics cannot read)."""
        forget_plan(op)
        quantize_activations(op, self.shim)


