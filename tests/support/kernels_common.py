"""Shared helpers of the kernel tests (`tests/test_kernels_*.py`).

The kernel suites run under Numba's CUDA simulator (tests/conftest.py sets `NUMBA_ENABLE_CUDASIM=1`
unless `FWDSHIM_GPU=1`); the `gpu`-marked suite runs the same kernels on a device at real sizes.
Inputs are random values from a seed fixed per test (tests/support/seeds.py; fresh under
`FWDSHIM_FRESH_SEEDS=$RANDOM`); `rng()` prints its seed so a failure can be replayed (`FWDSHIM_SEED=...`).
"""

from __future__ import annotations

import os
import sys

import gguf
import numpy as np
import pytest

from fwdshim.weights import repack_q8_0
from support import seeds

UNDER_SANITIZER = os.environ.get("FWDSHIM_SANITIZER") == "1" or any(k.startswith("NV_SANITIZER_") for k in os.environ)
"""Whether the GPU suite runs under compute-sanitizer (it gives its target `NV_SANITIZER_INJECTION_*`
variables, seen on the H200 with CUDA 12's compute-sanitizer; `FWDSHIM_SANITIZER=1` says so by hand):
the tools slow every launch 10-100x, so the suite's few wall-clock bounds (a cache hit halving a
compile, a launch under 10 ms) are not asserted then."""


def rng() -> np.random.Generator:
    """The running test's generator (tests/support/seeds.py)."""
    return seeds.rng()


def q8_0(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """gguf's own Q8_0 quantization of `a [..., K]`: (raw blocks, repacked qs, repacked d)."""
    flat = a.reshape(-1, a.shape[-1]).astype(np.float32)
    raw = gguf.quants.quantize(flat, gguf.GGMLQuantizationType.Q8_0).reshape(*a.shape[:-1], -1)
    qs, d = repack_q8_0(raw)
    return raw, qs, d


def close(got: np.ndarray, want: np.ndarray, bound: np.ndarray | float, what: str = "") -> None:
    """|got - want| <= bound elementwise (bound: an error budget per element or a scalar)."""
    got, want = np.asarray(got, np.float64).ravel(), np.asarray(want, np.float64).ravel()
    err = np.abs(got - want)
    bad = np.flatnonzero(err > np.broadcast_to(np.asarray(bound, np.float64).ravel(), err.shape))
    assert bad.size == 0, f"{what}: {bad.size} of {err.size} values off, first at {bad[0]}: {got[bad[0]]} vs {want[bad[0]]}"


def bits_equal(a: np.ndarray, b: np.ndarray, what: str = "") -> None:
    a, b = np.ascontiguousarray(a).ravel(), np.ascontiguousarray(b).ravel()
    assert a.dtype == b.dtype and a.shape == b.shape, what
    diff = np.flatnonzero(np.any(a.view(np.uint8).reshape(a.size, -1) != b.view(np.uint8).reshape(b.size, -1), axis=1))
    assert diff.size == 0, f"{what}: {diff.size} of {a.size} values differ in bits, first at {diff[0]}: {a[diff[0]]} vs {b[diff[0]]}"


@pytest.fixture(autouse=True, scope="module")
def fast_simulator():
    """The simulator's block manager polls its threads; a short GIL switch interval lets the polled
    threads run (a 2-4x faster suite)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    yield
    sys.setswitchinterval(old)
