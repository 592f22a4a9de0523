"""What every generated kernel module is made of, shared by the kernel families.

- `prelude()`: the import lines that start every generated module. On a GPU they bind the primitives
  (`fadd_rn`, `fmul_rn`, ..., `shfl_xor`, `prefetch_l2`, `ld_i32`, `ld_i32x4`, `s8x4_f32`, `u8x4_f32`, `dp4a`) to
  libdevice, warp shuffles and `fwdshim.codegen.intrinsics`; under Numba's CUDA simulator
  (`NUMBA_ENABLE_CUDASIM=1`), which has neither libdevice nor warp shuffles, to the Python equivalents
  in `fwdshim.codegen.simulator` (there the warp reductions `warp_sum`, `warp_max`, `warp_isum` too:
  the same butterfly, computed once per warp). The kernel bodies are the same text in both modes.
- `KernelBody`: a kernel module after the prelude, as data; its statements a template written out
  under an `Index` (a kernel of its own, `KERNEL`, or a merged launch's part, `device_index`), with
  `ld`'s loads, `SharedArray`s and `late_wait`'s end; `facts`, what the code does (atomics,
  barriers, shared bytes, ...), read from its syntax tree.
- Programmatic dependent launch: `pdl_lines(mode)`, the statements that open a kernel under
  `Tuning.pdl` (`with_pdl`); `late_wait(mode)`, those by which a kernel waits later itself.
- Statement builders: `count_done` / `release_import` (a last-block pattern), `block_reduce`,
  `indent`, `f32` (a float32 literal); launch-shape helpers: `block_threads`, `small_items`,
  `check_block`.

Rounding: where fused and unfused kernels must agree bit for bit (the contract's `fused: EXACT`)
generated code spells every float operation as `fadd_rn`/`fsub_rn`/`fmul_rn`/`fdiv_rn`, which Numba
cannot contract into an FMA.
"""

from __future__ import annotations

import ast
import functools
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, replace
from string import Template

import numpy as np

from fwdshim.codegen.device import simulating
from fwdshim.codegen.tuning import Tuning

_GPU_PRELUDE = '''\
import math
from numba import cuda, float32, float64, int8, int32, int64, uint32
from numba.cuda.libdevice import fadd_rn, fsub_rn, fmul_rn, fdiv_rn, fsqrt_rn, frcp_rn, roundf, int_as_float
from fwdshim.codegen.intrinsics import prefetch_l2, ld_i32, ld_i32x4, ld_f32x4, lda_i32, lda_i32x4, lda_f32x4, s8x4_f32, u8x4_f32, dp4a, f16x2_f32, bf16x2_f32, bf16_f32
from fwdshim.codegen.intrinsics import cp_async16, cp_async4, cp_async_commit, cp_async_wait, pdl_launch, pdl_wait

FULL_MASK = uint32(0xFFFFFFFF)


@cuda.jit(device=True, inline=True)
def shfl_xor(v, m):
    return cuda.shfl_xor_sync(FULL_MASK, v, m)
'''

_SIM_PRELUDE = '''\
import math
from numba import cuda, float32, float64, int8, int32, int64, uint32
from fwdshim.codegen.simulator import fadd_rn, fsub_rn, fmul_rn, fdiv_rn, fsqrt_rn, frcp_rn, roundf, int_as_float
from fwdshim.codegen.simulator import prefetch_l2, ld_i32, ld_i32x4, ld_f32x4, lda_i32, lda_i32x4, lda_f32x4, s8x4_f32, u8x4_f32, dp4a, f16x2_f32, bf16x2_f32, bf16_f32, shfl_xor
from fwdshim.codegen.simulator import cp_async16, cp_async4, cp_async_commit, cp_async_wait, pdl_launch, pdl_wait
from fwdshim.codegen.simulator import warp_sum, warp_max, warp_isum
'''

_HELPERS = '''

@cuda.jit(device=True, inline=True)
def warp_sum(v):
    """The sum over the 32 lanes, the same bits in every lane (xor butterfly, rounded adds)."""
    v = fadd_rn(v, shfl_xor(v, 16))
    v = fadd_rn(v, shfl_xor(v, 8))
    v = fadd_rn(v, shfl_xor(v, 4))
    v = fadd_rn(v, shfl_xor(v, 2))
    v = fadd_rn(v, shfl_xor(v, 1))
    return v


@cuda.jit(device=True, inline=True)
def warp_max(v):
    """The maximum over the 32 lanes, in every lane."""
    v = max(v, shfl_xor(v, 16))
    v = max(v, shfl_xor(v, 8))
    v = max(v, shfl_xor(v, 4))
    v = max(v, shfl_xor(v, 2))
    v = max(v, shfl_xor(v, 1))
    return v


@cuda.jit(device=True, inline=True)
def warp_isum(v):
    """The int32 sum over the 32 lanes, in every lane."""
    v = int32(v + shfl_xor(v, 16))
    v = int32(v + shfl_xor(v, 8))
    v = int32(v + shfl_xor(v, 4))
    v = int32(v + shfl_xor(v, 2))
    v = int32(v + shfl_xor(v, 1))
    return v
'''


def prelude() -> str:
    """The first lines of every generated kernel module (imports, primitives, warp reductions)."""
    return _SIM_PRELUDE if simulating() else _GPU_PRELUDE + _HELPERS


LATE_WAIT = "# pdl: waits after its weight copies"
"""The comment line that opens a kernel's late wait (`late_wait`)."""


def pdl_lines(mode: str) -> list[str]:
    """The statements that open a kernel under programmatic dependent launch `mode` (`Tuning.pdl`,
    `tuning.PDL_MODES`): none when off; `pdl_wait()`; under `ahead` then `pdl_launch()`; under `early`
    `pdl_launch()` first."""
    return {"off": [], "wait": ["pdl_wait()"], "ahead": ["pdl_wait()", "pdl_launch()"], "early": ["pdl_launch()", "pdl_wait()"]}[mode]


AFTER_WAIT = "${after_wait}"
"""The placeholder ending a kernel's late wait (`late_wait`): where a merged launch's part calls its
prologue (`Index.after_wait`); nothing in a kernel of its own."""


def late_wait(mode: str) -> list[str]:
    """The lines (function-body level) by which a kernel waits for the launches before it after work
    that reads none of their results (a GEMV's first weight loads): the `LATE_WAIT` comment, then
    `pdl_lines(mode)`, ending in `AFTER_WAIT`. A kernel holding them says so (`KernelBody.waits_late`:
    `with_pdl` then adds no wait at its top); it writes them at its function's top level and
    returns nowhere before them."""
    lines = [LATE_WAIT, *pdl_lines(mode)]
    lines[-1] += AFTER_WAIT
    return lines


def ld(width: str, array: str, index: str) -> str:
    """A wide load `ld_<width>(array, index)` (`width` `i32`, `i32x4` or `f32x4`, `intrinsics`)
    written so that a merged launch may read `array` through a generic address instead
    (`lda_<width>`: the array is a prologue's result in shared memory, `Index.generic`)."""
    return f"${{ld_{array}}}{width}({array}, {index})"


@dataclass(frozen=True)
class SharedArray:
    """A static shared array a kernel function declares at its top level: `name` of `size` elements
    of `dtype` (a Numba type name), 16-byte aligned with `aligned` (never under the simulator).
    The family writes `decl` where the declaration goes and passes the array to `build`; a merged
    launch's parallel part takes it as a parameter instead (`Index.hoist`)."""

    name: str
    size: int
    dtype: str
    aligned: bool = False

    @property
    def decl(self) -> str:
        """The placeholder a family writes at the start of a line where the declaration goes."""
        return f"${{shared_{self.name}}}"

    def line(self) -> str:
        return f"    {self.name} = cuda.shared.array({self.size}, {self.dtype}{', alignment=16' if self.aligned else ''})\n"


@dataclass(frozen=True)
class Index:
    """How a kernel function's statements are written out (`KernelBody.text`): the expressions of
    its block index (`$bx`, `$by`), thread index (`$tx`) and global thread index (`$gid`); the
    arrays whose wide loads read through a generic address (`generic`, `ld`); the statement after
    its late wait (`after_wait`, a line of its own with its newline first, `late_wait`); and whether
    its top-level shared arrays are left out (`hoist`: they are parameters, `SharedArray`).
    `KERNEL` writes a kernel of its own; `device_index` a part of a merged launch."""

    bx: str = "cuda.blockIdx.x"
    by: str = "cuda.blockIdx.y"
    tx: str = "cuda.threadIdx.x"
    gid: str = "cuda.grid(1)"
    generic: frozenset[str] = frozenset()
    after_wait: str = ""
    hoist: bool = False


KERNEL = Index()


def device_index(block: int, thread: bool, generic=(), after_wait: str = "", hoist: bool = False) -> Index:
    """The `Index` of a kernel run as a device function of a merged launch: its block index the
    arguments `_bx`, `_by`, its thread index the argument `_tx` when `thread` (a tail of another
    block size, run in turns) and its global index spelled out with its own `block` size."""
    tx = "_tx" if thread else "cuda.threadIdx.x"
    return Index("_bx", "_by", tx, f"(_bx * {block} + {tx})", frozenset(generic), after_wait, hoist)


@dataclass(frozen=True)
class Facts:
    """What a piece of generated kernel code does, read from its syntax tree (`facts`): `names`, the
    dotted attributes it reads (`cuda.blockIdx.x`, `cuda.gridDim.x`, ...); `calls`, the dotted names
    it calls (`cuda.syncthreads`, `ld_i32x4`, `cuda.atomic.add`, `cuda.grid`, ...); `grids`, the
    arguments of its `cuda.grid(...)` calls; `shared_bytes`, every static shared array's bytes;
    `top_shared`, the names of the shared arrays the kernel function declares at its top level;
    `returns`, whether that function returns anywhere."""

    names: frozenset[str]
    calls: frozenset[str]
    grids: frozenset[str]
    shared_bytes: int
    top_shared: tuple[str, ...] = ()
    returns: bool = False
    """The function `entry` has a `return` statement: some of its threads may leave before others
    reach a later statement (a GEMV's warps past the last row)."""

    @property
    def atomics(self) -> bool:
        """An atomic operation (a last-block pattern of its own)."""
        return any(x.startswith("cuda.atomic") for x in self.names | self.calls) or any(x.startswith("atomic_") for x in self.calls)

    @property
    def grid_shape(self) -> bool:
        """It reads the grid's or the block's size (`cuda.gridDim`, `cuda.blockDim`, `cuda.gridsize`,
        `cuda.grid(2|3)`)."""
        return (any(x.startswith(("cuda.gridDim", "cuda.blockDim")) for x in self.names) or "cuda.gridsize" in self.calls
                or bool(self.grids - {"1"}))  # fmt: skip

    @property
    def threads_yz(self) -> bool:
        """A 2-D or 3-D block (`cuda.threadIdx.y`/`.z`)."""
        return bool({"cuda.threadIdx.y", "cuda.threadIdx.z"} & self.names)

    @property
    def barriers(self) -> bool:
        """A block barrier (`cuda.syncthreads`)."""
        return any(x.startswith("cuda.syncthreads") for x in self.calls)

    @property
    def nc_loads(self) -> bool:
        """A load through the non-coherent path (`ld_*`)."""
        return any(x.startswith("ld_") for x in self.calls)

    @property
    def block_index(self) -> bool:
        """It reads the block index itself (`cuda.blockIdx`, `cuda.grid`)."""
        return any(x.startswith("cuda.blockIdx") for x in self.names) or bool(self.grids)


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _elements(node: ast.AST) -> int:
    value = ast.literal_eval(node)
    return int(np.prod(value)) if isinstance(value, tuple) else int(value)


@functools.cache
def facts(text: str, entry: str = "") -> Facts:
    """The `Facts` of `text`, generated kernel code (a module, or statements at function-body
    level); `top_shared` those of its function `entry`. Raises ValueError when it does not parse or
    a shared array's size is not a constant."""
    try:
        tree = ast.parse(textwrap.dedent(text))
    except SyntaxError as e:
        raise ValueError(f"generated code does not parse: {e}") from None
    names = frozenset(_dotted(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute))
    calls = [(n, _dotted(n.func)) for n in ast.walk(tree) if isinstance(n, ast.Call)]
    shared = 0
    for call, fn in calls:
        if fn == "cuda.shared.array":
            try:
                shared += _elements(call.args[0]) * np.dtype(_dotted(call.args[1])).itemsize
            except (ValueError, TypeError, IndexError) as e:
                raise ValueError(f"a shared array of no constant size and dtype: {ast.unparse(call)}") from e
    top: list[str] = []
    returns = False
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == entry):
        returns = any(isinstance(n, ast.Return) for n in ast.walk(fn))
        for st in fn.body:
            if isinstance(st, ast.Assign) and isinstance(st.value, ast.Call) and _dotted(st.value.func) == "cuda.shared.array":
                top += [t.id for t in st.targets if isinstance(t, ast.Name)]
    grids = frozenset(ast.unparse(c.args[0]) if c.args else "" for c, fn in calls if fn == "cuda.grid")
    return Facts(names, frozenset(fn for _, fn in calls), grids, shared, tuple(top), returns)


@dataclass(frozen=True)
class KernelBody:
    """A kernel module's text after the prelude, as data: `preamble` (what comes before the kernel
    function: imports, device functions), `jit` (the options of its `@cuda.jit(...)` line), `entry`
    (its name), `params` (its parameter names, in order), `statements` (its body, every line
    indented, ending in a newline) and `shared` (its top-level `SharedArray`s). The statements are
    a template (`string.Template`): `$bx`, `$by`, `$tx`, `$gid`, `ld`'s loads, `late_wait`'s end and
    `SharedArray.decl`s, which `text(index)` writes out (`Index`). The later steps (`with_pdl`, a
    prefetch's hints, a merged launch's device function) change its fields or the index, never
    its text."""

    entry: str
    params: tuple[str, ...]
    statements: str
    jit: str = "cache=True"
    preamble: str = ""
    shared: tuple[SharedArray, ...] = ()

    def __post_init__(self) -> None:
        names = Template(self.statements).get_identifiers()
        declared = [f"shared_{a.name}" for a in self.shared]
        used = [x for x in names if x.startswith("shared_")]
        if used != declared:
            raise ValueError(f"kernel function `{self.entry}`: shared arrays declared {sorted(declared)}, written {sorted(used)}")

    @property
    def waits_late(self) -> bool:
        """Whether the kernel waits for the launches before it itself, late (`late_wait`)."""
        return "after_wait" in Template(self.statements).get_identifiers()

    def render(self, index: Index = KERNEL) -> str:
        """The statements written out under `index`."""
        template = Template(self.statements)
        values = {}
        for name in template.get_identifiers():
            if name in ("bx", "by", "tx", "gid", "after_wait"):
                values[name] = getattr(index, name)
            elif name.startswith("ld_"):
                values[name] = "lda_" if name[3:] in index.generic else "ld_"
            elif name.startswith("shared_"):
                values[name] = "" if index.hoist else next(a for a in self.shared if a.name == name[7:]).line()
            else:
                raise ValueError(f"kernel function `{self.entry}`: no value for `${name}` in its statements")
        return template.substitute(values)

    def text(self, index: Index = KERNEL) -> str:
        return f"{self.preamble}@cuda.jit({self.jit})\ndef {self.entry}({', '.join(self.params)}):\n{self.render(index)}"

    def _template(self) -> str:
        return f"{self.preamble}@cuda.jit({self.jit})\ndef {self.entry}({', '.join(self.params)}):\n{self.statements}"

    @property
    def facts(self) -> Facts:
        """The `Facts` of the module text (`text()`)."""
        return facts(self.text(), self.entry)

    def device_fn(self, fn: str, more: Sequence[str], index: Index) -> str:
        """The kernel function as device function `fn(params..., more...)` (inlined), its statements
        written under `index` (`device_index`); ValueError when it has a preamble, or when its
        statements still read what `index` gives them (the block index; the thread index when
        `index` names it; shared arrays of its own at its top when `index.hoist`)."""
        if self.preamble.strip("\n"):
            raise ValueError(f"kernel function `{self.entry}`: not alone in its module, so not a device function")
        head = f"@cuda.jit(device=True, inline=True)\ndef {fn}({', '.join([*self.params, *more])}):\n"
        text = head + self.render(index).rstrip("\n")
        f = facts(text, fn)
        if f.block_index or (index.tx != KERNEL.tx and "cuda.threadIdx.x" in f.names) or (index.hoist and f.top_shared):
            raise ValueError(f"kernel function `{self.entry}`: reads the block or thread index, or declares shared arrays, "
                             "other than as `$bx`, `$by`, `$tx`, `$gid` and `SharedArray`s")  # fmt: skip
        return text

    @classmethod
    def parse(cls, text: str, entry: str, shared: Sequence[SharedArray] = ()) -> KernelBody:
        """The body of `text`, a family's kernel module whose kernel function `entry` is a
        `@cuda.jit(...)` line and `def entry(a, b, ...):` (the families write theirs so), with its
        top-level shared arrays `shared`; ValueError when there is none, or when the fields would
        not write `text` back byte for byte."""
        lines = text.splitlines(keepends=True)
        for i in range(1, len(lines)):
            head, deco = lines[i].rstrip("\n"), lines[i - 1].rstrip("\n")
            if head.startswith(f"def {entry}(") and head.endswith("):") and deco.startswith("@cuda.jit(") and deco.endswith(")"):
                names = tuple(p.strip() for p in head[len(f"def {entry}(") : -2].split(",") if p.strip())
                body = cls(entry, names, "".join(lines[i + 1 :]), deco[len("@cuda.jit(") : -1], "".join(lines[: i - 1]),
                           tuple(shared))  # fmt: skip
                if body._template() != text:
                    raise ValueError(f"kernel function `{entry}`: its text is not `@cuda.jit(...)`, `def {entry}(a, b):`, statements")
                return body
        raise ValueError(f"no kernel function `{entry}` in the body")


def _waits_at_top(body: KernelBody) -> bool:
    """Whether the kernel function's top-level statements call `pdl_wait()` (read from its syntax tree)."""
    return _calls_wait(body.text(KERNEL)[len(body.preamble) :], body.entry)


@functools.cache
def _calls_wait(text: str, entry: str) -> bool:
    tree = ast.parse(text)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == entry)
    return any(isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and _dotted(s.value.func) == "pdl_wait" for s in fn.body)


def with_pdl(body: KernelBody, mode: str) -> KernelBody:
    """`body` with `pdl_lines(mode)` first in its kernel function (`pdl_wait()`; under `early` after
    `pdl_launch()`, under `ahead` followed by it), unless it waits late itself (`late_wait`,
    `KernelBody.waits_late`) or its top-level statements call `pdl_wait()` already."""
    if mode == "off" or body.waits_late or _waits_at_top(body):
        return body
    statements = body.statements if body.statements.endswith("\n") else body.statements + "\n"
    return replace(body, statements="".join(f"    {ln}\n" for ln in pdl_lines(mode)) + statements)


def _with_pdl(body: str, entry: str, mode: str) -> str:
    """`with_pdl` on a module's text (`KernelBody.parse`): ValueError when `entry` is not defined."""
    if mode == "off":
        return body
    return with_pdl(KernelBody.parse(body, entry), mode).text()


def count_done(flag: str, count: str, index: str, tid: str) -> tuple[str, str]:
    """(`count`, `acquired`): the statements with which a block counts itself done in `count[index]` (an
    int32 global array), thread `tid` 0 leaving the count before its own in `flag[0]` (shared) — the
    caller's barrier follows — and those the last block runs before it reads what the others wrote:
    after the block's barrier, thread 0's one acquire-release atomic at GPU scope
    (`intrinsics.atomic_add_acq_rel`, imported by `release_import`), nothing after. The attention's
    splits and the tails of merged launches count with it."""
    return f"cuda.syncthreads()\nif {tid} == 0:\n    {flag}[0] = atomic_add_acq_rel({count}, {index}, 1)", ""


def release_import() -> str:
    """The import of `atomic_add_acq_rel` a kernel module counting with `count_done`
    needs (the simulator's stand-in under `NUMBA_ENABLE_CUDASIM`), with the blank lines after it."""
    return f"from fwdshim.codegen.{'simulator' if simulating() else 'intrinsics'} import atomic_add_acq_rel\n\n\n"


def name_number(v: float) -> str:
    """`v` as an f32 (its shortest decimal, `1e-06`) in a kernel name's characters: `1em06`, `2p5`."""
    return "".join({".": "p", "-": "m", "+": ""}.get(c, c) for c in str(np.float32(v)))


def f32(v: float) -> str:
    """A float32 constant as generated source (`float32(...)` so Numba never widens to float64)."""
    return f"float32({float(np.float32(v))!r})"


# ---------------------------------------------------------------------------------------------
# source helpers shared by the kernel families


def indent(text: str, level: int) -> str:
    """`text` with every non-empty line indented by `level` four-space steps."""
    pad = "    " * level
    return "\n".join(pad + line if line.strip() else line for line in text.splitlines())


def block_threads(n: int, per_thread: int = 4, cap: int = 256) -> int:
    """A row kernel's block size: a power of two >= 32 giving each thread about `per_thread` values."""
    b = 32
    while b < cap and b * per_thread < n:
        b *= 2
    return b


def small_items(total: int, block: int, loads: int = 1, *, tuning: Tuning) -> int:
    """Indices per thread of a kernel of `total` independent indices (elementwise, rope, quantize),
    each loading `loads` values: a launch of at most `tuning.small_items * block` indices runs in as
    few blocks as `tuning.held_floats` allows (one block for a SmolLM2 row), each thread loading all
    of its indices' inputs before the first use (one memory round trip; as a merged launch's tail, one
    round per block, `codegen.merge`); a larger one takes one index a thread. Such a kernel often runs
    as a merged launch's tail, whose registers a thread are the most any part needs: holding more
    values costs the GEMV parts occupancy."""
    k = -(-total // block)
    return min(k, max(1, tuning.held_floats // max(1, loads))) if k <= tuning.small_items else 1


def check_block(block: int) -> int:
    """`block` if it is a whole number of warps in 32..1024, else ValueError."""
    if block % 32 or not 32 <= block <= 1024:
        raise ValueError(f"a block of {block} threads is not a whole number of warps in 32..1024")
    return block


def block_reduce(var: str, op: str, red: str, warps: int) -> str:
    """Statements leaving in `var`, in every thread of the block, the block-wide `op` (`sum` or `max`)
    of the threads' `var`s: the warp butterfly, then one value per warp through shared `red` (a
    float32 array of 32, used by this reduction alone) and the butterfly again. Every thread of the
    block must run them. The order of the adds depends on the block size only."""
    fn = {"sum": "warp_sum", "max": "warp_max"}[op]
    pad = {"sum": "float32(0.0)", "max": "float32(-math.inf)"}[op]
    if warps == 1:
        return f"{var} = {fn}({var})"
    return (
        f"{var} = {fn}({var})\n"
        f"if lane == 0:\n    {red}[warp] = {var}\n"
        "cuda.syncthreads()\n"
        f"{var} = {fn}({red}[lane] if lane < {warps} else {pad})"
    )
