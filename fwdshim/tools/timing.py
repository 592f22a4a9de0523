"""Timing on the GPU, shared by `fwdshim profile` and the drivers in `bench/`: CUDA graphs replayed
between two events on a cuda.core stream (`Timer`), the kernels a time is judged against — a
streaming read of 1 GiB (`read_ceiling_gbs`, the read ceiling), a bare read of a given number of
bytes (`size_read_us`: what one launch of that many bytes can take at best), an empty launch
(`empty_launch_us`, the launch floor) — and `L2_BYTES`, past which copies are rotated so that each
launch reads from HBM. Needs a GPU (numba-cuda and cuda.core); nothing here runs under the simulator.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

L2_BYTES = 60 * 2**20
"""The H200's L2 (50 MB on an H100): weight copies pass 3x (profile) or 4x (bench) this."""


class Timer:
    """CUDA-event timing of graphs on a cuda.core stream: `device` and `stream` given (a runtime's),
    else the current Numba device and a new stream; the wall clock after a sync where this cuda.core
    has no timing events."""

    def __init__(self, device: Any = None, stream: Any = None):
        if device is None:
            from cuda.core import Device
            from numba import cuda

            device = Device(cuda.get_current_device().id)
            device.set_current()
        self.device = device
        self.stream = stream if stream is not None else device.create_stream()

    def graph(self, record) -> Any:
        """The graph `record(builder)` captures."""
        gb = self.device.create_graph_builder()
        gb.begin_building()
        record(gb)
        return gb.end_building().complete()

    def replay_us(self, graph, reps: int, per: int = 1) -> float:
        """Microseconds a replay of `graph` over `per` (its launches: the time per launch), `reps`
        replays after two warm ones."""
        graph.launch(self.stream)
        graph.launch(self.stream)
        self.stream.sync()
        try:
            from cuda.core import EventOptions

            opts = EventOptions(timing_enabled=True)
            start = self.stream.record(options=opts)
            for _ in range(reps):
                graph.launch(self.stream)
            stop = self.stream.record(options=opts)
            stop.sync()
            return float(stop - start) * 1e3 / reps / per
        except (ImportError, TypeError):  # no timing events in this cuda.core: the wall clock
            t = time.perf_counter()
            for _ in range(reps):
                graph.launch(self.stream)
            self.stream.sync()
            return (time.perf_counter() - t) * 1e6 / reps / per

    def replay_ms(self, graph, reps: int) -> float:
        """Milliseconds a replay of `graph` (`replay_us` of the whole graph)."""
        return self.replay_us(graph, reps) / 1e3


def streaming_read_kernel(words: int, grid: int = 1024, block: int = 256):
    """A Numba kernel `read_k(a int32 [words], out int64 [1])` that reads all of `a` with 16-byte loads,
    four in flight a thread (the read ceiling of `fwdshim profile` and `bench/gemv.py`); launch it as
    `read_k[grid, block]`. `words` a multiple of 16 * grid * block."""
    from numba import cuda

    from fwdshim.codegen.intrinsics import ld_i32x4

    stride = grid * block * 4

    @cuda.jit
    def read_k(a, out):
        i = cuda.grid(1) * 4
        acc = 0
        while i < words:
            a0, a1, a2, a3 = ld_i32x4(a, i)
            b0, b1, b2, b3 = ld_i32x4(a, i + stride)
            c0, c1, c2, c3 = ld_i32x4(a, i + 2 * stride)
            d0, d1, d2, d3 = ld_i32x4(a, i + 3 * stride)
            acc ^= a0 ^ a1 ^ a2 ^ a3 ^ b0 ^ b1 ^ b2 ^ b3 ^ c0 ^ c1 ^ c2 ^ c3 ^ d0 ^ d1 ^ d2 ^ d3
            i += 4 * stride
        if acc == 0x7FEDCBA9:
            out[0] = acc

    return read_k


def sized_read_kernel(unroll: int):
    """A Numba kernel `read_k(a int32 [words], words, out int64 [1])` reading all of `a` (`words` a
    multiple of 4) with 16-byte loads at a grid stride, `unroll` of them issued before their use, then
    the rest one at a time: every word XORed into its thread's accumulator once (`bench/read_sizes.py`,
    `size_read_us`). Any grid; launch it as `read_k[blocks, threads]`."""
    from numba import cuda, int32

    from fwdshim.codegen.intrinsics import ld_i32x4

    if unroll < 1:
        raise ValueError(f"a read of {unroll} loads in flight")
    loads = "\n".join(f"        a{u}, b{u}, c{u}, d{u} = ld_i32x4(a, i + {u} * stride)" for u in range(unroll))
    xors = " ^ ".join(f"a{u} ^ b{u} ^ c{u} ^ d{u}" for u in range(unroll))
    src = f"""
def read_k(a, words, out):
    stride = cuda.gridsize(1) * 4
    i = cuda.grid(1) * 4
    acc = int32(0)
    while i + {unroll - 1} * stride + 4 <= words:
{loads}
        acc ^= {xors}
        i += {unroll} * stride
    while i + 4 <= words:
        a0, b0, c0, d0 = ld_i32x4(a, i)
        acc ^= a0 ^ b0 ^ c0 ^ d0
        i += stride
    if acc == 0x7FEDCBA9:
        out[0] = acc
"""
    scope = {"cuda": cuda, "int32": int32, "ld_i32x4": ld_i32x4}
    exec(src, scope)  # noqa: S102 - our own generated source, as the codegen's kernels are
    return cuda.jit(scope["read_k"])


SIZE_READ_GRIDS = ((1056, 256, 4), (528, 512, 2), (132, 256, 2), (66, 256, 2), (33, 256, 1))
"""(blocks, threads, loads in flight) of the bare reads `size_read_us` takes the best of: within 0.2 %
of the best of `bench/read_sizes.py`'s 27 grids at every size it timed on an H200 (0.12-132 MB, two
runs, 2026-12-03)."""


def size_read_us(timer: Timer, nbytes: int, reps: int, min_launches: int = 32) -> float:
    """Microseconds of the best bare read (`sized_read_kernel`, grids `SIZE_READ_GRIDS`) of `nbytes`
    (rounded up to 16) a launch, over copies rotated past 3x the L2 (at most 64, as `time_kernels`
    rotates a kernel's weights) in a graph of at least `min_launches` launches."""
    from numba import cuda

    words = max(4, -(-nbytes // 16) * 4)
    copies = max(1, min(64, math.ceil(3 * L2_BYTES / (4 * words))))
    stride = -(-words // 64) * 64
    flat = cuda.device_array(stride * copies, np.int32)
    flat[:] = 1
    bufs = [flat[c * stride : c * stride + words] for c in range(copies)]
    launches = copies * -(-min_launches // copies)
    times = read_times(bufs, words, SIZE_READ_GRIDS, launches, lambda record: timer.replay_us(timer.graph(record), reps, launches))
    del bufs, flat
    return min(times.values())


def read_times(bufs: list, words: int, grids, launches: int, time_graph) -> dict[tuple[int, int, int], float]:
    """Each grid's `(blocks, threads, unroll)` time of `sized_read_kernel` reading `bufs` (device
    int32 arrays of `words` each) in turn, `launches` launches in a graph: `time_graph(record)` times
    the graph `record(builder)` captures, per launch (in its own unit)."""
    from numba import cuda

    out = cuda.device_array(1, np.int64)
    times = {}
    for blocks, threads, unroll in grids:
        k = sized_read(unroll)
        k[blocks, threads](bufs[0], words, out)  # compiled and loaded before any capture
        cuda.synchronize()

        def record(gb, k=k, blocks=blocks, threads=threads):
            for i in range(launches):
                k[blocks, threads, gb](bufs[i % len(bufs)], words, out)

        times[(blocks, threads, unroll)] = time_graph(record)
    return times


_SIZED_READS: dict[int, Any] = {}


def sized_read(unroll: int):
    if unroll not in _SIZED_READS:
        _SIZED_READS[unroll] = sized_read_kernel(unroll)
    return _SIZED_READS[unroll]


def read_ceiling_gbs(timer: Timer, reps: int, words: int = 2**28, grid: int = 1024, block: int = 256) -> float:
    """GB/s of a streaming read (`streaming_read_kernel`) of `words` int32 words (default 1 GiB) by a
    `grid` x `block` launch, replayed `reps` times."""
    from numba import cuda

    read_k = streaming_read_kernel(words, grid, block)
    a = cuda.to_device(np.ones(words, dtype=np.int32))
    out = cuda.device_array(1, np.int64)
    read_k[grid, block](a, out)
    cuda.synchronize()
    us = timer.replay_us(timer.graph(lambda gb: read_k[grid, block, gb](a, out)), reps, 1)
    return 4 * words / us / 1e3


_EMPTY: dict[str, Any] = {}


def empty_launch_us(timer: Timer, reps: int, grid: int = 1, block: int = 32, launches: int = 32) -> float:
    """Microseconds a launch of an empty kernel of `grid` x `block` in a graph of `launches` launches,
    replayed `reps` times (with the defaults, `fwdshim profile`'s launch floor)."""
    from numba import cuda

    if "k" not in _EMPTY:

        @cuda.jit
        def empty_k(y):
            if cuda.threadIdx.x == 4096:
                y[0] = 1.0

        _EMPTY["k"], _EMPTY["y"] = empty_k, cuda.device_array(1, np.float32)
        empty_k[1, 32](_EMPTY["y"])  # compiled and loaded before any capture
        cuda.synchronize()
    k, y = _EMPTY["k"], _EMPTY["y"]

    def record(gb):
        for _ in range(launches):
            k[grid, block, gb](y)

    return timer.replay_us(timer.graph(record), reps, launches)
