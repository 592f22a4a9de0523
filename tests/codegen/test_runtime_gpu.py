"""The runtime on a GPU (`FWDSHIM_GPU=1 pytest -m gpu` on the device): the Llama example's decode layer
at its real sizes (SmolLM-135M shapes, l = 4096) captured as one CUDA graph.

- the graph holds exactly the plan's kernels (count, grids and blocks) and its replay gives the same
  bits as launching the stages one by one, for a full-ish cache and for the first token;
- every kernel of the Llama and Mixtral plans, under each numerics, compiles for the device (sm_90 on
  the H200);
- fused == unfused bit for bit (the contract's `fused: EXACT`, which counts here): the small cases of
  the simulator suite and whole layers;
- the graph's results agree with the NumPy reference executor.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from support import seeds
from support.kernels_common import UNDER_SANITIZER
from support.llama_ir import SMOL, llama_inputs, llama_src, llama_weights, parse, pipeline
from support.runtime_checks import FUSED_CASES, TOL, fused_vs_unfused, layer_fused_vs_unfused, tol_close

from fwdshim import reference
from fwdshim.codegen.device import simulating
from fwdshim.codegen.plan import plan_for
from fwdshim.codegen.runtime import CompiledForward

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(simulating(), reason="the gpu suite runs on a device (FWDSHIM_GPU=1), not the simulator"),
]

SMOL_MOE = dict(SMOL, experts=(8, 2))


def to_host(arrays) -> list[np.ndarray]:
    return [np.asarray(a.copy_to_host()) for a in arrays]


def _bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("numerics", ["int8-act", "dequant", "two-pass-int8"])
def test_graph_replay_equals_stagewise(numerics):
    rng = seeds.rng()
    m = pipeline(parse(llama_src(**SMOL)), numerics)
    weights = llama_weights(rng, **SMOL)
    t0 = time.perf_counter()
    fw = CompiledForward(m, weights)
    print(f"\n{numerics}: compile+capture {time.perf_counter() - t0:.1f} s, {fw.plan.kernel_count} kernels")
    assert fw.graph is not None and fw.graph_kernel_nodes == fw.plan.kernel_count
    for rows in (1000, 0, SMOL["l"] - 1):
        inputs = llama_inputs(rng, **SMOL, rows=rows)
        graph = to_host(fw.step(inputs))
        stagewise = to_host(fw.run_stagewise(inputs))
        assert all(_bits(g, s) for g, s in zip(graph, stagewise)), f"graph != stagewise at {rows} cache rows"
        tol_close(graph, reference.execute(m, inputs, weights), TOL[numerics])
    # per-step replay time (the graph, not the copies), by cache length
    for rows in (0, 1024, SMOL["l"] - 1):
        fw.set_cache_len(rows)
        fw.sync()
        t0 = time.perf_counter()
        for _ in range(50):
            fw.graph.launch(fw.stream)
        fw.sync()
        print(f"{numerics}: replay {1e6 * (time.perf_counter() - t0) / 50:.1f} us per step at {rows} cache rows")


def test_stage_times():
    """Each launch's time at a full cache (a graph of 20 launches of it, replayed): printed, and every
    launch of the plan timed, each finite and under 10 ms."""
    rng = seeds.rng()
    m = pipeline(parse(llama_src(**SMOL)), "int8-act")
    fw = CompiledForward(m, llama_weights(rng, **SMOL))
    fw.run_stagewise(llama_inputs(rng, **SMOL, rows=SMOL["l"] - 1))
    fw.sync()
    times = []
    for launch, args in zip(fw.plan.launches, fw._args, strict=True):
        k = launch.kernel
        gb = fw.device.create_graph_builder()
        gb.begin_building()
        for _ in range(20):
            k.fn[k.grid, k.block, gb](*args)
        gb.end_building()
        g = gb.complete()
        g.launch(fw.stream)
        fw.sync()
        t0 = time.perf_counter()
        for _ in range(10):
            g.launch(fw.stream)
        fw.sync()
        times.append(1e6 * (time.perf_counter() - t0) / 200)
        print(f"stage {launch.stage:>2} {k.name:<44} {times[-1]:8.1f} us")
    assert len(times) == len(fw.plan.launches) > 0
    assert all(0.0 < t < 10_000.0 for t in times), times


def test_graph_serves_consecutive_steps_with_cache_appends():
    rng = seeds.rng()
    m = pipeline(parse(llama_src(**SMOL)), "int8-act")
    weights = llama_weights(rng, **SMOL)
    fw = CompiledForward(m, weights)
    inputs = llama_inputs(rng, **SMOL, rows=0)
    ks, vs = [], []
    for pos in range(4):
        step = {"x": rng.standard_normal(SMOL["d"]).astype(np.float32), "angles": inputs["angles"]}
        got = to_host(fw.step(step, cache_len=pos))
        width = SMOL["kv"] * SMOL["hd"]
        caches = {"k_cache": np.array(ks, np.float32).reshape(pos, width), "v_cache": np.array(vs, np.float32).reshape(pos, width)}
        want = reference.execute(m, {**step, **caches}, weights)
        tol_close(got, want, TOL["int8-act"])
        fw.append_caches(pos)
        ks.append(got[1])
        vs.append(got[2])


@pytest.mark.parametrize("numerics", ["int8-act", "dequant", "two-pass-int8"])
@pytest.mark.parametrize("sizes", [SMOL, SMOL_MOE], ids=["llama", "mixtral"])
def test_every_kernel_compiles_for_the_device(sizes, numerics):
    from numba import cuda

    cc = cuda.get_current_device().compute_capability
    plan = plan_for(pipeline(parse(llama_src(**sizes)), numerics))
    for k in plan.kernels():
        k.compile()
        for sig, ptx in k.fn.inspect_asm().items():
            assert f".target sm_{cc[0]}{cc[1]}" in ptx, (k.name, sig)


def test_mixtral_graph_matches_reference():
    rng = seeds.rng()
    m = pipeline(parse(llama_src(**SMOL_MOE)), "int8-act")
    weights = llama_weights(rng, **SMOL_MOE)
    fw = CompiledForward(m, weights)
    assert fw.graph_kernel_nodes == fw.plan.kernel_count == len(fw.plan.merged or fw.plan.stage_launches) + 1  # MoE: 3 kernels; kv_append
    inputs = llama_inputs(rng, **SMOL_MOE, rows=300)
    graph = to_host(fw.step(inputs))
    assert all(_bits(g, s) for g, s in zip(graph, to_host(fw.run_stagewise(inputs))))
    tol_close(graph, reference.execute(m, inputs, weights), TOL["int8-act"])


@pytest.mark.parametrize("case", sorted(FUSED_CASES))
def test_fused_equals_unfused_gpu(case):
    got, want, classes = fused_vs_unfused(case)
    assert classes == FUSED_CASES[case][1]
    assert all(_bits(g, w) for g, w in zip(got, want))


@pytest.mark.parametrize("numerics", ["int8-act", "dequant"])
def test_layer_fused_equals_unfused_gpu(numerics):
    got, want, _ = layer_fused_vs_unfused(SMOL, numerics, rows=777)
    assert all(_bits(g, w) for g, w in zip(got, want))


def test_second_compile_hits_numba_disk_cache(tmp_path):
    """The generated source lives in the kernel cache directory, so a second process compiling the
    same model loads Numba's cached code instead of compiling."""
    import os
    import subprocess
    import sys

    script = (
        "import time, sys; sys.path.insert(0, 'tests'); t0 = time.perf_counter()\n"
        "from support.llama_ir import SMOL, llama_src, parse, pipeline\n"
        "from fwdshim.codegen.plan import plan_for\n"
        "plan = plan_for(pipeline(parse(llama_src(**SMOL)), 'int8-act')); t1 = time.perf_counter()\n"
        "[k.compile() for k in plan.kernels()]\n"
        "print(time.perf_counter() - t1)\n"
    )
    env = {**os.environ, "FWDSHIM_CACHE": str(tmp_path), "FWDSHIM_GPU": "1"}
    times = [float(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True).stdout.split()[-1]) for _ in range(2)]
    print(f"\ncompile of the int8-act Llama plan: first {times[0]:.2f} s, second (disk cache) {times[1]:.2f} s")
    assert UNDER_SANITIZER or times[1] < times[0] / 2  # the sanitizer's own load time swamps the hit
