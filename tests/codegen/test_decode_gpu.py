"""The decode step's attention and cache append on a GPU (`FWDSHIM_GPU=1 pytest -m gpu -s`):

- the attention kernel at its default launch (128 threads, 30 splits a head at l = 4096) against the reference
  executor at SmolLM2's and a Llama-3-8B layer's head shapes, empty, partial and full caches, with
  the quantize epilogue bit for bit against the storing variant;
- `kv_append` inside the captured graph: a SmolLM-sized layer (dequant) decoded step after step writing only
  x, angles and the cache length (no host-side append) matches the reference executor;
- informational prints: the attention kernel's time by cache length, each launch over its own
  caches (past the L2, as in a 30-layer step).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from support.checks_attention import check_attention
from support.kernels_common import UNDER_SANITIZER, rng
from support.llama_ir import SMOL, llama_inputs, llama_src, llama_weights, parse, pipeline
from support.runtime_checks import TOL, tol_close

from fwdshim import reference
from fwdshim.codegen import attention
from fwdshim.codegen.device import simulating

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(simulating(), reason="the gpu suite runs on a device (FWDSHIM_GPU=1), not the simulator"),
]


@pytest.mark.parametrize("c", [0, 1, 1000, 4095])
@pytest.mark.parametrize("shape", [(9, 3, 64), (32, 8, 128)], ids=["smollm2", "llama8b"])
def test_attention_default_launch(shape, c):
    h, kv, hd = shape
    check_attention(h=h, kv=kv, hd=hd, l=4096, c=c, block=None)


@pytest.mark.parametrize("fmt", ["one_word", "two_words"])
def test_attention_default_launch_quant(fmt):
    check_attention(h=9, kv=3, hd=64, l=4096, c=3001, quant=fmt, block=None)


def test_graph_appends_the_caches_itself():
    from fwdshim.codegen.runtime import CompiledForward

    g = rng()
    m = pipeline(parse(llama_src(**SMOL)), "dequant")
    weights = llama_weights(g, **SMOL)
    fw = CompiledForward(m, weights)
    assert fw.graph_kernel_nodes == fw.plan.kernel_count == len(fw.plan.merged or fw.plan.stages) + 1
    width = SMOL["kv"] * SMOL["hd"]
    ks, vs = [], []
    for pos in range(5):
        step = {n: a for n, a in llama_inputs(g, **SMOL, rows=0).items() if n in ("x", "angles")}
        got = [np.asarray(a.copy_to_host()) for a in fw.step(step, cache_len=pos)]
        caches = {"k_cache": np.array(ks, np.float32).reshape(pos, width), "v_cache": np.array(vs, np.float32).reshape(pos, width)}
        tol_close(got, reference.execute(m, {**step, **caches}, weights), TOL["dequant"])
        ks.append(got[1])
        vs.append(got[2])
    cache = fw.array("k_cache").copy_to_host().reshape(-1, width)
    np.testing.assert_array_equal(cache[:5], np.array(ks))


def test_attention_times():
    """The default attention launch by cache length, 16 launches over 16 cache copies: the times
    printed, the replayed result checked against the reference executor."""
    from cuda.core import Device
    from numba import cuda

    dev = Device(cuda.get_current_device().id)
    dev.set_current()
    stream = dev.create_stream()
    h, kv, hd, l = 9, 3, 64, 4096  # noqa: E741
    k = attention.attention(h, kv, hd, l)
    g = np.random.default_rng(0)
    host = [g.standard_normal(n).astype(np.float32) for n in (h * hd, kv * hd, kv * hd)]
    small = [cuda.to_device(a) for a in host]
    cache = g.standard_normal((l - 1) * kv * hd).astype(np.float32)
    pos = cuda.to_device(np.zeros(1, np.int32))
    y = cuda.device_array(h * hd, np.float32)
    # the flash-decoding scratch (each split's partial output, max and sum; the per-head count, zero
    # between launches) after y, as the kernel's parameters list them
    scratch = [p for p in k.params if p.name in ("part_o", "part_ml", "count")]

    def one_set():
        extra = [cuda.to_device(np.zeros(p.size, p.dtype)) for p in scratch]
        return (*small, cuda.to_device(cache), cuda.to_device(cache), pos, y, *extra)

    sets = [one_set() for _ in range(16)]
    k.fn[k.grid, k.block, stream](*sets[0])  # compiled and loaded before the capture
    stream.sync()
    for c in (0, 1000, 4095):
        pos.copy_to_device(np.array([c], np.int32))
        gb = dev.create_graph_builder()
        gb.begin_building()
        for a in sets:
            k.fn[k.grid, k.block, gb](*a)
        gb.end_building()
        graph = gb.complete()
        graph.launch(stream)
        stream.sync()
        t0 = time.perf_counter()
        for _ in range(10):
            graph.launch(stream)
        stream.sync()
        us = 1e6 * (time.perf_counter() - t0) / 160
        gbs = 2 * c * kv * hd * 4 / (us * 1e3) if c else 0.0
        print(f"\n{k.name} block {k.block[0]}: {us:.1f} us at {c} cache rows ({gbs:.0f} GB/s of K and V)")
        assert 0.0 < us and (UNDER_SANITIZER or us < 10_000.0), f"{us} us a launch at {c} cache rows"
        rows = cache.reshape(l - 1, kv * hd)[:c]
        want = reference.attention(*host, rows, rows, h, kv, hd)
        np.testing.assert_allclose(y.copy_to_host(), want, rtol=1e-4, atol=1e-5, err_msg=f"{c} cache rows, replayed")
