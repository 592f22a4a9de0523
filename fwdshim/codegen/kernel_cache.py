"""Generated kernel source -> a Numba CUDA dispatcher, through the kernel cache on disk.

- `KernelSource(name, source, entry)`: the text of one kernel module and the name of its kernel function.
- `compile_kernel(ks) -> dispatcher`: writes the source to the kernel cache directory
  (`$FWDSHIM_CACHE/kernels`, else `~/.cache/fwdshim/kernels`, beside the models) as `<name>_<sha>.py`,
  imports it with importlib and returns its `entry` (a `numba.cuda.jit(cache=True)` dispatcher).
  Numba's on-disk cache needs that real file; the file name hashes the source, the numba-cuda version
  and the execution mode, so a file is never rewritten once written (a rewrite would invalidate
  Numba's cache index). Cached in memory per `KernelSource` (`functools.cache`).
- `LazyDispatcher`: `compile_kernel`'s dispatcher, made on first use, so planning and printing
  kernels write nothing to the cache.
- `KernelCacheError`: the cache cannot be made or written (one line naming the path).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from fwdshim.codegen.device import simulating
from fwdshim.files import CACHE_ENV, cache_root


@dataclass(frozen=True)
class KernelSource:
    """The generated source of one kernel module and the name of its kernel function."""

    name: str
    source: str
    entry: str


def cache_dir() -> Path:
    """The directory generated kernel modules are written to (created on demand)."""
    path = cache_root() / "kernels"
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
