"""What every generated kernel module is made of, shared by the kernel families.

- `prelude()`: the import lines that start every generated module. On a GPU they bind the primitives
  (`fadd_rn`, `fmul_rn`, ..., `shfl_xor`, `prefetch_l2`, `ld_i32`, `ld_i32x4`, `s8x4_f32`, `dp4a`) to
  libdevice, warp shuffles and `fwdshim.codegen.intrinsics`; under Numba's CUDA simulator
  (`NUMBA_ENABLE_CUDASIM=1`), which has neither libdevice nor warp shuffles, to the Python equivalents
  in `fwdshim.codegen.simulator` (there the warp reductions `warp_sum`, `warp_max`, `warp_isum` too:
  the same butterfly, computed once per warp). The kernel bodies are the same text in both modes.
- Programmatic dependent launch: `pdl_lines(mode)`, the statements that open a kernel under
  `Tuning.pdl`; `LATE_WAIT`, the comment by which a kernel says it waits later itself.
- Statement builders: `count_done` / `release_import` (a last-block pattern), `block_reduce`,
  `indent`, `f32` (a float32 literal); launch-shape helpers: `block_threads`, `small_items`,
  `check_block`.

Rounding: where fused and unfused kernels must agree bit for bit (the contract's `fused: EXACT`)
generated code spells every float operation as `fadd_rn`/`fsub_rn`/`fmul_rn`/`fdiv_rn`, which Numba
cannot contract into an FMA.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from fwdshim.codegen.device import simulating
from fwdshim.codegen.tuning import Tuning

_GPU_PRELUDE = '''\
import math
from numba import cuda, float32, float64, int8, int32, int64, uint32
from numba.cuda.libdevice import fadd_rn, fsub_rn, fmul_rn, fdiv_rn, fsqrt_rn, frcp_rn, roundf, int_as_float
from fwdshim.codegen.intrinsics import prefetch_l2, ld_i32, ld_i32x4, ld_f32x4, lda_i32, lda_i32x4, lda_f32x4, s8x4_f32, dp4a, f16x2_f32, bf16x2_f32, bf16_f32
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
from fwdshim.codegen.simulator import prefetch_l2, ld_i32, ld_i32x4, ld_f32x4, lda_i32, lda_i32x4, lda_f32x4, s8x4_f32, dp4a, f16x2_f32, bf16x2_f32, bf16_f32, shfl_xor
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
"""The comment line by which a kernel function (or a merged launch whose every part is such a kernel)
says it places its own `pdl_lines()` after work that reads no earlier launch's result (`_with_pdl`
then adds none at its top)."""


def pdl_lines(mode: str) -> list[str]:
    """The statements that open a kernel under programmatic dependent launch `mode` (`Tuning.pdl`,
    `tuning.PDL_MODES`): none when off; `pdl_wait()`; under `ahead` then `pdl_launch()`; under `early`
    `pdl_launch()` first."""
    return {"off": [], "wait": ["pdl_wait()"], "ahead": ["pdl_wait()", "pdl_launch()"], "early": ["pdl_launch()", "pdl_wait()"]}[mode]


@dataclass(frozen=True)
class KernelBody:
    """A kernel module's text after the prelude, as data: `preamble` (what comes before the kernel
    function: imports, device functions), `jit` (the options of its `@cuda.jit(...)` line), `entry`
    (its name), `params` (its parameter names, in order) and `statements` (its body, every line
    indented, ending in a newline). `text()` writes it; the later steps (`with_pdl`, a prefetch's
    hints, a merged launch's device function) change its fields, never its text."""

    entry: str
    params: tuple[str, ...]
    statements: str
    jit: str = "cache=True"
    preamble: str = ""

    def text(self) -> str:
        return f"{self.preamble}@cuda.jit({self.jit})\ndef {self.entry}({', '.join(self.params)}):\n{self.statements}"

    @classmethod
    def parse(cls, text: str, entry: str) -> KernelBody:
        """The body of `text`, a family's kernel module whose kernel function `entry` is a
        `@cuda.jit(...)` line and `def entry(a, b, ...):` (the families write theirs so); ValueError
        when there is none, or when the fields would not write `text` back byte for byte."""
        lines = text.splitlines(keepends=True)
        for i in range(1, len(lines)):
            head, deco = lines[i].rstrip("\n"), lines[i - 1].rstrip("\n")
            if head.startswith(f"def {entry}(") and head.endswith("):") and deco.startswith("@cuda.jit(") and deco.endswith(")"):
                names = tuple(p.strip() for p in head[len(f"def {entry}(") : -2].split(",") if p.strip())
                body = cls(entry, names, "".join(lines[i + 1 :]), deco[len("@cuda.jit(") : -1], "".join(lines[: i - 1]))
                if body.text() != text:
                    raise ValueError(f"kernel function `{entry}`: its text is not `@cuda.jit(...)`, `def {entry}(a, b):`, statements")
                return body
        raise ValueError(f"no kernel function `{entry}` in the body")


def with_pdl(body: KernelBody, mode: str) -> KernelBody:
    """`body` with `pdl_lines(mode)` first in its kernel function (`pdl_wait()`; under `early` after
    `pdl_launch()`, under `ahead` followed by it), unless its top-level statements already call
    `pdl_wait()` or hold the `LATE_WAIT` comment (a kernel placing work that reads no earlier
    launch's result before its wait)."""
    if mode == "off":
        return body
    top = []
    for line in body.statements.splitlines():
        if line[:1] not in ("", " ", "#"):
            break
        top.append(line.strip())
    if "pdl_wait()" in top or LATE_WAIT in top:
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
