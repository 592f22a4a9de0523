"""One generated kernel per `fwd.fused` op (DESIGN.md §6): what each native class lowers to.

- `flatten(op) -> Flat` (`fwdshim.shim.fused_shapes`'): a fused op's primitive leaves in program order
  (the seed's `leaves`, nested fused parts walked), every operand traced to its source (`Flat.src`): the result of an earlier
  leaf or a value outside the op (an operand of the top fused op), and which results of the top op
  each leaf value is yielded as (`Flat.results_of`).
- `elementwise_kernel(spec, tuning=) -> Kernel`: the register-carried kernel of `elementwise_chains` and
  `elementwise_regions`. One thread per index: each external input is loaded once into a register
  (`x0 = a0[i]`), each part is one expression over registers (`t0 = ...`), each result (every value
  yielded by the op) is stored once (`y0[i] = t1`); intermediates never leave registers. The
  expressions are `unary.binary_expr` / `unary.silu_expr`, the text of the unfused elementwise and
  silu kernels, rounding spelled out (`fadd_rn`, `fmul_rn`, ...), so fused == unfused bit for bit.
  Params `a0..a{I-1} f32 [n]` (the external inputs, in first-use order), `y0..y{R-1} f32 [n]`.
- `lower_fused(op, tuning) -> list[Binding]`: the kernel(s) of one native fused op and what each parameter
  reads or writes, for the launch plan (`codegen.plan`):
  `norm_weight`, `add_norm`, `norm_quant`, `add_norm_quant` -> E's parametric RMS norm row kernel
  (`norms.rms_norm`: a weight, a residual added first with the sum written on, a quantize epilogue);
  `attn_output_quant` -> the attention kernel with its quantize epilogue (`attention.attention`);
  `elementwise_chains`, `elementwise_regions` -> `elementwise_kernel`.
  A shape of parts the kernels do not compute raises `Unlowerable` with legality's B07 reason: the
  shape checks are `fwdshim.shim.fused_shapes`' (one source for `fits` and the lowering); the messages
  kept here are about kernel parameters (an attention's sizes, the kernel factories' limits).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import SSAValue

from fwdshim.codegen import attention, norms
from fwdshim.codegen.gemv_rows import Pair
from fwdshim.codegen.kernel import Kernel, KernelSpec, Param, build, factory
from fwdshim.codegen.launch import CACHE_LEN, Binding, Ref, Unlowerable
from fwdshim.codegen.source import check_block, small_items
from fwdshim.codegen.tuning import DEFAULT, Tuning
from fwdshim.codegen.unary import binary_expr, silu_expr
from fwdshim.dialects.fwd import DEFAULT_EPS, AttentionOp, ElementwiseOp, FusedOp, SiluOp, numel
from fwdshim.shim.forward import B07
from fwdshim.shim.fused_shapes import Flat, attn_quant_refusal, elementwise_refusal, flatten, norm_shape


def qact_refs(v: SSAValue, fmt: str, prefix: str = "") -> dict[str, Ref]:
    """The `q`, `d` (, `s`) parameters of a quantized activation bound to the parts of `v`."""
    parts = ("q", "d", "s") if fmt == "two_words" else ("q", "d")
    return {f"{prefix}{p}": Ref(v, p) for p in parts}


def _refuse(flat: Flat, what: str | None) -> None:
    """`Unlowerable` with B07's reason where `what` (a `fused_shapes` refusal) is given."""
    if what is not None:
        raise Unlowerable(B07.why(flat.op.class_.data, what))


# ---------------------------------------------------------------------------------------------
# elementwise chains and regions: one register-carried kernel


@dataclass(frozen=True)
class Step:
    """One part of an elementwise kernel: `kind` (`silu` or an elementwise kind) over operands, each
    `("x", j)` (external input j) or `("t", j)` (the result of step j)."""

    kind: str
    args: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class ElementwiseSpec(KernelSpec):
    """A register-carried kernel: `n` indices, `inputs` external arrays, `steps` in order, and the
    step whose result each output stores (`outputs[r]` = step index). What `codegen.merge` runs as
    a GEMV pair's epilogue (`pair_epilogue`)."""

    family = "fused_elementwise"
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


def _expr(step: Step, suffix: str = "") -> str:
    ops = [f"{'x' if k == 'x' else 't'}{j}{suffix}" for k, j in step.args]
    if step.kind == "silu":
        return silu_expr(ops[0])
    return binary_expr(step.kind, ops[0], ops[1])


def pair_epilogue(spec: ElementwiseSpec, first: Sequence[bool]) -> Pair:
    """The statements of `spec` as a GEMV pair epilogue (`gemv.Pair`): its input j is `pa` (the
    first matrix's row value) where `first[j]`, else `pb`; each step the expression of the kernel
    (`_expr`), so its bits are the kernel's; its outputs' values in order."""
    if len(first) != spec.inputs:
        raise ValueError(f"{len(first)} operands for an elementwise kernel of {spec.inputs} inputs")
    stmts = [f"x{j}_e = {'pa' if f else 'pb'}" for j, f in enumerate(first)]
    stmts += [f"t{s}_e = {_expr(step, '_e')}" for s, step in enumerate(spec.steps)]
    what = "_".join(s.kind for s in spec.steps)
    return Pair(tuple(stmts), tuple(f"t{s}_e" for s in spec.outputs), what if len(what) <= 24 else "elementwise")


@factory
def elementwise_kernel(spec: ElementwiseSpec, *, block: int = 256, items: int | None = None, tuning: Tuning = DEFAULT) -> Kernel:
    """The register-carried elementwise kernel of `spec` (see the module docstring): `items` indices a
    thread (default `source.small_items`: a small row in one block, every load issued first), thread
    `t` of block `b` taking indices `b*block*items + t + j*block`."""
    check_block(block)
    n = spec.n
    if n <= 0 or not spec.steps or not spec.outputs:
        raise ValueError(f"an elementwise kernel of {len(spec.steps)} steps over {n} values")
    items = items if items is not None else small_items(n, block, spec.inputs, tuning=tuning)
    if items < 1:
        raise ValueError(f"an elementwise kernel of {items} indices a thread")
    ins = [f"a{j}" for j in range(spec.inputs)]
    outs = [f"y{r}" for r in range(len(spec.outputs))]
    if items == 1:
        lines = [f"x{j} = a{j}[i]" for j in range(spec.inputs)]
        lines += [f"t{s} = {_expr(step)}" for s, step in enumerate(spec.steps)]
        lines += [f"y{r}[i] = t{s}" for r, s in enumerate(spec.outputs)]
        stmts = "\n".join("        " + ln for ln in lines)
        body = f"""\
@cuda.jit(cache=True)
def fused_k({", ".join(ins + outs)}):
    i = $gid
    if i < {n}:
{stmts}
"""
    else:
        lines = [f"i0 = $bx * {block * items} + $tx"]
        for it in range(items):
            lines.append(f"i{it} = i0 + {it * block}" if it else "")
            lines += [f"x{j}_{it} = a{j}[i{it}] if i{it} < {n} else float32(0.0)" for j in range(spec.inputs)]
        for it in range(items):
            lines += [f"t{s}_{it} = {_expr(step, f'_{it}')}" for s, step in enumerate(spec.steps)]
        for it in range(items):
            lines.append(f"if i{it} < {n}:")
            lines += [f"    y{r}[i{it}] = t{s}_{it}" for r, s in enumerate(spec.outputs)]
        stmts = "\n".join("    " + ln for ln in lines if ln)
        body = f"""\
@cuda.jit(cache=True)
def fused_k({", ".join(ins + outs)}):
{stmts}
"""
    params = [Param(a, "float32", n, "in", f"external input [{n}]") for a in ins]
    params += [Param(y, "float32", n, "out", f"result of step {s} [{n}]") for y, s in zip(outs, spec.outputs)]
    what = " -> ".join(s.kind for s in spec.steps)
    grid = (-(-n // (block * items)),)
    return build(spec.name(), body, "fused_k", grid, (block,), params, f"{spec.cls} over {n}: {what}", pdl=tuning.pdl,
                 spec=spec)


def elementwise_spec(flat: Flat) -> tuple[ElementwiseSpec, list[SSAValue], list[SSAValue]]:
    """The kernel spec of an elementwise chain or region, its external inputs (in first-use order)
    and the fused op's results in output order."""
    _refuse(flat, elementwise_refusal(flat))
    n = numel(flat.op.results[0].type)
    inputs: list[SSAValue] = []
    step_of: dict[SSAValue, int] = {}
    steps: list[Step] = []
    for leaf in flat.leaves:
        if isinstance(leaf, SiluOp):
            kind, operands = "silu", [leaf.x]
        else:
            assert isinstance(leaf, ElementwiseOp), "elementwise_refusal"
            kind, operands = leaf.kind.data.value, [leaf.a, leaf.b]
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


def _lower_elementwise(flat: Flat, tuning: Tuning) -> list[Binding]:
    spec, inputs, results = elementwise_spec(flat)
    k = elementwise_kernel(spec, tuning=tuning)
    refs = {f"a{j}": Ref(v) for j, v in enumerate(inputs)}
    refs.update({f"y{r}": Ref(v) for r, v in enumerate(results)})
    return [Binding(k, refs)]


# ---------------------------------------------------------------------------------------------
# the norm classes: one RMS norm row kernel


def _lower_norm(flat: Flat, tuning: Tuning) -> list[Binding]:
    """norm_weight, add_norm, norm_quant, add_norm_quant: `[add] rms_norm [mul] [quantize]`."""
    shape = norm_shape(flat)
    if isinstance(shape, str):
        _refuse(flat, shape)
    assert not isinstance(shape, str)
    fmt = shape.quant.format.data.value if shape.quant is not None else None
    eps = shape.norm.eps.value.data if shape.norm.eps is not None else DEFAULT_EPS
    k = norms.rms_norm(
        shape.n, shape.rows, eps, weight=shape.weight is not None, residual=shape.residual is not None,
        write_sum=shape.sum_out is not None, quant=fmt if shape.q_out is not None else None,
        store_y=shape.y_out is not None, tuning=tuning,
    )  # fmt: skip
    named = {"x": shape.x, "residual": shape.residual, "weight": shape.weight, "y": shape.y_out, "sum": shape.sum_out}
    refs = {name: Ref(v) for name, v in named.items() if v is not None}
    if shape.q_out is not None:
        refs.update(qact_refs(shape.q_out, fmt))  # type: ignore[arg-type]
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


def _lower_attn_quant(flat: Flat, tuning: Tuning) -> list[Binding]:
    _refuse(flat, attn_quant_refusal(flat))
    att, quant = flat.leaves
    assert isinstance(att, AttentionOp), "attn_quant_refusal"
    h, kv, hd, l = attention_sizes(att)
    fmt = quant.format.data.value
    y_out = next(iter(flat.results_of(att.result)), None)
    q_out = next(iter(flat.results_of(quant.result)), None)
    try:
        k = attention.attention(h, kv, hd, l, quant=fmt if q_out is not None else None, store_y=y_out is not None, tuning=tuning)
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


def lower_fused(op: FusedOp, tuning: Tuning = DEFAULT) -> list[Binding]:
    """The kernel of one fused op (see the module docstring), built under `tuning`; `Unlowerable` for
    another class."""
    cls = op.class_.data
    fn = _BY_CLASS.get(cls)
    if fn is None:
        raise Unlowerable(f"a fused {cls} — the forward builds no kernel of this class (run fwd-legalize)")
    return fn(flatten(op), tuning)


__all__ = [
    "ElementwiseSpec", "Flat", "FUSED_CLASSES", "Step", "attention_refs", "attention_sizes", "elementwise_kernel", "elementwise_spec", "flatten",
    "lower_fused", "qact_refs",
]  # fmt: skip
