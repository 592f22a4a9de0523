"""The device kernels are planned for: whether Numba's CUDA simulator is on (`simulating`), what one
streaming multiprocessor holds (`SMLimits`) and how many blocks of a kernel it runs at once
(`occupancy`), and how many SMs the current GPU has (`sm_count`; an H200's 132 without one)."""

from __future__ import annotations

import functools
from dataclasses import dataclass


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
