"""The launch plan of a legalized decode step: stage -> kernel launches, and the buffer table.

`build_plan(func) -> LaunchPlan` walks the top-level stages of a `func.func` in program order and
gives each its kernel launches (DESIGN.md §6): every stage is exactly one kernel — a primitive its
family's kernel (`codegen.norms`, `unary`, `gemv`, `quantize`, `rope`, `attention`), a `fwd.fused`
op its one generated kernel (`codegen.fused`) — except a `fwd.moe`, which is three (`router_topk`,
`moe_gate_up_act`, `moe_down_combine`, `codegen.moe`). Which kernels a stage takes is
`codegen.stage_kernels.lower_stage`; how each value is named and held, `codegen.buffers`.

- `Buffer(name, shape, dtype, role, parts)`: one buffer per SSA value a kernel reads or writes,
  named as the IR names it (`%x`, `%h0_q`); `role` is `input` (an argument of the function),
  `cache` (an argument read as an attention's `k_cache`/`v_cache`), `weight` (a `fwd.weight`),
  `output` (returned), `intermediate` (any other stage result, and a stage's scratch buffers,
  named `%<stage result>.<param>`) or `step` (`%cache_len`: `int32 [1]`, the number of cache rows
  written, which the runtime writes before each launch so that one captured graph serves every step).
  `tensor` names a weight's GGUF tensor. `parts` are the device arrays the buffer is held in, each
  `Part(name, dtype, size)`: one unnamed part for a float32 tensor; `qs int8 [N*K]` and
  `dw float32 [N*K/32]` for a Q8_0 weight (the `weights.repack_q8_0` layout); `qs int8` and the
  file's scales (`ggml_blocks.part_specs`) for a weight of an affine block type (Q4_0, Q4_K, ...:
  the `ggml_blocks.repack` layout, read by `codegen.gemv_ggml`); `q int8`, `d float32`
  (and `s float32` for `two_words`) for a quantized activation.
- `Launch(stage, kernel, args)`: one kernel launch; `args` binds each kernel parameter, in order, to
  a buffer part (`%wq.qs`); `reads`/`writes` name the buffers.
- `LaunchPlan.maintenance`: the runtime's launches after the last stage, part of the captured graph
  and of `launches`/`kernel_count` but of no stage: where the function has attentions over `cache`
  arguments, `kv_append` (`codegen.attention.kv_append`) copies each attention's current `k`, `v` rows
  into row `%cache_len` of its caches (one launch per `attention.APPEND_LAYERS` attentions; an
  attention whose caches another attention already appends to is left out), so a decode step needs
  no host-side cache append.
- `LaunchPlan.text()`: the legible form that `fwdshim-opt -t numba` prints.

Errors: a stage marked `fwd.refused` (by `fwd-legalize{mode=mark}`), a stage the forward refuses
(`fwd-legalize`'s check, for IR that was not legalized) or one no kernel computes raises `PlanError`,
a `DiagnosticException` listing every such stage as `file:line:col: error: <reason>` — never a
silent skip.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Operation, OpResult, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from fwdshim.codegen import attention
from fwdshim.codegen.buffers import Part, cache_values, role_of, top_value, type_parts, value_names
from fwdshim.codegen.fused import CACHE_LEN, Binding, Ref, Unlowerable
from fwdshim.codegen.kernel import Kernel, prelude
from fwdshim.codegen.stage_kernels import lower_stage
from fwdshim.codegen.tuning import DEFAULT, Tuning
from fwdshim.diagnostics import error_at, op_label, where
from fwdshim.dialects.fwd import FusedOp, StageOp, WeightOp, stages
from fwdshim.shim.contract import implied_shim, shim_of
from fwdshim.shim.legality import check
from fwdshim.shim.refusal import REFUSED_ATTR, mark_text

ROLES = ("input", "cache", "weight", "output", "intermediate", "step")


class PlanError(DiagnosticException):
    """Stages the plan cannot lower: one `file:line:col: error: <reason>` line per stage."""


@dataclass(frozen=True)
class Buffer:
    """One buffer of the plan (see the module docstring)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    role: str
    parts: tuple[Part, ...]
    tensor: str = ""
    """For a `weight` buffer, the GGUF tensor name of its `fwd.weight`."""

    def part(self, name: str) -> Part:
        for p in self.parts:
            if p.name == name:
                return p
        raise KeyError(f"buffer {self.name} has no part `{name}`")

    def describe(self) -> str:
        shape = "x".join(map(str, self.shape)) if self.shape else "1"
        parts = ", ".join(f"{p.name or 'data'} {_SHORT[p.dtype]}[{p.size}]" for p in self.parts)
        return f"{self.dtype}[{shape}] = {parts}"


_SHORT = {"float32": "f32", "float16": "f16", "uint16": "u16", "int8": "i8", "int32": "i32"}


@dataclass(frozen=True)
class Arg:
    """A kernel parameter bound to part `part` of buffer `buffer`; `role` is the parameter's."""

    param: str
    buffer: str
    part: str
    role: str

    @property
    def ref(self) -> str:
        return f"{self.buffer}.{self.part}" if self.part else self.buffer


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a stage."""

    stage: int
    kernel: Kernel
    args: tuple[Arg, ...]
    holds: tuple[Launch, ...] = ()
    """For a merged launch (`codegen.merge`), the stage launches it replaces, in order: its
    `prologue` first ones (run by every block first), its parallel set, its `epilogues`, then its
    `tails` last ones (run by the block that finishes last); for a stage launch given L2 prefetch hints
    (`codegen.prefetch`), that one stage launch."""
    tails: int = 0
    prologue: int = 0
    epilogues: int = 0
    """Of a merged launch's `holds`, those after its parallel set that each block applies to the rows
    it has just computed (`codegen.merge`: an elementwise op of a GEMV's output), before the tails."""

    @property
    def name(self) -> str:
        return self.kernel.name

    @property
    def grid(self) -> tuple[int, ...]:
        return self.kernel.grid

    @property
    def block(self) -> tuple[int, ...]:
        return self.kernel.block

    @property
    def reads(self) -> tuple[str, ...]:
        return _unique(a.buffer for a in self.args if a.role in ("in", "inout"))

    @property
    def writes(self) -> tuple[str, ...]:
        return _unique(a.buffer for a in self.args if a.role in ("out", "inout"))


@dataclass(frozen=True)
class StagePlan:
    """One stage: its number (program order after fusion), what it is, where, and its launches."""

    number: int
    what: str
    location: str
    covers: tuple[int, ...]
    launches: tuple[Launch, ...]


@dataclass(frozen=True)
class LaunchPlan:
    """The launch plan of one function (see the module docstring)."""

    function: str
    buffers: tuple[Buffer, ...]
    stages: tuple[StagePlan, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    maintenance: tuple[Launch, ...] = ()
    """The runtime's launches after the last stage (`kv_append`), see the module docstring."""
    merged: tuple[Launch, ...] = ()
    """The stages' launches grouped into merged launches (`codegen.merge`) and given their L2
    prefetches (`codegen.prefetch`), when either changed them."""
    tuning: Tuning = DEFAULT
    """The `Tuning` the plan was built under."""

    @property
    def stage_launches(self) -> tuple[Launch, ...]:
        """Every stage's own launches in program order (what the merged launches hold)."""
        return tuple(launch for s in self.stages for launch in s.launches)

    @property
    def launches(self) -> tuple[Launch, ...]:
        """Every launch in graph order: the stages' (merged, when merging is on), then the
        maintenance launches."""
        return (self.merged or self.stage_launches) + self.maintenance

    @property
    def kernel_count(self) -> int:
        return len(self.launches)

    def buffer(self, name: str) -> Buffer:
        for b in self.buffers:
            if b.name == name:
                return b
        raise KeyError(f"the plan has no buffer {name}")

    def kernels(self) -> list[Kernel]:
        """Every distinct kernel (by name and source), in first-launch order. Two kernels of one name
        may differ in a constant their name does not carry (two norms' eps): both are here, so both
        are compiled before capture and printed (by name alone, the second was neither)."""
        seen: dict[tuple[str, str], Kernel] = {}
        for launch in self.launches:
            seen.setdefault((launch.kernel.name, launch.kernel.source), launch.kernel)
        return list(seen.values())

    def memory_line(self) -> str:
        """`the step needs 0.0133 GiB of device memory (…)`: what `CompiledForward` allocates for the
        plan (`step_memory`), the line a device with less free memory refuses it with."""
        return step_memory(self).describe()

    def text(self) -> str:
        """The legible plan: a header (its stages, kernels and buffers, inputs and outputs, the device
        memory it needs), the buffer table, then each stage with its launches."""
        lines = [
            f"// launch plan @{self.function}: {len(self.stages)} stages, {self.kernel_count} kernels, "
            f"{len(self.buffers)} buffers",
            f"//   inputs ({', '.join(self.inputs)}) -> outputs ({', '.join(self.outputs)})",
            f"//   {self.memory_line()}",
            "// buffers:",
        ]
        width = max((len(b.name) for b in self.buffers), default=0)
        for b in self.buffers:
            lines.append(f"//   {b.name:<{width}}  {b.role:<12}  {b.describe()}")
        lines.append("// stages:")
        for s in self.stages:
            covers = f" covers [{', '.join(map(str, s.covers))}]" if s.covers else ""
            lines.append(f"//   stage {s.number}: {s.what}{covers} at {s.location}")
            lines.extend(_launch_lines(s.launches))
        if self.merged:
            lines.append(f"// launches ({len(self.merged)} for {len(self.stage_launches)} stage kernels, then "
                         f"{len(self.maintenance)} maintenance: the graph's {self.kernel_count}):")  # fmt: skip
            for i, launch in enumerate(self.merged):
                grid = "x".join(map(str, launch.grid))
                block = "x".join(map(str, launch.block))
                hint = ", ".join(a.ref for a in launch.args if a.role == "prefetch")
                hint = f"; L2 prefetch for launch {(i + 1) % len(self.merged)}: {hint}" if hint else ""
                if len(launch.holds) <= 1 and not launch.tails and not launch.prologue:
                    lines.append(f"//   launch {i}: stage {launch.stage} alone: {launch.name}{hint}")
                    continue
                n = len(launch.holds) - launch.tails
                first = ", ".join(f"stage {h.stage} {h.name}" for h in launch.holds[: launch.prologue])
                held = ", ".join(f"stage {h.stage} {h.name}" for h in launch.holds[launch.prologue : n - launch.epilogues])
                epis = launch.holds[n - launch.epilogues : n]
                quant = ", ".join(f"stage {h.stage} {h.name}" for h in epis if h.name.startswith("quantize_"))
                epi = ", ".join(f"stage {h.stage} {h.name}" for h in epis if not h.name.startswith("quantize_"))
                tails = ", ".join(f"stage {h.stage} {h.name}" for h in launch.holds[n:])
                lines.append(f"//   launch {i}: {launch.name} grid {grid} block {block} "
                             + (f"every block first: {first}; then " if first else "") + f"holds {held}"
                             + (f"; each block on its rows: {epi}" if epi else "")
                             + (f"; each 32 values once stored: {quant}" if quant else "")
                             + (f"; last block: {tails}" if tails else "") + hint)  # fmt: skip
        if self.maintenance:
            lines.append("// maintenance (after the last stage, in the graph):")
            lines.append(f"//   kv_append: each attention's k, v into row {CACHE_LEN} of its caches")
            lines.extend(_launch_lines(self.maintenance))
        return "\n".join(lines) + "\n"

    def source_text(self) -> str:
        """The generated source of every kernel: the shared prelude once, then each kernel's own text."""
        head = prelude()
        out = ["# ---- prelude: every generated kernel module starts with these lines", head.rstrip(), ""]
        for k in self.kernels():
            body = k.source.replace(head, "", 1)
            out.append(f"# ---- kernel {k.name}: grid {k.grid} block {k.block}")
            out.append(body.strip())
            out.append("")
        return "\n".join(out) + "\n"


def _unique(items) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _launch_lines(launches: Sequence[Launch]) -> list[str]:
    lines = []
    for launch in launches:
        grid = "x".join(map(str, launch.grid))
        block = "x".join(map(str, launch.block))
        lines.append(f"//     kernel {launch.name} grid {grid} block {block}")
        lines.append(f"//       reads  {', '.join(launch.reads) or '-'}")
        lines.append(f"//       writes {', '.join(launch.writes) or '-'}")
        args = ", ".join(f"{a.param}={a.ref}" for a in launch.args)
        lines.append(f"//       args   ({args})")
    return lines


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


def build_plan(func: FuncOp, module: Operation | None = None, tuning: Tuning = DEFAULT) -> LaunchPlan:
    """The launch plan of `func` (see the module docstring) under `tuning`; `PlanError` lists every
    stage it cannot lower. `module` (default: `func`'s module) gives the numerics `fwd-legalize`
    recorded. The stages' launches are grouped into merged launches (`codegen.merge`, with
    `tuning.merge`), then given the L2 prefetch of the next launch's weights (`codegen.prefetch`,
    with `tuning.prefetch_bytes`)."""
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
    stage_launches = tuple(x for s in stage_plans for x in s.launches)
    launches = stage_launches
    if tuning.merge:
        from fwdshim.codegen.merge import merge_launches

        def fresh(i: int, param: str = "count", size: int = 1, suffix: str = "") -> Arg:
            name = f"%launch{i}.{param}{suffix}"
            b.meta[name] = ("i32", (size,), "intermediate")
            b.parts[name] = {"": Part("", "int32", size)}
            return Arg(param, name, "", "inout")

        launches = tuple(merge_launches(launches, fresh, Arg, Launch, tuning))
    if tuning.prefetch_bytes:
        from fwdshim.codegen.prefetch import prefetch_next

        def weight_bytes(a: Arg) -> int | None:
            if b.meta[a.buffer][2] != "weight":
                return None
            part = b.parts[a.buffer][a.part]
            return part.size * np.dtype(part.dtype).itemsize

        launches = tuple(prefetch_next(launches, weight_bytes, Arg, Launch, tuning))
    merged = () if launches == stage_launches else launches
    try:
        inputs = tuple(b.buffer_of(a) for a in func.body.block.args)
        ret = func.body.block.last_op
        outputs = tuple(b.buffer_of(v) for v in ret.operands) if isinstance(ret, ReturnOp) else ()
    except Unlowerable as e:
        raise PlanError(error_at(func, str(e))) from None
    order = {r: i for i, r in enumerate(ROLES)}
    seen = list(b.meta)
    buffers = sorted(
        (Buffer(*_meta(b, n)) for n in seen),
        key=lambda x: (order[x.role], seen.index(x.name)),
    )
    return LaunchPlan(func.sym_name.data, tuple(buffers), tuple(stage_plans), inputs, outputs, maintenance, merged, tuning)


# ---------------------------------------------------------------------------------------------
# the device memory a plan's step allocates (`codegen.runtime` allocates it and checks it first)

PACK_ALIGN = 256
"""Byte alignment of each buffer inside the packed step allocation (16-byte vector loads need 16)."""


def _aligned(n: int, dtype: str) -> int:
    """The bytes of `n` elements of `dtype` in the packed allocation (at least one byte, rounded up
    to `PACK_ALIGN`)."""
    return -(-max(1, n * np.dtype(dtype).itemsize) // PACK_ALIGN) * PACK_ALIGN


def _packed_parts(plan: LaunchPlan) -> list[tuple[str, str, int, int, str]]:
    """(buffer, part, byte offset, elements, dtype) of the packed step buffers: the non-cache inputs
    and `%cache_len`, in plan order."""
    out, off = [], 0
    for buf in plan.buffers:
        if buf.role not in ("input", "step"):
            continue
        for p in buf.parts:
            out.append((buf.name, p.name, off, p.size, p.dtype))
            off += _aligned(p.size, p.dtype)
    return out


GIB = 1 << 30


@dataclass(frozen=True)
class StepMemory:
    """The device bytes a step allocates: `buffers` (the packed step buffers, caches, intermediates
    and outputs), `weights`, `extra` (what the caller allocates beside the runtime: the device loop's
    tables) and the `largest` buffer (name, bytes)."""

    buffers: int
    weights: int
    extra: int = 0
    largest: tuple[str, int] = ("", 0)

    @property
    def total(self) -> int:
        return self.buffers + self.weights + self.extra

    def describe(self) -> str:
        """`the step needs 745.1 GiB of device memory (745.1 GiB of buffers, the largest %x 372.5 GiB;
        0.0 GiB of weights)`, one line."""
        parts = [f"{gib(self.buffers)} GiB of buffers", f"{gib(self.weights)} GiB of weights"]
        if self.largest[1]:
            parts[0] += f", the largest {self.largest[0]} {gib(self.largest[1])} GiB"
        if self.extra:
            parts.append(f"{gib(self.extra)} GiB for the decode loop")
        return f"the step needs {gib(self.total)} GiB of device memory ({'; '.join(parts)})"


def gib(n: float) -> str:
    """`n` bytes in GiB: one decimal from 1 GiB, three significant digits below (`0.000153`)."""
    x = n / GIB
    return f"{x:.1f}" if x >= 1 or x == 0 else f"{x:.3g}"


def step_memory(plan: LaunchPlan, extra: int = 0) -> StepMemory:
    """The device bytes `codegen.runtime.CompiledForward` allocates for `plan` (its packed step buffers and every
    other buffer part, weights counted apart), with `extra` bytes the caller allocates beside it."""
    packed = sum(_aligned(n, t) for *_, n, t in _packed_parts(plan))
    buffers, weights, largest = max(packed, PACK_ALIGN), 0, ("", 0)
    for buf in plan.buffers:
        size = sum(p.size * np.dtype(p.dtype).itemsize for p in buf.parts)
        if buf.role == "weight":
            weights += size
            continue
        if buf.role not in ("input", "step"):  # the packed ones are counted in `packed`
            buffers += size
        if size > largest[1]:
            largest = (buf.name, size)
    return StepMemory(buffers, weights, extra, largest)


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
    "functions", "lower_stage", "plan_for", "plans_of", "unplanned_stages", "value_names",
)  # fmt: skip
