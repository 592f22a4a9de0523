"""One generated kernel per `fwd.fused` op (DESIGN.md §6): what each native class lowers to.

- `flatten(op) -> Flat`: a fused op's primitive leaves in program order (the seed's `leaves`, nested
  fused parts walked), every operand traced to its source (`Flat.src`): the result of an earlier
  leaf or a value outside the op (an operand of the top fused op), and which results of the top op
  each leaf value is yielded as (`Flat.results_of`).
- `elementwise_kernel(spec) -> Kernel`: the register-carried kernel of `elementwise_chains` and
  `elementwise_regions`. One thread per index: each external input is loaded once into a register
  (`x0 = a0[i]`), each part is one expression over registers (`t0 = ...`), each result (every value
  yielded by the op) is stored once (`y0[i] = t1`); intermediates never leave registers. The
  expressions are `unary.binary_expr` / `unary.silu_expr`, the text of the unfused elementwise and
  silu kernels, rounding spelled out (`fadd_rn`, `fmul_rn`, ...), so fused == unfused bit for bit.
  Params `a0..a{I-1} f32 [n]` (the external inputs, in first-use order), `y0..y{R-1} f32 [n]`.
- `lower_fused(op) -> list[Binding]`: the kernel(s) of one native fused op and what each parameter
  reads or writes, for the launch plan (`codegen.plan`):
  `norm_weight`, `add_norm`, `norm_quant`, `add_norm_quant` -> E's parametric RMS norm row kernel
  (`norms.rms_norm`: a weight, a residual added first with the sum written on, a quantize epilogue);
  `attn_output_quant` -> the attention kernel with its quantize epilogue (`attention.attention`);
  `elementwise_chains`, `elementwise_regions` -> `elementwise_kernel`.
  A shape of parts the kernels do not compute raises `Unlowerable` (a reason, never a silent skip).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue

from fwdshim.codegen.compile import Kernel, Param, build, check_block
from fwdshim.codegen.unary import binary_expr, silu_expr
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

CACHE_LEN = "%cache_len"
"""The per-step buffer (`int32 [1]`) holding how many cache rows are written: every attention reads it
(its `pos` parameter); the runtime writes it before each launch."""

DEFAULT_EPS = 1e-5
"""The `eps` of an RMS norm that gives none (as the reference executor's)."""


class Unlowerable(Exception):
    """A stage the kernels do not compute; the message says why (the plan locates it)."""


# ---------------------------------------------------------------------------------------------
# bindings: a kernel and what each of its parameters reads or writes


@dataclass(frozen=True)
class Ref:
    """What one kernel parameter is bound to: part `part` of the buffer of `value` (an SSA value of
    the function), or, with `value` None, the buffer `scratch`: the stage's own scratch buffer, or a
    function-wide one where the name starts with `%` (`CACHE_LEN`)."""

    value: SSAValue | None
    part: str = ""
    scratch: str = ""


@dataclass(frozen=True)
class Binding:
    """One kernel launch of a stage: the kernel and a `Ref` per parameter name (unbound parameters
    are the stage's scratch buffers, named after the parameter)."""

    kernel: Kernel
    refs: dict[str, Ref] = field(hash=False)


def qact_refs(v: SSAValue, fmt: str, prefix: str = "") -> dict[str, Ref]:
    """The `q`, `d` (, `s`) parameters of a quantized activation bound to the parts of `v`."""
    parts = ("q", "d", "s") if fmt == "two_words" else ("q", "d")
    return {f"{prefix}{p}": Ref(v, p) for p in parts}


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
    """A fused op seen as its leaves (see the module docstring)."""

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


def _one_result(flat: Flat, v: SSAValue, what: str) -> SSAValue | None:
    res = flat.results_of(v)
    if len(res) > 1:
        raise Unlowerable(f"the fused op yields its {what} {len(res)} times — its kernel writes it once")
    return res[0] if res else None


# ---------------------------------------------------------------------------------------------
# elementwise chains and regions: one register-carried kernel


@dataclass(frozen=True)
class Step:
    """One part of an elementwise kernel: `kind` (`silu` or an elementwise kind) over operands, each
    `("x", j)` (external input j) or `("t", j)` (the result of step j)."""

    kind: str
    args: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class ElementwiseSpec:
    """A register-carried kernel: `n` indices, `inputs` external arrays, `steps` in order, and the
    step whose result each output stores (`outputs[r]` = step index)."""

    cls: str
    n: int
    inputs: int
    steps: tuple[Step, ...]
    outputs: tuple[int, ...]

    def name(self) -> str:
        kinds = "_".join(s.kind for s in self.steps)
        if len(kinds) > 40:
            kinds = kinds[:32] + "_" + hashlib.sha256(repr(self).encode()).hexdigest()[:7]
        short = "chain" if self.cls == "elementwise_chains" else "region"
        return f"fused_{short}_{kinds}_{self.n}"


def _expr(step: Step) -> str:
    ops = [f"{'x' if k == 'x' else 't'}{j}" for k, j in step.args]
    if step.kind == "silu":
        return silu_expr(ops[0])
    return binary_expr(step.kind, ops[0], ops[1])


@functools.cache
def elementwise_kernel(spec: ElementwiseSpec, *, block: int = 256) -> Kernel:
    """The register-carried elementwise kernel of `spec` (see the module docstring)."""
    check_block(block)
    n = spec.n
    if n <= 0 or not spec.steps or not spec.outputs:
        raise ValueError(f"an elementwise kernel of {len(spec.steps)} steps over {n} values")
    ins = [f"a{j}" for j in range(spec.inputs)]
    outs = [f"y{r}" for r in range(len(spec.outputs))]
    lines = [f"x{j} = a{j}[i]" for j in range(spec.inputs)]
    lines += [f"t{s} = {_expr(step)}" for s, step in enumerate(spec.steps)]
    lines += [f"y{r}[i] = t{s}" for r, s in enumerate(spec.outputs)]
    stmts = "\n".join("        " + ln for ln in lines)
    body = f"""\
@cuda.jit(cache=True)
def fused_k({", ".join(ins + outs)}):
    i = cuda.grid(1)
    if i < {n}:
{stmts}
"""
    params = [Param(a, "float32", n, "in", f"external input [{n}]") for a in ins]
    params += [Param(y, "float32", n, "out", f"result of step {s} [{n}]") for y, s in zip(outs, spec.outputs)]
    what = " -> ".join(s.kind for s in spec.steps)
    grid = (-(-n // block),)
    return build(spec.name(), body, "fused_k", grid, (block,), params, f"{spec.cls} over {n}: {what}")


def elementwise_spec(flat: Flat) -> tuple[ElementwiseSpec, list[SSAValue], list[SSAValue]]:
    """The kernel spec of an elementwise chain or region, its external inputs (in first-use order)
    and the fused op's results in output order."""
    n = numel(flat.op.results[0].type) if flat.op.results else None
    inputs: list[SSAValue] = []
    step_of: dict[SSAValue, int] = {}
    steps: list[Step] = []
    for leaf in flat.leaves:
        if isinstance(leaf, SiluOp):
            kind, operands = "silu", [leaf.x]
        elif isinstance(leaf, ElementwiseOp) and leaf.row is None:
            kind, operands = leaf.kind.data.value, [leaf.a, leaf.b]
        else:
            raise Unlowerable(f"a {leaf.name} inside an elementwise {flat.op.class_.data} — its kernel computes silu and elementwise ops only")
        if numel(leaf.results[0].type) != n:
            raise Unlowerable("an elementwise kernel over values of different sizes")
        args: list[tuple[str, int]] = []
        for v in operands:
            s = flat.src(v)
            if s in step_of:
                args.append(("t", step_of[s]))
                continue
            if s not in inputs:
                inputs.append(s)
            args.append(("x", inputs.index(s)))
        step_of[leaf.results[0]] = len(steps)
        steps.append(Step(kind, tuple(args)))
    outputs: list[int] = []
    results: list[SSAValue] = []
    for leaf in flat.leaves:
        for res in flat.results_of(leaf.results[0]):
            outputs.append(step_of[leaf.results[0]])
            results.append(res)
    spec = ElementwiseSpec(flat.op.class_.data, n or 0, len(inputs), tuple(steps), tuple(outputs))
    return spec, inputs, results


def _lower_elementwise(flat: Flat) -> list[Binding]:
    spec, inputs, results = elementwise_spec(flat)
    k = elementwise_kernel(spec)
    refs = {f"a{j}": Ref(v) for j, v in enumerate(inputs)}
    refs.update({f"y{r}": Ref(v) for r, v in enumerate(results)})
    return [Binding(k, refs)]


# ---------------------------------------------------------------------------------------------
# the norm classes: one RMS norm row kernel


def _rows_n(v: SSAValue) -> tuple[int, int]:
    d = dims_of(v.type)
    if not d:
        raise Unlowerable("a norm over an unranked value")
    rows = 1
    for x in d[:-1]:
        rows *= x
    return rows, d[-1]


def _lower_norm(flat: Flat) -> list[Binding]:
    """norm_weight, add_norm, norm_quant, add_norm_quant: `[add] rms_norm [mul weight] [quantize]`."""
    from fwdshim.codegen import norms

    leaves = list(flat.leaves)
    refs: dict[str, Ref] = {}
    add = leaves.pop(0) if leaves and isinstance(leaves[0], ElementwiseOp) else None
    if not leaves or not isinstance(leaves[0], RmsNormOp):
        raise Unlowerable(f"a {flat.op.class_.data} whose parts are not [add] rms_norm [mul] [quantize]")
    norm = leaves.pop(0)
    if norm.bias is not None:
        raise Unlowerable("a bias on an RMSNorm — its kernel scales and never shifts")
    x = flat.src(norm.x)
    residual: SSAValue | None = None if norm.residual is None else flat.src(norm.residual)
    if add is not None:
        if add.kind.data.value != "add" or add.row is not None:
            raise Unlowerable(f"an {add.kind.data.value} into a norm — its kernel adds the residual")
        if x != add.result or residual is not None:
            raise Unlowerable("an add that is not the norm's whole input")
        x, residual = flat.src(add.a), flat.src(add.b)
    weight = None if norm.weight is None else flat.src(norm.weight)
    last = norm.result
    if leaves and isinstance(leaves[0], ElementwiseOp) and leaves[0].kind.data.value == "mul":
        mul = leaves.pop(0)
        a, b = flat.src(mul.a), flat.src(mul.b)
        other = b if a == last else a if b == last else None
        if other is None or other == last or weight is not None or flat.is_leaf_value(other):
            raise Unlowerable("a multiply after a norm that is not by a weight vector")
        if flat.results_of(last):
            raise Unlowerable("a weighted norm whose unweighted result is read too — its kernel writes one")
        weight, last = other, mul.result
    quant = None
    if leaves and isinstance(leaves[0], QuantizeOp) and flat.src(leaves[0].x) == last:
        quant = leaves.pop(0)
    if leaves:
        raise Unlowerable(f"a {leaves[0].name} after the norm in a {flat.op.class_.data}")
    rows, n = _rows_n(norm.x)
    if weight is not None and numel(weight.type) != n:
        raise Unlowerable("a norm weight that is not one value per column")
    sum_out = _one_result(flat, add.result, "sum") if add is not None else None
    y_out = _one_result(flat, last, "normed row")
    fmt = quant.format.data.value if quant is not None else None
    q_out = _one_result(flat, quant.result, "quantized row") if quant is not None else None
    eps = norm.eps.value.data if norm.eps is not None else DEFAULT_EPS
    k = norms.rms_norm(
        n, rows, eps, weight=weight is not None, residual=residual is not None,
        write_sum=sum_out is not None, quant=fmt if q_out is not None else None,
        store_y=y_out is not None,
    )  # fmt: skip
    refs["x"] = Ref(x)
    if residual is not None:
        refs["residual"] = Ref(residual)
    if weight is not None:
        refs["weight"] = Ref(weight)
    if y_out is not None:
        refs["y"] = Ref(y_out)
    if q_out is not None:
        refs.update(qact_refs(q_out, fmt))  # type: ignore[arg-type]
    if sum_out is not None:
        refs["sum"] = Ref(sum_out)
    return [Binding(k, refs)]


# ---------------------------------------------------------------------------------------------
# attention with its quantize epilogue


def attention_refs(op: AttentionOp, src=lambda v: v) -> dict[str, Ref]:
    """The input parameters of the attention kernel bound to `op`'s operands (`pos`: the runtime's
    per-step count of cache rows, the plan's `step` buffer)."""
    names = ("q", "k", "v", "k_cache", "v_cache")
    refs = {p: Ref(src(v)) for p, v in zip(names, (op.q, op.k, op.v, op.k_cache, op.v_cache))}
    refs["pos"] = Ref(None, scratch=CACHE_LEN)
    return refs


def attention_sizes(op: AttentionOp) -> tuple[int, int, int, int]:
    """(h, kv, hd, l) of an attention the kernel computes, else `Unlowerable` with the reason."""
    p = {n: op.properties[n].value.data for n in ("h", "kv", "hd", "vd", "l", "rows")}  # type: ignore[attr-defined]
    for field_name in ("sinks", "scale", "softcap", "pos", "window"):
        if getattr(op, field_name) is not None:
            raise Unlowerable(f"an attention with `{field_name}` — its kernel attends every cached position, scaled by 1/√hd")
    if p["vd"] != p["hd"] or p["rows"] != 1 or p["kv"] == 0 or p["h"] % p["kv"]:
        raise Unlowerable("an attention the kernel does not compute (vd != hd, rows != 1 or uneven GQA)")
    return p["h"], p["kv"], p["hd"], p["l"]


def _lower_attn_quant(flat: Flat) -> list[Binding]:
    from fwdshim.codegen import attention

    if len(flat.leaves) != 2 or not isinstance(flat.leaves[0], AttentionOp) or not isinstance(flat.leaves[1], QuantizeOp):
        raise Unlowerable("an attn_output_quant whose parts are not an attention and a quantize")
    att, quant = flat.leaves
    if flat.src(quant.x) != att.result:
        raise Unlowerable("an attn_output_quant quantizing another value than the attention's")
    h, kv, hd, l = attention_sizes(att)  # noqa: E741
    fmt = quant.format.data.value
    y_out = _one_result(flat, att.result, "attention result")
    q_out = _one_result(flat, quant.result, "quantized attention result")
    try:
        k = attention.attention(h, kv, hd, l, quant=fmt if q_out is not None else None, store_y=y_out is not None)
    except ValueError as e:
        raise Unlowerable(str(e)) from None
    refs = attention_refs(att, flat.src)
    if y_out is not None:
        refs["y"] = Ref(y_out)
    if q_out is not None:
        refs.update(qact_refs(q_out, fmt, prefix="y"))
    return [Binding(k, refs)]


# ---------------------------------------------------------------------------------------------


_BY_CLASS = {
    "norm_weight": _lower_norm,
    "add_norm": _lower_norm,
    "norm_quant": _lower_norm,
    "add_norm_quant": _lower_norm,
    "attn_output_quant": _lower_attn_quant,
    "elementwise_chains": _lower_elementwise,
    "elementwise_regions": _lower_elementwise,
}

FUSED_CLASSES: Sequence[str] = tuple(_BY_CLASS)
"""The fused classes that lower to one generated kernel."""


def lower_fused(op: FusedOp) -> list[Binding]:
    """The kernel of one fused op (see the module docstring); `Unlowerable` for another class."""
    cls = op.class_.data
    fn = _BY_CLASS.get(cls)
    if fn is None:
        raise Unlowerable(f"a fused {cls} — the forward builds no kernel of this class (run fwd-legalize)")
    return fn(flatten(op))


__all__ = [
    "Binding", "CACHE_LEN", "ElementwiseSpec", "Flat", "FUSED_CLASSES", "Ref", "Step", "Unlowerable",
    "attention_refs", "attention_sizes", "elementwise_kernel", "elementwise_spec", "flatten",
    "lower_fused", "qact_refs",
]  # fmt: skip
