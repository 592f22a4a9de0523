"""The GEMVs (codegen.gemv) against the reference executor: Q8_0 dequantizing in-kernel (weights
quantized by gguf), the int8-activation GEMV (`numerics.gemv_int8`, activations by
`numerics.quantize_act`), dense f32/f16/bf16. Rows of K whose 32-value blocks are not a multiple of
the warp's 32 lanes (a partial last step), unrolled steps with a leftover, all-zero blocks."""

from __future__ import annotations

import numpy as np
import pytest
from support.checks_gemv import F32, check_dense, check_q8_0, check_q8_0_int8
from support.kernels_common import close, fast_simulator, q8_0, rng  # noqa: F401

from fwdshim.codegen import gemv


@pytest.mark.parametrize(
    "n,k,shape",
    [  # whole-block lanes (vec 32)
        (5, 32 * (32 * 2 + 5), gemv.Shape(32, 2, 2, 2, 1)),  # 2 unrolled steps + 5 lanes
        (3, 32 * (32 * 3 + 7), gemv.Shape(32, 1, 2, 2, 1)),  # a leftover step + 7 lanes
        (4, 64, gemv.Shape(32, 4, 1, 1, 1)),  # fewer blocks than lanes
        (5, 32 * (64 * 4 + 9), gemv.Shape(32, 2, 2, 2, 2)),  # 2 warps a row
        (9, 32 * (64 * 2 + 3), gemv.Shape(32, 4, 8, 1, 2)),  # the K >= 8192 f32 default's family
    ],
)
def test_whole_block_q8_0_gemv(n, k, shape):
    check_q8_0(n, k, shape=shape)


def test_q8_0_gemv_rows_of_x():
    check_q8_0(3, 96, m=2, shape=gemv.Shape(16, 2, 1, 1, 1))


@pytest.mark.parametrize("fmt", ["one_word", "two_words"])
def test_int8_activation_gemv(fmt):
    check_q8_0_int8(5, 32 * (32 * 2 + 5), fmt=fmt, shape=gemv.Shape(16, 2, 2, 2, 1))


def test_whole_block_int8_activation_gemv_split_rows():
    check_q8_0_int8(3, 32 * (128 + 40), shape=gemv.Shape(32, 1, 4, 1, 4))


@pytest.mark.parametrize("act", ["f32", "int8"])
@pytest.mark.parametrize(
    "n,k,m,shape",
    [
        (5, 32 * 66, 1, gemv.Shape(16, 2, 2, 2, 1)),  # 16-byte pieces: 2 unrolled steps + 4 lanes
        (3, 32 * 21, 1, gemv.Shape(4, 2, 2, 2, 2)),  # 4-byte pieces, 2 warps a row: a leftover step + 40 lanes
        (4, 64, 2, gemv.Shape(16, 4, 1, 1, 1)),  # fewer pieces than lanes, 2 rows of x
        (5, 32 * 37, 1, gemv.Shape(16, 1, 4, 3, 4)),  # 4 warps a row, unroll 3 with a leftover
        (7, 32 * 9, 1, gemv.Shape(4, 3, 2, 1, 1)),  # rows past N in the last group
        (5, 32 * 66, 1, gemv.Shape(16, 2, 2, 2, 1, prefetch=True)),  # rows prefetched into L2
        (7, 32 * 9, 1, gemv.Shape(16, 1, 2, 1, 1, blocks=2, prefetch=True)),  # 2 blocks looping over 4
        (5, 32 * 37, 2, gemv.Shape(16, 1, 4, 3, 4, blocks=2, prefetch=True)),  # looping, 4 warps a row
    ],
)
def test_coalesced_gemv(n, k, m, shape, act):
    if act == "f32":
        check_q8_0(n, k, m, shape=shape)
    else:
        check_q8_0_int8(n, k, m, shape=shape)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_dense_gemv(dtype):
    check_dense(5, 70, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("n,k,shape", [(5, 96, gemv.Shape(16, 2, 8, 1, 1)), (9, 576, gemv.Shape(16, 2, 4, 2, 1)),
                                       (6, 1024, gemv.Shape(16, 4, 4, 1, 2))])  # fmt: skip
def test_dense_rows_through_the_coalesced_family(dtype, n, k, shape):
    """issue 40: F32, F16 and BF16 rows of whole blocks of 32 through the one GEMV family
    (`gemv_decode.DenseDecoder`: 16-byte pieces of 4 or 8 values, full steps, a tail of lanes, split
    rows) against the executor; the stage lowering takes it for them (`gemv.dense` stays for rows of
    other lengths)."""
    check_dense(n, k, dtype, shape=shape)


def test_gemv_launch_shape_and_params():
    k = gemv.q8_0(4096, 14336, shape=gemv.Shape(16, 2, 4, 2, 1))
    assert k.param_names == ("qs", "dw", "x", "y") and k.grid == (512, 1) and k.block == (128,)
    assert gemv.q8_0(4096, 4096, shape=gemv.Shape(16, 4, 8, 1, 4)).grid == (512, 1)
    assert gemv.q8_0(4096, 4096).name.endswith("_" + gemv.launch_shape(4096, 4096, "f32").tag)
    assert gemv.q8_0(4096, 14336).name.endswith("_v16r4w8u1s2a2")  # a 2-stage async-copy pipeline
    assert gemv.q8_0(4096, 4096).block == (256,) and gemv.q8_0(14336, 4096).block == (128,)
    assert gemv.q8_0(128256, 4096).name.endswith("_v16r8w4u1s1a2")
    assert [p.size for p in k.params] == [4096 * 14336, 4096 * 448, 14336, 4096]
    assert "ld_i32x4(qs" in k.source and "s8x4_f32" in k.source
    assert "ld_i32(qs" in gemv.q8_0(64, 4096, shape=gemv.Shape(4, 4, 4, 2, 1)).source
    k = gemv.q8_0_int8(4096, 4096)
    assert k.param_names == ("qs", "dw", "xq", "xd", "y") and "dp4a(" in k.source
    with pytest.raises(ValueError, match="not whole blocks of 32"):
        gemv.q8_0(8, 100)
    with pytest.raises(ValueError, match="4, 16, or 32"):
        gemv.q8_0(8, 64, shape=gemv.Shape(8, 1, 1, 1, 1))
    with pytest.raises(ValueError, match="neither a looping grid"):
        gemv.q8_0(8, 64, shape=gemv.Shape(32, 1, 1, 1, 1, prefetch=True))
    assert gemv.q8_0_int8(4096, 14336).name.endswith("_r2w8u2s4")  # whole-block lanes


_LOADS_IR = """
import importlib.util, re, sys
if importlib.util.find_spec("_numba_cuda_redirector"):
    import _numba_cuda_redirector  # noqa: F401  (numba.cuda -> numba_cuda, as its .pth does)
try:
    from numba.cuda.compiler import compile_cuda
    from numba.cuda import types
    from numba.core import sigutils
    from numba.cuda import cgutils  # noqa: F401
except ImportError as e:
    print("SKIP", e); sys.exit(0)
from fwdshim.codegen import gemv
for act in ("f32", "int8"):
    k = gemv.gemv_q8(1536, 576, 1, act, gemv.Shape(16, 2, 4, 2, 4, blocks=7, prefetch=True))
    args, _ = sigutils.normalize_signature("(" + ", ".join(p.numba_type for p in k.params) + ",)")
    ir = compile_cuda(k.fn.py_func, types.void, args, cc=(9, 0)).library.get_llvm_str()
    loads = re.findall(r"asm (sideeffect )?[^\\n]*ld\\.global", ir)
    print(act, len(loads), sum(1 for s in loads if s))
"""


def _device_compile(script: str, tmp_path):
    """Run `script` in a fresh Python with Numba's CUDA compiler (no simulator; kernels cached under
    `tmp_path`); skips when this numba-cuda lacks the compiler entry points, fails on an error."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["FWDSHIM_CACHE"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    if out.stdout.startswith("SKIP"):
        pytest.skip(out.stdout.strip())
    assert out.returncode == 0, out.stderr[-3000:]
    return out


def test_wide_loads_are_never_speculated(tmp_path):
    """The GEMV's guarded loads (`if kl < tail:`) stay behind their guard in the LLVM IR Numba's CUDA
    compiler makes (not the simulator): every `ld.global` inline asm is `asm sideeffect`. As plain
    inline asm LLVM hoisted them out of the guard: `compute-sanitizer` on the H200 (2026-11-30) saw
    16-byte reads past the activation of the 1536x576 looping-grid GEMV, then an illegal address."""
    out = _device_compile(_LOADS_IR, tmp_path)
    rows = [line.split() for line in out.stdout.strip().splitlines()]
    assert [r[0] for r in rows] == ["f32", "int8"], out.stdout
    for act, n, side in rows:
        assert int(n) > 0 and int(side) == int(n), f"{act}: {side} of {n} loads are asm sideeffect"


@pytest.mark.parametrize("act", ["f32", "int8"])
@pytest.mark.parametrize(
    "n,k,m,shape",
    [
        (5, 32 * 66, 1, gemv.Shape(16, 2, 2, 1, 1, stages=3)),  # 4 full steps over 3 slots + 4 lanes
        (3, 32 * 70, 1, gemv.Shape(16, 2, 2, 1, 2, stages=2)),  # 2 warps a row: 2 steps + 12 lanes
        (7, 32 * 360, 2, gemv.Shape(16, 1, 4, 1, 4, stages=4)),  # 5 steps: the last round guarded
        (6, 32 * 64, 1, gemv.Shape(16, 3, 2, 1, 1, stages=4)),  # rows past N in the last group
        (4, 576, 1, gemv.Shape(16, 2, 2, 1, 1, stages=3)),  # one step, fewer than stages - 1 (SmolLM2's K)
        (3, 32 * 64, 1, gemv.Shape(16, 1, 2, 1, 1, stages=6)),  # 4 steps, fewer than stages - 1
    ],
)
def test_async_copy_pipeline_is_bit_for_bit_the_plain_gemv(n, k, m, shape, act):
    """The pipelined GEMV (`Shape.stages`) adds the same products in the same order as the same shape
    without it: bit for bit, and against float64 within the format's bound."""
    import dataclasses

    g = rng()
    qs = g.integers(-127, 128, size=n * k, dtype=np.int8)
    dw = (g.random(n * k // 32) * 0.02 + 0.001).astype(F32)
    if act == "f32":
        args = dict(qs=qs, dw=dw, x=g.standard_normal(m * k).astype(F32))
    else:
        args = dict(qs=qs, dw=dw, xq=g.integers(-127, 128, size=m * k, dtype=np.int8), xd=g.random(m * k // 32).astype(F32))
    plain = dataclasses.replace(shape, stages=0)
    y = gemv.gemv_q8(n, k, m, act, shape).run(**args)["y"]
    y0 = gemv.gemv_q8(n, k, m, act, plain).run(**args)["y"]
    assert "cp_async16(sq" in gemv.gemv_q8(n, k, m, act, shape).source
    np.testing.assert_array_equal(y.view(np.uint32), y0.view(np.uint32))
    w = qs.reshape(n, k // 32, 32).astype(np.float64) * dw.reshape(n, k // 32, 1)
    if act == "f32":
        ref = args["x"].reshape(m, k).astype(np.float64) @ w.reshape(n, k).T
    else:
        xf = args["xq"].reshape(m, k // 32, 32).astype(np.float64) * args["xd"].reshape(m, k // 32, 1)
        ref = xf.reshape(m, k) @ w.reshape(n, k).T
    np.testing.assert_allclose(y.reshape(m, n), ref, rtol=1e-4, atol=1e-3 * np.abs(ref).max())


def test_async_copy_pipeline_bounds():
    with pytest.raises(ValueError, match="unroll 1"):
        gemv.q8_0(8, 4096, shape=gemv.Shape(16, 1, 1, 2, 1, stages=2))
    with pytest.raises(ValueError, match="at least one full step"):
        gemv.q8_0(8, 256, shape=gemv.Shape(16, 1, 1, 1, 1, stages=2))
    with pytest.raises(ValueError, match="bytes of shared memory"):
        gemv.q8_0(64, 4096, shape=gemv.Shape(16, 4, 8, 1, 1, stages=3))
    assert gemv.pipeline_bytes(gemv.Shape(16, 8, 4, 1, 1, stages=2)) == 2 * 8 * 128 * 20


def test_async_copy_simulation_checks_alignment_and_bounds():
    from fwdshim.codegen import simulator as S

    dst = np.zeros(8, np.int32)
    src = np.arange(16, dtype=np.int32)
    S.cp_async16(dst, 4, src, 8)
    S.cp_async_commit()
    S.cp_async4(dst, 1, src, 15)
    S.cp_async_commit()
    assert not dst.any()  # in flight until a wait completes its group
    S.cp_async_wait(1)
    assert dst.tolist() == [0, 0, 0, 0, 8, 9, 10, 11]
    S.cp_async_wait(0)
    assert dst[1] == 15
    with pytest.raises(ValueError, match="not 16-byte aligned"):
        S.cp_async16(dst, 1, src, 0)
    with pytest.raises(IndexError, match="16-byte async copy"):
        S.cp_async16(dst, 4, src, 16)


def test_launch_shape_tags_round_trip_through_the_bench():
    """`bench/gemv.py --try` reads back every tag `gemv.Shape.tag` writes (and refuses others)."""
    import dataclasses
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "gemv.py"
    spec = importlib.util.spec_from_file_location("bench_gemv", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    shapes = [gemv.launch_shape(n, k, act) for n, k in bench.BIG + bench.SMALL for act in ("f32", "int8")]
    shapes += [gemv.Shape(*s) for n, k in bench.BIG for s in bench.sweep_shapes(n, k, "f32")]
    shapes += [gemv.Shape(16, 8, 4, 1, 1, stages=2), gemv.Shape(16, 2, 8, 2, 8, blocks=264, prefetch=True)]
    for s in shapes:
        assert bench.parse_tag(s.tag) == dataclasses.astuple(s), s.tag
    for bad in ("v16", "v16r2w4u2s1x", "r2w4u2s1", ""):
        with pytest.raises(ValueError, match="not a launch-shape tag"):
            bench.parse_tag(bad)


_PIPELINE_IR = """
import importlib.util, sys
if importlib.util.find_spec("_numba_cuda_redirector"):
    import _numba_cuda_redirector  # noqa: F401
try:
    from numba.cuda.compiler import compile_cuda
    from numba.cuda import types
    from numba.core import sigutils
except ImportError as e:
    print("SKIP", e); sys.exit(0)
from fwdshim.codegen import gemv
from fwdshim.codegen.tuning import Tuning
for act in ("f32", "int8"):
    k = gemv.gemv_q8(64, 2048, 1, act, gemv.Shape(16, 2, 4, 1, 1, stages=3), tuning=Tuning(pdl="early"))
    args, _ = sigutils.normalize_signature("(" + ", ".join(p.numba_type for p in k.params) + ",)")
    ir = compile_cuda(k.fn.py_func, types.void, args, cc=(9, 0)).library.get_llvm_str()
    print(act, *(ir.count(s) for s in ("cp.async.cg.shared.global", "cp.async.ca.shared.global", "cp.async.wait_group 2",
                                         "cp.async.commit_group", "griddepcontrol.launch_dependents", "griddepcontrol.wait")))
"""


def test_pipeline_and_pdl_intrinsics_lower_for_the_device(tmp_path):
    """Numba's CUDA compiler (not the simulator) lowers the async copies, their waits and the PDL
    calls of a pipelined GEMV into the LLVM IR it hands NVVM: 16-byte `.cg` copies of the quants,
    4-byte `.ca` copies of the scales (two rows a step), `wait_group stages-1`, and the two
    `griddepcontrol` instructions once each."""
    out = _device_compile(_PIPELINE_IR, tmp_path)
    rows = {r.split()[0]: [int(v) for v in r.split()[1:]] for r in out.stdout.strip().splitlines()}
    assert set(rows) == {"f32", "int8"}, out.stdout
    for act, (cg, ca, wait, commit, launch, gwait) in rows.items():
        assert cg >= 2 and ca >= 2 and cg == ca, (act, rows[act])  # one quant and one scale copy a row
        assert wait >= 1 and commit >= 2 and launch == 1 and gwait == 1, (act, rows[act])
