"""The step's own cache append (`kv_append`, the plan's maintenance launch) and the packed step
buffers, under Numba's CUDA simulator: the step writes its `k`, `v` rows into row `cache_len` of the
caches (a full cache is left as it is), `append_caches` of that row is a no-op and of another row
still copies, a decode loop that never appends from the host matches the reference executor step
after step, and `x`, `angles`, `%cache_len` travel in one upload when a step writes them all."""

from __future__ import annotations

import numpy as np
import pytest
from support import seeds
from support.llama_ir import TINY, llama_inputs, llama_src, llama_weights, parse, pipeline
from support.runtime_checks import TOL, to_host, tol_close

from fwdshim import reference
from fwdshim.codegen.device import simulating
from fwdshim.codegen.launch import CACHE_LEN, _packed_parts
from fwdshim.codegen.runtime import CompiledForward

pytestmark = pytest.mark.skipif(not simulating(), reason="the simulator suite (FWDSHIM_GPU=1 runs the gpu suite)")

WIDTH = TINY["kv"] * TINY["hd"]


def _setup(numerics: str = "dequant"):
    rng = seeds.rng()
    m = pipeline(parse(llama_src(**TINY)), numerics)
    weights = llama_weights(rng, **TINY)
    return rng, m, weights, CompiledForward(m, weights)


def _cache(fw: CompiledForward, name: str) -> np.ndarray:
    return fw.array(name).copy_to_host().reshape(TINY["l"] - 1, WIDTH)


def test_step_appends_its_rows_at_the_cache_length():
    rng, m, weights, fw = _setup()
    assert fw.appends_caches  # the runner appends nothing from the host
    rows = 1
    inputs = llama_inputs(rng, **TINY, rows=rows)
    out, k_r, v = to_host(fw.step(inputs))
    k_cache, v_cache = _cache(fw, "k_cache"), _cache(fw, "v_cache")
    np.testing.assert_array_equal(k_cache[:rows], inputs["k_cache"])
    np.testing.assert_array_equal(k_cache[rows], k_r)
    np.testing.assert_array_equal(v_cache[rows], v)
    assert not k_cache[rows + 1 :].any() and not v_cache[rows + 1 :].any()
    # the host-side append of the row the graph appended: nothing to do (a marked row stays marked);
    # of another row: a copy
    marked = _cache(fw, "k_cache")
    marked[rows] = -7.0
    fw.array("k_cache").copy_to_device(np.ascontiguousarray(marked.reshape(-1)))
    fw.append_caches(rows)
    np.testing.assert_array_equal(_cache(fw, "k_cache")[rows], np.full(WIDTH, -7.0, np.float32))
    fw.append_caches(rows + 1)
    np.testing.assert_array_equal(_cache(fw, "v_cache")[rows + 1], v)
    with pytest.raises(ValueError, match=r"cache row 3 outside 0..2"):
        fw.append_caches(TINY["l"] - 1)


def test_a_full_cache_is_left_as_it_is():
    rng, m, weights, fw = _setup()
    cap = TINY["l"] - 1
    inputs = llama_inputs(rng, **TINY, rows=cap)
    got = to_host(fw.step(inputs))
    tol_close(got, reference.execute(m, inputs, weights), TOL["dequant"])
    np.testing.assert_array_equal(_cache(fw, "k_cache"), inputs["k_cache"])
    np.testing.assert_array_equal(_cache(fw, "v_cache"), inputs["v_cache"])


@pytest.mark.parametrize("numerics", ["dequant"])
def test_decode_loop_without_host_appends(numerics):
    """Steps 0..l-1 writing only x, angles and the cache length, as the runner does."""
    rng, m, weights, fw = _setup(numerics)
    ks, vs = [], []
    for pos in range(TINY["l"]):
        step = {k: v for k, v in llama_inputs(rng, **TINY, rows=0).items() if k in ("x", "angles")}
        got = to_host(fw.step(step, cache_len=pos))
        caches = {"k_cache": np.array(ks, np.float32).reshape(pos, WIDTH), "v_cache": np.array(vs, np.float32).reshape(pos, WIDTH)}
        tol_close(got, reference.execute(m, {**step, **caches}, weights), TOL[numerics])
        ks.append(got[1])
        vs.append(got[2])


def test_small_inputs_travel_in_one_upload(monkeypatch):
    rng, m, weights, fw = _setup()
    inputs = llama_inputs(rng, **TINY, rows=0)
    assert [n for n, *_ in _packed_parts(fw.plan)] == ["%x", "%angles", CACHE_LEN]
    uploads = []
    cls = type(fw.packed)
    real = cls.copy_to_device

    def counting(self, ary, *a, **k):
        uploads.append(np.asarray(ary).nbytes)
        return real(self, ary, *a, **k)

    monkeypatch.setattr(cls, "copy_to_device", counting)
    fw.set_inputs({"x": inputs["x"], "angles": inputs["angles"]}, cache_len=1)
    assert uploads == [fw.packed.size]  # one copy: x, angles and the cache length
    np.testing.assert_array_equal(fw.array("x").copy_to_host(), inputs["x"])
    np.testing.assert_array_equal(fw.array("angles").copy_to_host(), inputs["angles"].ravel())
    assert fw.array(CACHE_LEN).copy_to_host()[0] == 1
    # a step that writes x alone uploads x alone and keeps the angles
    uploads.clear()
    x2 = rng.standard_normal(TINY["d"]).astype(np.float32)
    fw.set_inputs({"x": x2}, cache_len=0)
    assert sorted(uploads) == [4, 4 * TINY["d"]]
    np.testing.assert_array_equal(fw.array("angles").copy_to_host(), inputs["angles"].ravel())
    np.testing.assert_array_equal(fw.array("x").copy_to_host(), x2)
    # `write` keeps the host mirror: a later upload of the rest carries it
    fw.write("x", x2 * 2)
    fw.set_inputs({"angles": inputs["angles"]}, cache_len=0)
    np.testing.assert_array_equal(fw.array("x").copy_to_host(), x2 * 2)
