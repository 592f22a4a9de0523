"""What each native fused class's kernel computes, as a shape of parts: pure IR inspection.

One source for legality and the lowering: `fused_shape_refusal(op)` is what `ForwardShim.fits` refuses
as B07 (after the seed's per-class checks), and `fwdshim.codegen.fused` lowers through the same
parsers (`norm_shape`, `elementwise_refusal`, `attn_quant_refusal`), so a fused op legality calls a
native kernel is one the lowering builds. No Numba here.

The kernels (DESIGN.md §6):
- `norm_weight`, `add_norm`, `norm_quant`, `add_norm_quant` — one RMS norm row kernel:
  `[add] rms_norm [mul by a weight vector] [quantize]`; the sum, the normed row and the quantized row
  are each written at most once.
- `elementwise_chains`, `elementwise_regions` — one register-carried kernel: silus and elementwise ops
  (none over a row), every value of one size.
- `attn_output_quant` — the attention kernel with a quantize epilogue: an attention, then the quantize
  of its result.

`Flat` / `flatten` see a fused op as its leaves, every operand traced to its source.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue

from fwdshim.dialects.fwd import (
    AttentionOp,
    ElementwiseOp,
    FusedOp,
    QuantizeOp,
    RmsNormOp,
    SiluOp,
    YieldOp,
    dims_of,
    numel,
)

NORM_CLASSES = ("norm_weight", "add_norm", "norm_quant", "add_norm_quant")
ELEMENTWISE_CLASSES = ("elementwise_chains", "elementwise_regions")
NORM_PARTS = "[add] rms_norm [mul by a weight] [quantize]"

# ---------------------------------------------------------------------------------------------
# flattening


def _canon(v: SSAValue) -> SSAValue:
    """Trace a value used inside a fused op to its source: an earlier leaf's result or a value
    outside every fused op (a region argument is its op's operand, a nested result its yield)."""
    while True:
        if isinstance(v, BlockArgument) and isinstance(v.block.parent_op(), FusedOp):
            v = v.block.parent_op().operands[v.index]  # type: ignore[union-attr]
            continue
        if isinstance(v, OpResult) and isinstance(v.op, FusedOp) and isinstance(v.op.parent_op(), FusedOp):
            y = v.op.body.block.last_op
            assert isinstance(y, YieldOp), "a verified fused region ends in fwd.yield"
            v = y.operands[v.index]
            continue
        return v


@dataclass
class Flat:
    """A fused op seen as its leaves: `leaves` in program order (nested fused parts walked), `yields`
    maps each yielded source value to the results of the top op that yield it."""

    op: FusedOp
    leaves: list[Operation]
    yields: dict[SSAValue, list[SSAValue]]

    def src(self, v: SSAValue) -> SSAValue:
        return _canon(v)

    def is_leaf_value(self, v: SSAValue) -> bool:
        return isinstance(v, OpResult) and v.op in self._leaf_set

    def results_of(self, v: SSAValue) -> list[SSAValue]:
        """The results of the top fused op that yield leaf value `v` (its buffer(s))."""
        return self.yields.get(v, [])

    def __post_init__(self) -> None:
        self._leaf_set = set(self.leaves)


def _leaves(op: FusedOp) -> list[Operation]:
    out: list[Operation] = []
    for p in op.parts():
        out.extend(_leaves(p) if isinstance(p, FusedOp) else [p])
    return out


def flatten(op: FusedOp) -> Flat:
    """The leaves of `op` and where each of its results comes from."""
    y = op.body.block.last_op
    assert isinstance(y, YieldOp), "a verified fused region ends in fwd.yield"
    yields: dict[SSAValue, list[SSAValue]] = {}
    for res, v in zip(op.results, y.operands, strict=True):
        yields.setdefault(_canon(v), []).append(res)
    return Flat(op, _leaves(op), yields)


def _names(ops: list[Operation]) -> str:
    """`fwd.elementwise add, fwd.layer_norm`: the leaves' names (an elementwise op's with its kind)."""
    named = (f"{o.name} {o.kind.data.value}" if isinstance(o, ElementwiseOp) else o.name for o in ops)
    return ", ".join(named) or "no parts"


NO_RESULTS = "no results (a bare fwd.yield), where it writes the values it computes"
"""Why a native class's fused op that yields nothing is refused: its kernel would compute and write
nothing (the elementwise check had compared every part's size with the first result's, None, and
called it "ops over values of different sizes")."""


def _yielded_once(flat: Flat, v: SSAValue | None, what: str) -> str | None:
    n = len(flat.results_of(v)) if v is not None else 0
    return f"its {what} yielded {n} times, where it writes it once" if n > 1 else None


# ---------------------------------------------------------------------------------------------
# the norm classes


@dataclass(frozen=True)
class NormShape:
    """A norm class's parts as its RMS norm row kernel reads them (sources, see `Flat.src`): the row
    `x` and `residual` added first (the add's operands, or the norm's own), the `weight` vector, the
    `rows` x `n` shape, and the top op's results it writes: `sum_out`, `y_out`, `q_out`."""

    norm: RmsNormOp
    x: SSAValue
    residual: SSAValue | None
    weight: SSAValue | None
    quant: QuantizeOp | None
    rows: int
    n: int
    sum_out: SSAValue | None
    y_out: SSAValue | None
    q_out: SSAValue | None


def norm_shape(flat: Flat) -> NormShape | str:
    """The shape of a norm class's parts, or what the kernel does not compute in them (the words
    after B07's dash)."""
    if not flat.op.results:
        return NO_RESULTS
    leaves = list(flat.leaves)
    add = leaves.pop(0) if leaves and isinstance(leaves[0], ElementwiseOp) else None
    if not leaves or not isinstance(leaves[0], RmsNormOp):
        return f"{_names(flat.leaves)}, where it computes {NORM_PARTS}"
    norm = leaves.pop(0)
    if norm.bias is not None:
        return "a bias on its RMSNorm, which scales and never shifts"
    x = flat.src(norm.x)
    residual = None if norm.residual is None else flat.src(norm.residual)
    if add is not None:
        if add.kind.data.value != "add" or add.row is not None:
            return f"an elementwise {add.kind.data.value} into the norm, where it adds a residual"
        if x != add.result or residual is not None:
            return "an add that is not the norm's whole input"
        x, residual = flat.src(add.a), flat.src(add.b)
    weight = None if norm.weight is None else flat.src(norm.weight)
    last = norm.result
    if leaves and isinstance(leaves[0], ElementwiseOp) and leaves[0].kind.data.value == "mul":
        mul = leaves.pop(0)
        a, b = flat.src(mul.a), flat.src(mul.b)
        other = b if a == last else a if b == last else None
        if other is None or other == last or weight is not None or flat.is_leaf_value(other) or mul.row is not None:
            return "a multiply after the norm that is not by a weight vector"
        if flat.results_of(last):
            return "the norm yielded unweighted as well as weighted, where it writes one"
        weight, last = other, mul.result
    quant = None
    if leaves and isinstance(leaves[0], QuantizeOp) and flat.src(leaves[0].x) == last:
        quant = leaves.pop(0)
    if leaves:
        return f"a {leaves[0].name} after the norm, where it computes {NORM_PARTS}"
    d = dims_of(norm.x.type)
    if not d:
        return "a norm over an unranked value"
    rows = 1
    for r in d[:-1]:
        rows *= r
    if weight is not None and numel(weight.type) != d[-1]:
        return "a norm weight that is not one value per column"
    why = _yielded_once(flat, add.result, "sum") if add is not None else None
    why = why or _yielded_once(flat, last, "normed row")
    why = why or (_yielded_once(flat, quant.result, "quantized row") if quant is not None else None)
    if why is not None:
        return why
    first = lambda v: (flat.results_of(v) or [None])[0]  # noqa: E731
    return NormShape(
        norm, x, residual, weight, quant, rows, d[-1],
        sum_out=first(add.result) if add is not None else None,
        y_out=first(last),
        q_out=first(quant.result) if quant is not None else None,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# the elementwise classes and the attention's quantize epilogue


def elementwise_refusal(flat: Flat) -> str | None:
    """What the register-carried kernel does not compute in an elementwise chain or region, or None."""
    if not flat.op.results:
        return NO_RESULTS
    n = numel(flat.op.results[0].type)
    for leaf in flat.leaves:
        pointwise = isinstance(leaf, SiluOp) or (isinstance(leaf, ElementwiseOp) and leaf.row is None)
        if not pointwise:
            return f"a {leaf.name}{' over a row' if isinstance(leaf, ElementwiseOp) else ''}, where it computes silus and elementwise ops only"
        if numel(leaf.results[0].type) != n:
            return "ops over values of different sizes, where it computes every value at one index"
    return None


def attn_quant_refusal(flat: Flat) -> str | None:
    """What the attention kernel's quantize epilogue does not compute in an attn_output_quant, or None."""
    if not flat.op.results:
        return NO_RESULTS
    lv = flat.leaves
    if len(lv) != 2 or not isinstance(lv[0], AttentionOp) or not isinstance(lv[1], QuantizeOp):
        return f"{_names(lv)}, where it computes an attention and the quantize of its result"
    att, quant = lv
    if flat.src(quant.x) != att.result:
        return "a quantize of another value than the attention's"
    return _yielded_once(flat, att.result, "attention result") or _yielded_once(
        flat, quant.result, "quantized attention result"
    )


def fused_shape_refusal(op: FusedOp) -> str | None:
    """What the kernel of `op`'s class does not compute in its parts (B07's words after the dash), or
    None — None too for a class no kernel here is built for (legality judges those otherwise)."""
    cls = op.class_.data
    if cls in NORM_CLASSES:
        shape = norm_shape(flatten(op))
        return shape if isinstance(shape, str) else None
    if cls in ELEMENTWISE_CLASSES:
        return elementwise_refusal(flatten(op))
    if cls == "attn_output_quant":
        return attn_quant_refusal(flatten(op))
    return None
