"""A block scheduler for Numba's CUDA simulator that waits instead of polling (the test suite's).

Numba's `BlockManager.run` starts one Python thread per CUDA thread of a block, then polls every live
thread (`is_alive`, `syncthreads_blocked`) in a loop until all have finished, releasing them when all
the live ones wait in `syncthreads()`. The polling thread competes for the GIL with the threads doing
the work: most of a simulated launch is spent polling (3 million `is_alive` calls in one end-to-end
test), and each `Thread.start()` waits for the GIL behind threads already computing.

`install()` keeps the simulator's semantics and replaces only the waiting:

- the threads are kept between blocks (a pool: starting ~20 000 threads cost seconds per test);
- a thread counts itself blocked (in `syncthreads()`) or finished under the block's condition and
  wakes the manager, which sleeps on that condition until something changed;
- `cuda.shared.array`'s get-or-create holds a lock (threads that start together raced on it);
- when every live thread is blocked the manager releases them all, as Numba's does (so a thread that
  returned early still lets the rest pass a barrier), and an exception in any thread aborts the
  others and is raised with its thread and block named, as Numba's does.

Kernels run the same Python, thread by thread, with the same barriers: nothing checked is weakened.
"""

from __future__ import annotations

import threading

import numpy as np
from numba.cuda.simulator import kernel as K


class _Worker(K.BlockThread):
    """A simulated CUDA thread kept between blocks: given a block's manager, its thread index and
    the kernel, it runs the kernel once and waits for the next block."""

    def __init__(self):
        threading.Thread.__init__(self, daemon=True)
        self._go = threading.Semaphore(0)
        self.syncthreads_event = threading.Event()

    def assign(self, manager, block_idx, thread_idx, thread_id: int) -> None:
        self._manager = manager
        self.blockIdx = K.Dim3(*block_idx)
        self.threadIdx = K.Dim3(*thread_idx)
        self.thread_id = thread_id
        self.syncthreads_blocked = False
        self.syncthreads_event.clear()
        self.exception = None
        self.abort = False
        self.debug = False

    def run(self):
        while True:
            self._go.acquire()
            m = self._manager
            try:
                m._f(*m._args)
            except Exception as e:  # as Numba's BlockThread.run words it
                tid, ctaid = f"tid={list(self.threadIdx)}", f"ctaid={list(self.blockIdx)}"
                msg = f"{tid} {ctaid}" if str(e) == "" else f"{tid} {ctaid}: {e}"
                self.exception = (type(e)(msg), e.__traceback__)
            finally:
                with m._cond:
                    m._done += 1
                    if self.exception and m._failed is None:
                        m._failed = self
                    m._cond.notify()

    def syncthreads(self):
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads call")
        m = self._manager
        with m._cond:
            self.syncthreads_blocked = True
            m._blocked += 1
            m._cond.notify()
        self.syncthreads_event.wait()
        self.syncthreads_event.clear()
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads clear")


_idle: list[_Worker] = []
_idle_lock = threading.Lock()


def _workers(n: int) -> list[_Worker]:
    with _idle_lock:
        got = [_idle.pop() for _ in range(min(n, len(_idle)))]
    while len(got) < n:
        w = _Worker()
        w.start()
        got.append(w)
    return got


def _block_run(self, grid_point, *args):
    if self._debug:  # Numba's own (per-thread floating-point traps)
        return _numba_block_run(self, grid_point, *args)
    self._cond = threading.Condition()
    self._blocked = self._done = 0
    self._failed = None
    self._args = args
    points = list(np.ndindex(*self._block_dim))
    bx, by, _ = (tuple(self._block_dim) + (1, 1))[:3]
    threads = _workers(len(points))
    for t, (x, *yz) in zip(threads, points):
        y, z = (yz + [0, 0])[:2]
        t.assign(self, grid_point, (x, *yz), x + bx * (y + by * z))
    for t in threads:
        t._go.release()
    with self._cond:
        while True:
            if self._failed is not None:
                for t in threads:  # abort the others; they are not reused (one may wait forever)
                    t.abort = True
                    t.syncthreads_blocked = False
                    t.syncthreads_event.set()
                failed = self._failed.exception
                raise failed[0].with_traceback(failed[1])
            live = len(threads) - self._done
            if live == 0:
                break
            if self._blocked == live:
                for t in threads:
                    if t.syncthreads_blocked:
                        t.syncthreads_blocked = False
                        t.syncthreads_event.set()
                self._blocked = 0
            self._cond.wait()
    with _idle_lock:
        _idle.extend(threads)


_numba_block_run = K.BlockManager.run
_shared_lock = threading.Lock()


def _shared_array(self, shape, dtype):
    """Numba's `FakeCUDAShared.array` (one array per source line of the launch), its get-or-create
    under a lock: the threads of a block now start together, and two threads creating the same
    array at once each got an array of their own (a block reduction then reads half the values)."""
    import sys
    import traceback

    from numba.core import types
    from numba.np import numpy_support

    if isinstance(dtype, types.Type):
        dtype = numpy_support.as_dtype(dtype)
    if shape == 0:
        count = self._dynshared_size // dtype.itemsize
        return np.frombuffer(self._dynshared.data, dtype=dtype, count=count)
    caller = tuple(traceback.extract_stack(sys._getframe(1), limit=1)[-1][0:2])
    with _shared_lock:
        res = self._allocations.get(caller)
        if res is None:
            res = self._allocations[caller] = np.empty(shape, dtype)
    return res


def install() -> None:
    """Use the waiting scheduler for every simulated launch of this process."""
    from numba.cuda.simulator import kernelapi

    K.BlockManager.run = _block_run
    kernelapi.FakeCUDAShared.array = _shared_array
