"""The test suite's simulator scheduler (`fastsim`) keeps Numba's semantics: barriers, a thread
that returns early, `syncthreads_count`, and an exception named by its thread and block."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, float32

from fwdshim.codegen.device import simulating

pytestmark = pytest.mark.skipif(not simulating(), reason="the simulator's scheduler")
# (the kernels read `cuda` as a global: the simulator swaps the module in their globals)


def test_installed():
    from numba.cuda.simulator import kernel as K
    from support import fastsim

    assert K.BlockManager.run is fastsim._block_run


def test_barriers_order_shared_memory_across_blocks():
    @cuda.jit
    def block_sum(x, out):
        s = cuda.shared.array(64, float32)
        i = cuda.threadIdx.x
        s[i] = x[cuda.blockIdx.x * 64 + i]
        cuda.syncthreads()
        step = 32
        while step > 0:
            if i < step:
                s[i] += s[i + step]
            cuda.syncthreads()
            step //= 2
        if i == 0:
            out[cuda.blockIdx.x] = s[0]

    x = np.arange(3 * 64, dtype=np.float32)
    out = np.zeros(3, dtype=np.float32)
    block_sum[3, 64](x, out)
    assert out.tolist() == [float(x[b * 64 : (b + 1) * 64].sum()) for b in range(3)]


def test_early_return_and_syncthreads_count():
    @cuda.jit
    def count(out):
        i = cuda.threadIdx.x + 4 * cuda.threadIdx.y
        if i >= 10:
            return  # six threads leave: the rest still pass the barrier
        n = cuda.syncthreads_count(i % 2)
        out[i] = n

    out = np.full(16, -1, dtype=np.int32)
    count[1, (4, 4)](out)
    assert out.tolist() == [5] * 10 + [-1] * 6


def test_an_exception_names_its_thread_and_block():
    @cuda.jit
    def bad(out):
        if cuda.blockIdx.x == 1 and cuda.threadIdx.x == 3:
            raise ValueError("boom")
        cuda.syncthreads()
        out[cuda.threadIdx.x] = 1

    with pytest.raises(ValueError, match=r"tid=\[3, 0, 0\] ctaid=\[1, 0, 0\]: boom"):
        bad[2, 8](np.zeros(8, dtype=np.int32))
    ok = np.zeros(8, dtype=np.int32)
    bad[1, 8](ok)  # the pool is still usable after a failed launch
    assert ok.tolist() == [1] * 8


def test_one_shared_array_per_block_when_threads_start_together():
    @cuda.jit
    def fill_and_sum(out):
        s = cuda.shared.array(128, float32)
        s[cuda.threadIdx.x] = 1.0
        cuda.syncthreads()
        if cuda.threadIdx.x == 0:
            t = 0.0
            for i in range(128):
                t += s[i]
            out[cuda.blockIdx.x] = t

    out = np.zeros(4, dtype=np.float32)
    for _ in range(3):
        fill_and_sum[4, 128](out)
        assert out.tolist() == [128.0] * 4
