"""The generated kernels' primitives under Numba's CUDA simulator (`NUMBA_ENABLE_CUDASIM=1`).

The simulator runs each CUDA thread as a Python thread and has neither libdevice nor warp
shuffles. `fwdshim.codegen.source.prelude()` imports these instead of libdevice and
`fwdshim.codegen.intrinsics` when simulating, so CI runs the same kernel text:

- `fadd_rn`, `fsub_rn`, `fmul_rn`, `fdiv_rn`, `fsqrt_rn`, `frcp_rn`: one float32 operation, rounded
  to nearest (NumPy float32 arithmetic rounds every operation; nothing is fused).
- `roundf` (halves away from zero, exact), `int_as_float` (bit reinterpretation).
- `shfl_xor(v, m)`: the value of lane `lane ^ m` of the calling warp. The lanes of a warp meet at a
  barrier of their own (`threading.Barrier`, one per warp of the simulated block); as on the GPU,
  every lane of the warp must call it.
- `warp_sum`, `warp_max`, `warp_isum`: the prelude's warp reductions, computed once over the values
  of all 32 lanes (the same xor butterfly, the same rounded adds, so the same bits as the GPU's
  shuffles give), meeting at one barrier instead of the five of five shuffles.
- `atomic_add_acq_rel`: the add under a lock (the simulator's threads see every write at once).
- `globaltimer`, `clock64`: the host's nanosecond clock (`time.perf_counter_ns`) for both.
- `prefetch_l2` (checks its arguments, does nothing), `ld_i32`, `ld_i32x4`, `ld_f32x4`, `s8x4_f32`, `u8x4_f32`, `dp4a`, `f16x2_f32`, `bf16x2_f32`: as in `intrinsics`.
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np

F32 = np.float32


def fadd_rn(a, b):
    return F32(F32(a) + F32(b))


def fsub_rn(a, b):
    return F32(F32(a) - F32(b))


def fmul_rn(a, b):
    return F32(F32(a) * F32(b))


def fdiv_rn(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return F32(F32(a) / F32(b))


def fsqrt_rn(a):
    return F32(np.sqrt(F32(a)))


def frcp_rn(a):
    with np.errstate(divide="ignore"):
        return F32(F32(1.0) / F32(a))


def roundf(a):
    """C `roundf`: to the nearest integer, halves away from zero (exact: |a| + 0.5 is exact in f64)."""
    a = float(F32(a))
    return F32(math.copysign(math.floor(abs(a) + 0.5), a))


def int_as_float(i):
    return np.array([i], dtype=np.int64).astype(np.uint32).view(np.float32)[0]


# ---------------------------------------------------------------------------------------------
# warp shuffles

_lock = threading.Lock()


class _Warp:
    """The exchange of one simulated warp: each lane deposits its value, and the last lane to arrive
    at the barrier computes every lane's result (`Barrier(action=...)`) before any lane goes on, so
    one barrier round serves one shuffle or one whole reduction."""

    def __init__(self, lanes: int):
        self.slots: list = [None] * lanes
        self.op = None
        self.out: list = []
        self.barrier = threading.Barrier(lanes, action=self._run)

    def _run(self) -> None:
        self.out = self.op(list(self.slots))

    def exchange(self, lane: int, value, op):
        self.slots[lane] = value
        self.op = op  # every lane of a warp passes the same operation
        self.barrier.wait()
        return self.out[lane]


def _warp() -> tuple[int, _Warp]:
    """(lane, exchange) of the calling simulated thread's warp."""
    t = threading.current_thread()
    mgr = t._manager  # the simulator's BlockManager: one per block launch
    w = t.thread_id // 32
    with _lock:
        warps = mgr.__dict__.setdefault("_fwdshim_warps", {})
        state = warps.get(w)
        if state is None:
            threads = int(np.prod(mgr._block_dim))
            state = warps[w] = _Warp(min(32, threads - 32 * w))
    return t.thread_id % 32, state


def _xor(m: int):
    def op(vals):
        n = len(vals)
        return [vals[i ^ m] if (i ^ m) < n else vals[i] for i in range(n)]

    return op


_XOR = {m: _xor(m) for m in (1, 2, 4, 8, 16)}


def shfl_xor(v, m):
    lane, warp = _warp()
    m = int(m)
    return warp.exchange(lane, v, _XOR.get(m) or _xor(m))


def _butterfly(combine):
    """The xor-butterfly reduction as `warp_sum` & co. compute it on a GPU: the same pairs combined
    in the same order, so the same bits in every lane."""

    def op(vals):
        n = len(vals)
        for m in (16, 8, 4, 2, 1):
            vals = [combine(vals[i], vals[i ^ m]) if (i ^ m) < n else vals[i] for i in range(n)]
        return vals

    return op


_SUM = _butterfly(fadd_rn)
_MAX = _butterfly(max)
_ISUM = _butterfly(lambda a, b: np.int32(np.int64(a) + np.int64(b)))


def warp_sum(v):
    lane, warp = _warp()
    return warp.exchange(lane, F32(v), _SUM)


def warp_max(v):
    lane, warp = _warp()
    return warp.exchange(lane, F32(v), _MAX)


def warp_isum(v):
    lane, warp = _warp()
    return warp.exchange(lane, np.int32(v), _ISUM)


# ---------------------------------------------------------------------------------------------
# wide loads and byte unpacking


def _ndarray(a) -> np.ndarray:
    item = getattr(a, "_item", None)  # FakeWithinKernelCUDAArray -> FakeCUDAArray -> ndarray
    if item is not None:
        return item._ary
    return np.asarray(a)


def _bytes16(a, i) -> np.ndarray:
    arr = _ndarray(a)
    start = int(i) * arr.itemsize
    if start % 16:
        raise ValueError(f"a 16-byte load at byte {start} is not 16-byte aligned")
    raw = arr.reshape(-1).view(np.uint8)[start : start + 16]
    if raw.size != 16:
        raise IndexError(f"a 16-byte load at byte {start} runs past {arr.nbytes} bytes")
    return raw


def prefetch_l2(a, i, nbytes):
    """A hint on the GPU; here only its alignment and bounds are checked."""
    arr = _ndarray(a)
    start = int(i) * arr.itemsize
    if start % 16 or int(nbytes) % 16 or start + int(nbytes) > arr.nbytes or int(nbytes) <= 0:
        raise ValueError(f"a prefetch of {nbytes} bytes at byte {start} of {arr.nbytes}")


def ld_i32(a, i):
    arr = _ndarray(a)
    start = int(i) * arr.itemsize
    if start % 4:
        raise ValueError(f"a 4-byte load at byte {start} is not 4-byte aligned")
    raw = arr.reshape(-1).view(np.uint8)[start : start + 4]
    if raw.size != 4:
        raise IndexError(f"a 4-byte load at byte {start} runs past {arr.nbytes} bytes")
    return raw.view(np.int32)[0]


def ld_i32x4(a, i):
    w = _bytes16(a, i).view(np.int32)
    return (w[0], w[1], w[2], w[3])


def ld_f32x4(a, i):
    w = _bytes16(a, i).view(np.float32)
    return (w[0], w[1], w[2], w[3])


lda_i32x4, lda_f32x4, lda_i32 = ld_i32x4, ld_f32x4, ld_i32


_async = threading.local()
"""Each simulated thread's async copies: `open` (issued since its last commit) and `groups`
(committed, oldest first), as the GPU keeps them per thread."""


def _async_groups() -> list:
    if not hasattr(_async, "groups"):
        _async.groups, _async.open = [], []
    return _async.groups


def _cp_async(size: int):
    def copy(dst, di, src, si):
        """Checks the copy's alignment and bounds now and makes it when a `cp_async_wait` completes
        its group, as late as the GPU may: reading the slot before then reads what was there."""
        d, s = _ndarray(dst), _ndarray(src)
        a, b = int(di) * d.itemsize, int(si) * s.itemsize
        if a % size or b % size:
            raise ValueError(f"a {size}-byte async copy from byte {b} to byte {a} is not {size}-byte aligned")
        if a + size > d.nbytes or b + size > s.nbytes or a < 0 or b < 0:
            raise IndexError(f"a {size}-byte async copy from byte {b} of {s.nbytes} to byte {a} of {d.nbytes}")
        _async_groups()
        _async.open.append((d, a, s, b, size))

    return copy


cp_async16, cp_async4 = _cp_async(16), _cp_async(4)


def cp_async_commit():
    """Closes the thread's group of copies issued since its last commit."""
    _async_groups().append(_async.open)
    _async.open = []


def cp_async_wait(n):
    """Completes the thread's oldest groups until at most `n` are in flight."""
    groups = _async_groups()
    while len(groups) > int(n):
        for d, a, s, b, size in groups.pop(0):
            d.reshape(-1).view(np.uint8)[a : a + size] = s.reshape(-1).view(np.uint8)[b : b + size]


def pdl_wait():
    pass


def pdl_launch():
    pass


_ATOMIC = threading.Lock()


def atomic_add_acq_rel(a, i, v):
    with _ATOMIC:
        old = a[i]
        a[i] = old + v
    return old


def globaltimer():
    return np.uint64(time.perf_counter_ns())


def clock64():
    return np.uint64(time.perf_counter_ns())


def _s8(w) -> np.ndarray:
    return np.array([w], dtype=np.int64).astype(np.uint32).view(np.int8)


def s8x4_f32(w):
    b = _s8(w).astype(np.float32)
    return (b[0], b[1], b[2], b[3])


def u8x4_f32(w):
    b = _s8(w).view(np.uint8).astype(np.float32)
    return (b[0], b[1], b[2], b[3])


def dp4a(a, b, c):
    s = int(np.dot(_s8(a).astype(np.int64), _s8(b).astype(np.int64))) + int(c)
    return np.int64(s).astype(np.int32)


def f16x2_f32(w):
    h = np.array([w], dtype=np.int64).astype(np.uint32).view(np.float16).astype(np.float32)
    return (h[0], h[1])


def bf16x2_f32(w):
    u = int(np.array([w], dtype=np.int64).astype(np.uint32)[0])
    lo = np.array([(u & 0xFFFF) << 16, u & 0xFFFF0000], dtype=np.uint32).view(np.float32)
    return (lo[0], lo[1])


def bf16_f32(u):
    return np.array([(int(u) & 0xFFFF) << 16], dtype=np.uint32).view(np.float32)[0]
