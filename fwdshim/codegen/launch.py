"""The launch layer: the data of a launch plan, and nothing that builds it.

A decode step is lowered in named steps, each a function from plan to plan that its `Tuning` field
switches alone (DESIGN.md §6):

    plan = prefetch(merge(stage_plan(func, module, tuning), tuning), tuning)

- `codegen.plan.stage_plan`: every stage its kernel launches (`codegen.stage_kernels`: a `Binding`
  per launch, each kernel parameter a `Ref` to an SSA value or a scratch buffer), bound to the
  buffer table (`Buffer`, `Part`) as `Launch`es of `Arg`s, plus the `kv_append` maintenance launches;
- `codegen.merge.merge` (`Tuning.merge`): consecutive stage launches grouped into merged launches;
- `codegen.prefetch.prefetch` (`Tuning.prefetch_bytes`): each launch given the L2 prefetch of the
  next launch's weights.

The types, in the order a reader meets them:

- `Unlowerable`: a stage the kernels do not compute (the plan locates it as a `PlanError`).
- `Ref`, `Binding`: what a stage's kernel parameters are bound to, before the buffer table exists.
- `Part`, `Buffer`: one buffer per SSA value a kernel reads or writes, named as the IR names it
  (`%x`, `%h0_q`), held in device arrays (`Part(name, dtype, size)`); `role` is `input` (an argument
  of the function), `cache` (an argument read as an attention's `k_cache`/`v_cache`), `weight` (a
  `fwd.weight`; `tensor` names its GGUF tensor), `output` (returned), `intermediate` (any other stage
  result, and a stage's scratch buffers, named `%<stage result>.<param>`) or `step` (`CACHE_LEN`).
- `Arg`, `Launch`: a kernel launch, each parameter bound to a buffer part (`%wq.qs`); a merged launch
  `holds` the stage launches it replaces.
- `StagePlan`, `LaunchPlan`: a stage's launches; the function's plan, printed by `text()` (what
  `fwdshim-opt -t numba` prints) and `source_text()`.
- `StepMemory`, `step_memory`: the device bytes a plan's step allocates (`codegen.runtime` checks
  them before allocating).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from xdsl.ir import SSAValue

from fwdshim.codegen.source import prelude
from fwdshim.codegen.tuning import DEFAULT, Tuning

if TYPE_CHECKING:
    from fwdshim.codegen.kernel import Kernel

ROLES = ("input", "cache", "weight", "output", "intermediate", "step")
"""A buffer's roles, in the order the buffer table lists them."""

CACHE_LEN = "%cache_len"
"""The per-step buffer (`int32 [1]`) holding how many cache rows are written: every attention reads it
(its `pos` parameter); the runtime writes it before each launch."""


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


# ---------------------------------------------------------------------------------------------
# the plan's data


@dataclass(frozen=True)
class Part:
    """One device array of a buffer: `name` (`""` for the only part), NumPy `dtype`, `size` elements."""

    name: str
    dtype: str
    size: int


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
                quant = ", ".join(f"stage {h.stage} {h.name}" for h in epis if h.kernel.family == "quantize")
                epi = ", ".join(f"stage {h.stage} {h.name}" for h in epis if h.kernel.family != "quantize")
                tails = ", ".join(f"stage {h.stage} {h.name}" for h in launch.holds[n:])
                lines.append(f"//   launch {i}: {launch.name} grid {grid} block {block} "
                             + (f"every block first: {first}; then " if first else "") + f"holds {held}"
                             + (f"; {_epilogue_runner(launch)}: {epi}" if epi else "")
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
            doc, _, rest = k.source.partition(head)  # its docstring line, then the rest after the prelude
            body = doc + rest
            out.append(f"# ---- kernel {k.name}: grid {k.grid} block {k.block}")
            out.append(body.strip())
            out.append("")
        return "\n".join(out) + "\n"


def _unique(items) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _epilogue_runner(launch: Launch) -> str:
    """Who runs a launch's epilogues, in the plan's text: each block on the rows it computed, or for a
    mixture's down-and-combine (`gemv_blocks`' `combine`) the last block of each row block, on the
    experts' weighted sum."""
    if any(getattr(k.spec, "combine", False) for k in (launch.kernel, *(h.kernel for h in launch.holds))):
        return "the last block of each row block on its sum"
    return "each block on its rows"


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


def with_buffers(buffers: Sequence[Buffer], added) -> tuple[Buffer, ...]:
    """`buffers` (in table order) with `added` ones, each after the last of its role (`ROLES`)."""
    order = {r: i for i, r in enumerate(ROLES)}
    return tuple(sorted((*buffers, *added), key=lambda b: order[b.role]))
