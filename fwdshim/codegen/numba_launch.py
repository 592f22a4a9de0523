"""The one place that touches Numba's private launch API: a compiled Numba kernel launched through
cuda.core with programmatic stream serialization (programmatic dependent launch), which Numba's own
launch does not offer. `launch_pdl` prepares the arguments as Numba's dispatcher does
(`_prepare_args`) and launches the kernel's `CUfunction` (`_codelibrary.get_cufunc()`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def launch_pdl(fn: Any, signature: str, grid: tuple[int, ...], block: tuple[int, ...], stream: Any,
               arrays: Sequence) -> None:  # fmt: skip
    """Launch dispatcher `fn` compiled for `signature` on `arrays` as a `grid` x `block` launch on
    `stream` (a cuda.core stream or graph builder) whose blocks may be scheduled before the launch
    before it ends (they wait in `pdl_wait`)."""
    from cuda.core import LaunchConfig, launch

    kobj = fn.compile(signature)
    kernelargs: list = []
    retr: list = []
    for t, v in zip(kobj.argument_types, arrays, strict=True):
        kobj._prepare_args(t, v, 0, retr, kernelargs)
    cfg = LaunchConfig(grid=grid, block=block, programmatic_stream_serialization=True)
    launch(stream, cfg, kobj._codelibrary.get_cufunc().kernel, *kernelargs)
