"""The first lowering step: a legalized decode step's stages as kernel launches, and the buffer table.

`stage_plan(func, module, tuning) -> LaunchPlan` walks the top-level stages of a `func.func` in
program order and gives each its kernel launches (DESIGN.md §6): every stage is exactly one kernel —
a primitive its family's kernel (`codegen.norms`, `unary`, `gemv`, `quantize`, `rope`, `attention`),
a `fwd.fused` op its one generated kernel (`codegen.fused`) — except a `fwd.moe`, which is four
(the seed's `router_topk` as the router's logits and its top-k, `moe_gate_up_act`, `moe_down_combine`;
`codegen.moe`). Which kernels a stage takes is
`codegen.stage_kernels.lower_stage`; how each value is named and held, `codegen.buffers`; the plan's
types, `codegen.launch`.

Where the function has attentions over `cache` arguments, the plan's `maintenance` launches (after
the last stage, in the captured graph, of no stage) are `kv_append` (`codegen.attention.kv_append`):
each attention's current `k`, `v` rows copied into row `%cache_len` of its caches (one launch per
`attention.APPEND_LAYERS` attentions; an attention whose caches another already appends to is left
out), so a decode step needs no host-side cache append.

`build_plan(func, module, tuning)` is the whole lowering: `prefetch(merge(stage_plan(...)))`
(`codegen.merge.merge`, `codegen.prefetch.prefetch`), each step switched by its `Tuning` field.

Errors: a stage marked `fwd.refused` (by `fwd-legalize{mode=mark}`), a stage the forward refuses
(`fwd-legalize`'s check, for IR that was not legalized) or one no kernel computes raises `PlanError`,
a `DiagnosticException` listing every such stage as `file:line:col: error: <reason>` — never a
silent skip.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Operation, OpResult, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from fwdshim.codegen import attention
from fwdshim.codegen.buffers import cache_values, role_of, top_value, type_parts, value_names
from fwdshim.codegen.launch import (  # noqa: F401 - the plan's types, re-exported where they were
    _SHORT,
    CACHE_LEN,
    ROLES,
    Arg,
    Binding,
    Buffer,
    Launch,
    LaunchPlan,
    Part,
    Ref,
    StagePlan,
    Unlowerable,
    with_buffers,
)
from fwdshim.codegen.merge import merge
from fwdshim.codegen.prefetch import prefetch
from fwdshim.codegen.stage_kernels import lower_stage
from fwdshim.codegen.tuning import DEFAULT, Tuning
from fwdshim.diagnostics import error_at, op_label, where
from fwdshim.dialects.fwd import FusedOp, StageOp, WeightOp, stages
from fwdshim.shim.contract import implied_shim, shim_of
from fwdshim.shim.legality import check
from fwdshim.shim.refusal import REFUSED_ATTR, mark_text


class PlanError(DiagnosticException):
    """Stages the plan cannot lower: one `file:line:col: error: <reason>` line per stage."""


# ---------------------------------------------------------------------------------------------
# the plan


def _shim_for(module: Operation | None, func: FuncOp):
    """The shim that legalized the module (its `fwd.numerics`), else the numerics the IR implies."""
    return shim_of(module, default=implied_shim(func))


def _refusal(shim, op: StageOp) -> str | None:
    """Why `op` is not lowered: its `fwd.refused` mark (any value: a mark that is not the reason
    string `fwd-legalize{mode=mark}` writes was lowered as if unmarked), else the shim's check."""
    reason = op.attributes.get(REFUSED_ATTR)
    text = mark_text(op, REFUSED_ATTR)
    if text is not None and text.strip():
        return f"{text} (refused by fwd-legalize)"
    if reason is not None:
        return f"a stage marked `{REFUSED_ATTR} = {reason}` is refused (fwd-legalize{{mode=mark}} marks one with its reason, a non-empty string)"
    r = check(shim, op)
    return None if r is None else r.reason


class _Builder:
    def __init__(self, func: FuncOp, module: Operation | None, tuning: Tuning):
        self.func = func
        self.tuning = tuning
        self.names = value_names(func)
        self.caches = cache_values(func)
        ret = func.body.block.last_op
        self.returned = set(ret.operands) if isinstance(ret, ReturnOp) else set()
        self.parts: dict[str, dict[str, Part]] = {}
        self.meta: dict[str, tuple[str, tuple[int, ...], str]] = {}
        self.tensors: dict[str, str] = {}
        self.shim = _shim_for(module, func)

    def buffer_of(self, v: SSAValue) -> str:
        name = self.names.get(v)
        if name is None:
            raise Unlowerable("a kernel reads a value from outside the function")
        if name not in self.meta:
            dtype, shape, parts = type_parts(v.type)
            self.meta[name] = (dtype, shape, role_of(v, self.func, self.caches, self.returned))
            self.parts[name] = {p.name: p for p in parts}
            if isinstance(v, OpResult) and isinstance(v.op, WeightOp):
                self.tensors[name] = v.op.tensor_name.data
        return name

    def bind(self, number: int, op: StageOp, b: Binding) -> Launch:
        label = self.names.get(op.results[0], f"%stage{number}") if op.results else f"%stage{number}"
        args: list[Arg] = []
        for p in b.kernel.params:
            ref = b.refs.get(p.name, Ref(None))
            if ref.value is not None:
                name, part = self.buffer_of(top_value(ref.value)), ref.part
            else:
                name = ref.scratch if ref.scratch.startswith("%") else f"{label}.{ref.scratch or p.name}"
                part = ""
                if name not in self.meta:
                    role = "step" if name == CACHE_LEN else "intermediate"
                    self.meta[name] = (_SHORT[p.dtype], (p.size,), role)
                    self.parts[name] = {"": Part("", p.dtype, p.size)}
            have = self.parts[name].get(part)
            if have is None:
                raise Unlowerable(f"kernel {b.kernel.name} binds `{p.name}` to {name}, which has no part `{part}`")
            if (have.dtype, have.size) != (p.dtype, p.size):
                if p.role != "in" and part in ("d", "s") and have.dtype == p.dtype:
                    self.parts[name][part] = Part(part, p.dtype, p.size)  # blocks per row of a [R, K] qact
                else:
                    raise Unlowerable(
                        f"kernel {b.kernel.name} `{p.name}` wants {p.size} {p.dtype}, "
                        f"{name}{'.' + part if part else ''} holds {have.size} {have.dtype}"
                    )
            args.append(Arg(p.name, name, part, p.role))
        return Launch(number, b.kernel, tuple(args))

    def stage(self, number: int, op: StageOp) -> StagePlan:
        why = _refusal(self.shim, op)
        if why is None:
            why = self.shim.read_mismatch(op)  # the contract's numerics, not a legality verdict
        if why is not None:
            raise Unlowerable(why)
        bindings = lower_stage(op, self.tuning)
        launches = tuple(self.bind(number, op, b) for b in bindings)
        what = op.name + (f" {op.class_.data}" if isinstance(op, FusedOp) else "")
        covers = op.cover_list if isinstance(op, FusedOp) else ()
        return StagePlan(number, what, where(op), covers, launches)


def _kv_append(b: _Builder, stage_plans: Sequence[StagePlan]) -> tuple[Launch, ...]:
    """The `kv_append` launches of the plan (module docstring): one row per attention whose `k`,
    `v`, `k_cache`, `v_cache` are bound, the caches `cache` buffers not yet appended to."""
    rows: list[tuple[Arg, Arg, Arg, Arg]] = []
    taken: set[str] = set()
    for s in stage_plans:
        for launch in s.launches:
            by = {a.param: a for a in launch.args}
            quad = tuple(by.get(p) for p in ("k", "v", "k_cache", "v_cache"))
            if any(a is None for a in quad) or "pos" not in by:
                continue
            caches = {quad[2].buffer, quad[3].buffer}  # type: ignore[union-attr]
            if caches & taken or any(b.meta[c][2] != "cache" for c in caches):
                continue
            taken |= caches
            rows.append(quad)  # type: ignore[arg-type]
    if not rows:
        return ()
    number = len(stage_plans)
    out = []
    per = attention.APPEND_LAYERS
    chunks = -(-len(rows) // per)
    size = -(-len(rows) // chunks)  # balanced: 30 attentions are two launches of 15
    for c0 in range(0, len(rows), size):
        chunk = rows[c0 : c0 + size]
        shapes = []
        for k, _, kc, _ in chunk:
            width = b.parts[k.buffer][k.part].size
            shapes.append((width, b.parts[kc.buffer][kc.part].size // width))
        kern = attention.kv_append(tuple(shapes), tuning=b.tuning)
        args = []
        for i, quad in enumerate(chunk):
            for param, a in zip((f"k{i}", f"v{i}", f"k_cache{i}", f"v_cache{i}"), quad):
                args.append(Arg(param, a.buffer, a.part, "inout" if "cache" in param else "in"))
        args.append(Arg("pos", CACHE_LEN, "", "in"))
        out.append(Launch(number, kern, tuple(args)))
    return tuple(out)


def _meta(b: _Builder, n: str) -> tuple:
    dtype, shape, role = b.meta[n]
    return n, shape, dtype, role, tuple(b.parts[n].values()), b.tensors.get(n, "")


GRID_LIMITS = (2**31 - 1, 65535, 65535)
"""CUDA's largest grid, in blocks along x, y and z."""


def _check_grid(name: str, grid: tuple[int, ...]) -> None:
    """Unlowerable when `grid` is past CUDA's limits (`GRID_LIMITS`): a tensor too large for the kernel."""
    for axis, n, limit in zip("xyz", grid, GRID_LIMITS):
        if n > limit:
            raise Unlowerable(f"kernel {name} needs {n} blocks along {axis}, past CUDA's {limit}: the tensor is too large for it")


def stage_plan(func: FuncOp, module: Operation | None = None, tuning: Tuning = DEFAULT) -> LaunchPlan:
    """The stage launches of `func` (see the module docstring) under `tuning`, none merged;
    `PlanError` lists every stage it cannot lower. `module` (default: `func`'s module) gives the
    numerics `fwd-legalize` recorded."""
    if module is None:
        module = func.parent_op()
    blocks = list(func.body.blocks)
    if len(blocks) > 1:  # a branch: xDSL's `Region.block` would fail with no location
        at = blocks[0].last_op or func
        raise PlanError(error_at(at, f"{op_label(at)} in a decode step of {len(blocks)} blocks — the launch plan lowers one straight-line block"))
    b = _Builder(func, module, tuning)
    stage_plans: list[StagePlan] = []
    errors: list[str] = []
    for number, op in enumerate(stages(func)):
        parent = op.parent_op()
        if parent is not None and parent is not func:
            label = op_label(parent)
            errors.append(error_at(op, f"a stage inside a `{label}` region — the launch plan lowers the function's top-level stages only"))
            continue
        try:
            sp = b.stage(number, op)
            for launch in sp.launches:
                _check_grid(launch.kernel.name, tuple(launch.kernel.grid))
            stage_plans.append(sp)
        except (Unlowerable, ValueError) as e:
            errors.append(error_at(op, str(e)))
    declared: dict[str, Attribute] = {}
    for op in func.body.block.ops:
        if not isinstance(op, StageOp | WeightOp | ReturnOp):
            errors.append(error_at(op, f"{op_label(op)} in a decode step — the launch plan lowers fwd stages only"))
        if isinstance(op, WeightOp):  # one GGUF tensor, one shape and type
            first = declared.setdefault(op.tensor_name.data, op.result.type)
            if first != op.result.type:
                errors.append(error_at(op, f"weight \"{op.tensor_name.data}\" declared again as {op.result.type}, "
                                           f"first as {first}: a GGUF tensor has one shape and type"))  # fmt: skip
    if errors:
        raise PlanError("\n".join(errors))
    maintenance = _kv_append(b, stage_plans)
    try:
        inputs = tuple(b.buffer_of(a) for a in func.body.block.args)
        ret = func.body.block.last_op
        outputs = tuple(b.buffer_of(v) for v in ret.operands) if isinstance(ret, ReturnOp) else ()
    except Unlowerable as e:
        raise PlanError(error_at(func, str(e))) from None
    buffers = with_buffers((), (Buffer(*_meta(b, n)) for n in b.meta))  # by role, then first use
    return LaunchPlan(func.sym_name.data, tuple(buffers), tuple(stage_plans), inputs, outputs, maintenance, (), tuning)


def build_plan(func: FuncOp, module: Operation | None = None, tuning: Tuning = DEFAULT) -> LaunchPlan:
    """The launch plan of `func` under `tuning`: `prefetch(merge(stage_plan(func, module, tuning)))`,
    each step a function from plan to plan that its `Tuning` field switches alone (`merge`,
    `prefetch_bytes`); `PlanError` lists every stage it cannot lower."""
    return prefetch(merge(stage_plan(func, module, tuning), tuning), tuning)


def functions(root: Operation) -> list[FuncOp]:
    """The functions under `root` that hold stages (a `func.func` itself: `[root]`)."""
    if isinstance(root, FuncOp):
        return [root]
    return [f for f in root.walk() if isinstance(f, FuncOp) and any(True for _ in stages(f))]


def unplanned_stages(root: Operation) -> list[str]:
    """One `file:line:col: error: ...` line per stage under `root` outside any `func.func` (a stage
    at the module's top level): `functions` plans none of them, so `fwd-lower-numba` and `-t numba`
    both report them rather than leave them out of the plan silently."""
    return [
        error_at(stage, f"`{op_label(stage)}` outside a func.func: the lowering plans the stages of a decode-step function")
        for stage in stages(root)
        if _enclosing_func(stage) is None
    ]


def _enclosing_func(op: Operation) -> FuncOp | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, FuncOp):
        parent = parent.parent_op()
    return parent


def plans_of(module: ModuleOp, tuning: Tuning = DEFAULT) -> list[LaunchPlan]:
    """The launch plan (under `tuning`) of every function of `module` that holds stages."""
    return [build_plan(f, module, tuning) for f in functions(module)]


def plan_for(root: Operation, entry: str | None = None, tuning: Tuning = DEFAULT) -> LaunchPlan:
    """The plan (under `tuning`) of the function `entry` (or the only function with stages) of a
    module or func."""
    funcs = functions(root)
    if entry is not None:
        funcs = [f for f in funcs if f.sym_name.data == entry]
    if len(funcs) != 1:
        names = ", ".join(f"@{f.sym_name.data}" for f in functions(root)) or "none"
        raise PlanError(f"error: expected one function with stages{f' named @{entry}' if entry else ''}, found: {names}")
    module = root if not isinstance(root, FuncOp) else None
    return build_plan(funcs[0], module, tuning)


__all__: Sequence[str] = (
    "Arg", "Buffer", "Launch", "LaunchPlan", "Part", "PlanError", "StagePlan", "build_plan",
    "functions", "lower_stage", "plan_for", "plans_of", "stage_plan", "unplanned_stages", "value_names",
)  # fmt: skip
