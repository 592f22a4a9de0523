"""L2 prefetch of the next launch's weights (codegen.prefetch): the blocks' slices cover each part's
16-byte bytes exactly once; each launch of a plan prefetches the weights of the next one (the last
launch the first's) and nothing past `NEXT_BYTES`; prefetch parameters are no reads (data edges,
profile bytes). That results stay bit for bit is test_merge's (its merged plans carry the hints)."""

from __future__ import annotations

import types

import numpy as np
import pytest
from support import seeds
from support.kernels_common import fast_simulator  # noqa: F401
from support.llama_ir import TINY, llama_src, parse, pipeline

from fwdshim.codegen import prefetch
from fwdshim.codegen.device import simulating
from fwdshim.codegen.kernel import Param
from fwdshim.codegen.plan import build_plan, functions
from fwdshim.codegen.tuning import Tuning
from fwdshim.tools.profile import launch_bytes

sim_only = pytest.mark.skipif(not simulating(), reason="the simulator suite (FWDSHIM_GPU=1 runs the gpu suite)")
ITEM = {"int8": 1, "float32": 4}


def _requests(grid, parts):
    """Run the generated hint statements for every block of `grid`: the (part, byte, nbytes) asked."""
    names = [f"_pf{j}" for j in range(len(parts))]
    text = prefetch.hint_statements(grid, parts, names)
    src = f"def hints(cuda, prefetch_l2, {', '.join(names)}):\n" + "\n".join("    " + ln for ln in text.splitlines())
    scope: dict = {}
    exec(src, scope)  # noqa: S102 - our own generated statements, run as plain Python
    got = []
    zero = types.SimpleNamespace(x=0, y=0, z=0)
    g = list(grid) + [1, 1]
    for z in range(g[2]):
        for y in range(g[1]):
            for x in range(g[0]):
                cuda = types.SimpleNamespace(threadIdx=zero, blockIdx=types.SimpleNamespace(x=x, y=y, z=z))
                arrays = [(j, ITEM[p.dtype]) for j, p in enumerate(parts)]
                scope["hints"](cuda, lambda a, i, n: got.append((a[0], i * a[1], n)), *arrays)
    return got


@pytest.mark.parametrize("seed", seeds.seed_list([1130, 7, 2026, 99]))
def test_slices_cover_each_part_once(seed):
    rng = np.random.default_rng(seed)
    grid = tuple(int(v) for v in rng.integers(1, 40, size=int(rng.integers(1, 4))))
    parts = [
        Param(f"p{j}", str(rng.choice(["int8", "float32"])), int(rng.integers(1, 300_000)), "in")
        for j in range(int(rng.integers(1, 4)))
    ]
    got = _requests(grid, parts)
    for j, p in enumerate(parts):
        total = p.size * ITEM[p.dtype] // 16 * 16
        mine = sorted((b, n) for a, b, n in got if a == j)
        assert all(b % 16 == 0 and n % 16 == 0 and n > 0 for b, n in mine), mine
        at = 0
        for b, n in mine:  # contiguous, no overlap, no gap
            assert b == at, (j, mine)
            at += n
        assert at == total, (j, at, total)
        assert len(mine) <= max(1, np.prod(grid))


def _weights(plan, launch):
    return [(a.buffer, a.part) for a in launch.args if a.role == "in" and plan.buffer(a.buffer).role == "weight"]


@sim_only
@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
def test_each_launch_prefetches_the_next_launchs_weights(numerics):
    m = pipeline(parse(llama_src(**TINY)), numerics)
    plan = build_plan(functions(m)[0], m)
    launches = plan.merged
    assert len(launches) > 2
    for i, launch in enumerate(launches):
        hinted = [(a.buffer, a.part) for a in launch.args if a.role == prefetch.ROLE]
        nxt = _weights(plan, launches[(i + 1) % len(launches)])
        assert hinted == list(dict.fromkeys(nxt)), (i, launch.name)
        if hinted:
            assert launch.kernel.name.split("_pf")[0] == (launch.holds[0].name if len(launch.holds) == 1 else launch.name.split("_pf")[0])
            assert "prefetch_l2(_pf0" in launch.kernel.source
        assert launch_bytes(plan, launch, 3) == launch_bytes(plan, _unhinted(launch), 3)  # no bytes read
    assert sum(1 for launch in launches if any(a.role == prefetch.ROLE for a in launch.args)) >= len(launches) - 1
    assert "; L2 prefetch for launch 0: " in plan.text()


def _unhinted(launch):
    from dataclasses import replace

    return replace(launch, args=tuple(a for a in launch.args if a.role != prefetch.ROLE))


@sim_only
def test_no_prefetch_past_next_bytes():
    m = pipeline(parse(llama_src(**TINY)), "dequant")
    plan = build_plan(functions(m)[0], m, Tuning(prefetch_bytes=0))
    assert not any(a.role == prefetch.ROLE for launch in plan.merged for a in launch.args)
    assert "L2 prefetch" not in plan.text()
    smallest = min(
        sum(_nbytes(plan, a) for a in launch.args if a.role == "in" and plan.buffer(a.buffer).role == "weight")
        for launch in plan.merged
        if _weights(plan, launch)
    )
    past = build_plan(functions(m)[0], m, Tuning(prefetch_bytes=smallest - 1))  # every launch's weights past the bound
    assert not any(a.role == prefetch.ROLE for launch in past.merged for a in launch.args)
    within = build_plan(functions(m)[0], m, Tuning(prefetch_bytes=smallest))  # the smallest set within it
    hinted = [launch for launch in within.merged if any(a.role == prefetch.ROLE for a in launch.args)]
    assert hinted and all(sum(_nbytes(plan, a) for a in x.args if a.role == prefetch.ROLE) <= smallest for x in hinted)


def _nbytes(plan, a) -> int:
    part = plan.buffer(a.buffer).part(a.part)
    return np.dtype(part.dtype).itemsize * part.size


def test_with_hints_keeps_the_kernel_text():
    from fwdshim.codegen import gemv

    k = gemv.q8_0(64, 64)
    hinted = prefetch.with_hints(k, [Param("w", "int8", 4096, "in", "%w.qs")])
    assert hinted.params[: len(k.params)] == k.params and hinted.params[-1].role == prefetch.ROLE
    body = k.source.split("def gemv_k(qs, dw, x, y):\n", 1)[1].rstrip("\n")
    assert body in hinted.source
    assert hinted.name.startswith(k.name + "_pf")
