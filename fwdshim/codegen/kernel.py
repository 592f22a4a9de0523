"""Generated kernel source -> a Numba CUDA kernel, cached in memory and on disk.

Every kernel of `fwdshim.codegen` is *generated* Python source: one string per kernel spec, with
sizes, `eps` and options baked in as constants, so that `fwdshim-opt -t numba` can print exactly
what runs. This module turns such a string into a launchable kernel:

- `KernelSource(name, source, entry)`: the text of one module and the name of its kernel function.
- `compile_kernel(ks) -> dispatcher`: writes the source to the kernel cache directory
  (`$FWDSHIM_CACHE/kernels`, else `~/.cache/fwdshim/kernels`, beside the models) as `<name>_<sha>.py`, imports it with
  importlib and returns its `entry` (a `numba.cuda.jit(cache=True)` dispatcher). Numba's on-disk
  cache needs that real file; the file name hashes the source, the numba-cuda version and the
  execution mode, so a file is never rewritten once written (a rewrite would invalidate Numba's
  cache index). Cached in memory per `KernelSource` (`functools.cache`).
- `Kernel`: what a kernel family factory returns — the dispatcher (a `LazyDispatcher`: `compile_kernel`
  runs on its first launch or attribute, so planning and printing kernels write nothing to the
  cache), its launch configuration and its
  parameters in launch order, each a `Param` (name, dtype, number of elements, in/out). Every array
  parameter is a 1-D C-contiguous array (pass `a.reshape(-1)` of the logical shape that the family's
  docstring gives); launch as `k.fn[k.grid, k.block](*arrays)`, on a GPU also
  `k.fn[k.grid, k.block, stream_or_graph_builder](*arrays)` (cuda.core `GraphBuilder`), or
  `k.launch_on(stream_or_graph_builder, *arrays)`: the same, with programmatic dependent launch when
  its `pdl` (`Tuning.pdl`) asks for it (`build` then starts each kernel function with `pdl_wait()`).
- `prelude()`: the import lines that start every generated module. On a GPU they bind the
  primitives (`fadd_rn`, `fmul_rn`, ..., `shfl_xor`, `prefetch_l2`, `ld_i32`, `ld_i32x4`, `s8x4_f32`, `dp4a`) to libdevice,
  warp shuffles and `fwdshim.codegen.intrinsics`; under Numba's CUDA simulator
  (`NUMBA_ENABLE_CUDASIM=1`), which has neither libdevice nor warp shuffles, to the Python
  equivalents in `fwdshim.codegen.simulator` (there the warp reductions `warp_sum`, `warp_max`,
  `warp_isum` too: the same butterfly, computed once per warp). The kernel bodies are the same text
  in both modes.

Rounding: where fused and unfused kernels must agree bit for bit (the contract's `fused: EXACT`)
generated code spells every float operation as `fadd_rn`/`fsub_rn`/`fmul_rn`/`fdiv_rn`, which Numba
cannot contract into an FMA.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from fwdshim.codegen.tuning import Tuning

CACHE_ENV = "FWDSHIM_CACHE"
"""Environment variable naming the kernel cache directory."""


def simulating() -> bool:
    """Whether Numba's CUDA simulator is on (`NUMBA_ENABLE_CUDASIM=1` before numba was imported)."""
    from numba import config

    return bool(config.ENABLE_CUDASIM)


@dataclass(frozen=True)
class SMLimits:
    """What one streaming multiprocessor holds (defaults: the H200's, sm_90): `sms` of them, `regs`
    32-bit registers (allocated a warp at a time in units of `reg_unit`), `shared` bytes of shared
    memory (each block also takes `reserved_shared`), `threads` threads and `blocks` blocks."""

    sms: int = 132
    regs: int = 65536
    reg_unit: int = 256
    shared: int = 233472
    reserved_shared: int = 1024
    threads: int = 2048
    blocks: int = 32


def occupancy(regs: int, shared: int, threads: int, limits: SMLimits = SMLimits()) -> tuple[int, str]:
    """(blocks an SM holds at once, what limits them: `registers`, `shared memory`, `threads` or
    `blocks`) for a block of `threads` threads using `regs` registers a thread and `shared` bytes of
    shared memory, by CUDA's occupancy rules (registers rounded up to `limits.reg_unit` a warp).
    E.g. 116 registers x 128 threads on an H200: 4 blocks an SM, limited by the registers."""
    warps = -(-threads // 32)
    per_warp = -(-regs * 32 // limits.reg_unit) * limits.reg_unit
    by = {
        "registers": limits.regs // max(1, per_warp * warps),
        "shared memory": limits.shared // (shared + limits.reserved_shared),
        "threads": limits.threads // (warps * 32),
        "blocks": limits.blocks,
    }
    n = min(by.values())
    return n, next(k for k, v in by.items() if v == n)


SMS = SMLimits().sms
"""The streaming multiprocessors `sm_count` assumes where there is no GPU to ask (an H200's)."""


@functools.cache
def sm_count() -> int:
    """The current GPU's streaming multiprocessors (grids sized in waves of blocks); `SMS` under the
    simulator or without a GPU."""
    if simulating():
        return SMS
    try:
        from numba import cuda

        return int(cuda.get_current_device().MULTIPROCESSOR_COUNT)
    except Exception:  # noqa: BLE001 - no driver, no device: plan for the H200
        return SMS


def cache_dir() -> Path:
    """The directory generated kernel modules are written to (created on demand)."""
    root = os.environ.get(CACHE_ENV)
    path = (Path(root) if root else Path.home() / ".cache" / "fwdshim") / "kernels"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # a file of that name, a read-only disk
        raise KernelCacheError(f"{path}: cannot make the kernel cache ({e.strerror or e}); {CACHE_ENV} names another cache directory") from None
    return path


class KernelCacheError(OSError):
    """The kernel cache cannot be made or written (the message names the path): one line, not a bug."""


def _holds(path: Path, source: str) -> bool:
    """`path` is a file holding exactly `source`; a damaged, partial or unreadable copy is not (it is
    written again)."""
    try:
        return path.read_bytes() == source.encode()
    except OSError:
        return False


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


@dataclass(frozen=True)
class KernelSource:
    """The generated source of one kernel module and the name of its kernel function."""

    name: str
    source: str
    entry: str


@dataclass(frozen=True)
class Param:
    """One kernel parameter: a 1-D C-contiguous array of `size` elements of `dtype`.

    `dtype` is a NumPy dtype name (`float32`, `float16`, `uint16`, `int8`, `int32`, `int64`); `role` is `in`,
    `out` (written whole) or `inout`; `doc` the logical shape and meaning."""

    name: str
    dtype: str
    size: int
    role: str = "in"
    doc: str = ""

    @property
    def numba_type(self) -> str:
        return f"{_NUMBA_NAMES[self.dtype]}[::1]"


_NUMBA_NAMES = {
    "float32": "float32",
    "float16": "float16",
    "uint16": "uint16",
    "int8": "int8",
    "int32": "int32",
    "int64": "int64",
}


class KernelSpec:
    """What a kernel family built a kernel from, as data: a family's frozen spec (`gemv.GemvSpec`,
    `rope.RopeSpec`, `quantize.QuantizeSpec`, `unary.BinarySpec`, `fused.ElementwiseSpec`, ...)
    derives from this and names its `family`. `codegen.merge` asks a kernel's spec what it is and
    rebuilds it as a variant from it, never from its name or source."""

    family: ClassVar[str] = ""


@dataclass(frozen=True)
class Kernel:
    """A compiled kernel with its launch configuration (see the module docstring).

    `params` are in launch order; `notes` says what the kernel computes, for plans and listings;
    `spec` what its family built it from (`KernelSpec`; None for a kernel no later step rebuilds)."""

    name: str
    source: str
    fn: Any = field(repr=False, compare=False)
    grid: tuple[int, ...]
    block: tuple[int, ...]
    params: tuple[Param, ...]
    notes: str = ""
    pdl: str = "off"
    """How `launch_on` launches it (`Tuning.pdl`: the mode its waits were placed for)."""
    spec: KernelSpec | None = field(default=None, repr=False, compare=False)

    @property
    def family(self) -> str:
        """The family that built the kernel (its spec's `family`; `""` for none)."""
        return self.spec.family if self.spec is not None else ""

    @property
    def body(self) -> str:
        """The kernel's own text: its source after the prelude (what `codegen.merge` and
        `codegen.prefetch` rewrite). Raises ValueError for a source without the prelude."""
        head = prelude()
        i = self.source.find(head)
        if i < 0:
            raise ValueError(f"kernel {self.name}: no prelude in its source")
        return self.source[i + len(head) :].strip("\n")

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    @property
    def signature(self) -> str:
        """The Numba signature of the parameters, e.g. `void(float32[::1], int8[::1])`."""
        return "void(" + ", ".join(p.numba_type for p in self.params) + ")"

    def launch_on(self, stream: Any, *arrays) -> None:
        """Launch on `arrays` on `stream` (a cuda.core stream or graph builder), with programmatic
        dependent launch unless its `pdl` is off (the kernel's blocks are then scheduled before the
        launch before it ends, and wait in `pdl_wait`); else as `launch`. Under the simulator: a
        plain launch."""
        if self.pdl == "off" or simulating():
            self.launch(*arrays, stream=stream)
            return
        from cuda.core import LaunchConfig, launch

        kobj = self.fn.compile(self.signature)
        kernelargs: list = []
        retr: list = []
        for t, v in zip(kobj.argument_types, arrays, strict=True):
            kobj._prepare_args(t, v, 0, retr, kernelargs)
        cfg = LaunchConfig(grid=self.grid, block=self.block, programmatic_stream_serialization=True)
        launch(stream, cfg, kobj._codelibrary.get_cufunc().kernel, *kernelargs)

    def launch(self, *arrays, stream=None) -> None:
        """Launch on `arrays` (in `params` order); `stream` may be a stream or a graph builder."""
        if len(arrays) != len(self.params):
            raise TypeError(f"kernel {self.name} takes {len(self.params)} arrays {self.param_names}, got {len(arrays)}")
        if stream is None:
            self.fn[self.grid, self.block](*arrays)
        else:
            self.fn[self.grid, self.block, stream](*arrays)

    def compile(self):
        """Compile now for the parameters' signature (GPU only), so no compile happens in a capture."""
        if simulating():
            return None
        return self.fn.compile(self.signature)

    def host_arrays(self, **given: np.ndarray) -> list[np.ndarray]:
        """The launch arguments as host arrays: `given[name]` flattened (and checked), zeros for
        outputs not given. A convenience for tests and the simulator."""
        out = []
        for p in self.params:
            a = given.get(p.name)
            if a is None:
                if p.role == "in":
                    raise TypeError(f"kernel {self.name} needs input `{p.name}` ({p.doc})")
                a = np.zeros(p.size, dtype=p.dtype)
            a = np.ascontiguousarray(a).reshape(-1)
            if a.dtype != np.dtype(p.dtype) or a.size != p.size:
                raise TypeError(f"kernel {self.name} `{p.name}` wants {p.size} {p.dtype}, got {a.size} {a.dtype}")
            out.append(a)
        return out

    def run(self, **given: np.ndarray) -> dict[str, np.ndarray]:
        """Launch on host arrays (`host_arrays`) and return every array by name (outputs filled)."""
        arrays = self.host_arrays(**given)
        if simulating():
            self.fn[self.grid, self.block](*arrays)
            return dict(zip(self.param_names, arrays))
        from numba import cuda

        dev = [cuda.to_device(a) for a in arrays]
        self.fn[self.grid, self.block](*dev)
        cuda.synchronize()
        return {p.name: d.copy_to_host() for p, d in zip(self.params, dev)}


def _stamp(source: str) -> str:
    import numba_cuda

    mode = "sim" if simulating() else "gpu"
    h = hashlib.sha256(f"{numba_cuda.__version__}\0{mode}\0{source}".encode()).hexdigest()
    return h[:16]


CACHE_STATS = {"hits": 0, "written": 0}
"""Kernel modules this process found in the kernel cache (`hits`: Numba's own cache beside them is
reused) or wrote there (`written`), for `fwdshim run`'s compile line."""


@functools.cache
def compile_kernel(ks: KernelSource):
    """Write `ks.source` to the cache directory, import it and return its `ks.entry` dispatcher."""
    module_name = f"{ks.name}_{_stamp(ks.source)}"
    path = cache_dir() / f"{module_name}.py"
    hit = _holds(path, ks.source)
    CACHE_STATS["hits" if hit else "written"] += 1
    if not hit:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        try:
            tmp.write_bytes(ks.source.encode())
            os.replace(tmp, path)
        except OSError as e:  # a directory of that name, a full or read-only disk
            if tmp.is_file():
                tmp.unlink()
            raise KernelCacheError(f"{path}: cannot write the kernel into the cache ({e.strerror or e}); {CACHE_ENV} names another cache directory") from None
    qualified = f"fwdshim_kernels.{module_name}"
    spec = importlib.util.spec_from_file_location(qualified, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import generated kernel module {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module
    spec.loader.exec_module(module)
    return getattr(module, ks.entry)


class LazyDispatcher:
    """`compile_kernel(ks)`'s dispatcher, made on first use (a launch `fn[grid, block]`, or any of its
    attributes): planning a step and printing its kernels (`fwd-lower-numba`, `-t numba`) write
    nothing into the kernel cache; only a kernel that runs (or is compiled) is written there."""

    __slots__ = ("ks",)

    def __init__(self, ks: KernelSource) -> None:
        self.ks = ks

    def __getitem__(self, config):
        return compile_kernel(self.ks)[config]

    def __getattr__(self, name: str):
        if name.startswith("__") or name == "ks":  # copy and pickle probe these before `ks` is set
            raise AttributeError(name)
        return getattr(compile_kernel(self.ks), name)


LATE_WAIT = "# pdl: waits after its weight copies"
"""The comment line by which a kernel function (or a merged launch whose every part is such a kernel)
says it places its own `pdl_lines()` after work that reads no earlier launch's result (`_with_pdl`
then adds none at its top)."""


def pdl_lines(mode: str) -> list[str]:
    """The statements that open a kernel under programmatic dependent launch `mode` (`Tuning.pdl`,
    `tuning.PDL_MODES`): none when off; `pdl_wait()`; under `ahead` then `pdl_launch()`; under `early`
    `pdl_launch()` first."""
    return {"off": [], "wait": ["pdl_wait()"], "ahead": ["pdl_wait()", "pdl_launch()"], "early": ["pdl_launch()", "pdl_wait()"]}[mode]


def _with_pdl(body: str, entry: str, mode: str) -> str:
    """`body` with `pdl_wait()` first in kernel function `entry` (under `early` after `pdl_launch()`,
    under `ahead` followed by it: `pdl_lines`), unless `entry` already calls `pdl_wait()` itself or
    holds the `LATE_WAIT` comment (a kernel placing work that reads no earlier launch's result before
    it). ValueError when `entry` is not defined in `body`."""
    if mode == "off":
        return body
    lines = body.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"def {entry}("):
            end = next((j for j in range(i + 1, len(lines)) if lines[j][:1] not in ("", " ", "#")), len(lines))
            if any(ln.strip() in ("pdl_wait()", LATE_WAIT) for ln in lines[i + 1 : end]):
                return body
            head = ["    " + ln for ln in pdl_lines(mode)]
            return "\n".join(lines[: i + 1] + head + lines[i + 1 :]) + "\n"
    raise ValueError(f"no kernel function `{entry}` in the body")


def build(name: str, body: str, entry: str, grid, block, params, notes: str = "", *, pdl: str,
          spec: KernelSpec | None = None) -> Kernel:  # fmt: skip
    """Prefix `body` with the prelude and wrap it as a `Kernel` (its `fn` a `LazyDispatcher`: the
    source is written to the cache and imported when the kernel is first launched or compiled);
    `pdl` (`Tuning.pdl`) places the kernel's wait (`_with_pdl`) and says how it is launched; `spec`
    is what the family built it from (`KernelSpec`)."""
    body = _with_pdl(body, entry, pdl)
    source = f'"""fwdshim kernel {name}: {notes}"""\n' + prelude() + "\n\n" + body
    fn = LazyDispatcher(KernelSource(name, source, entry))
    return Kernel(name, source, fn, tuple(grid), tuple(block), tuple(params), notes, pdl, spec)


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
