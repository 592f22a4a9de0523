"""The kernel suite on a GPU at real sizes (`pytest -m gpu` with `FWDSHIM_GPU=1` on a device): every
family compiled for the device (sm_90 on the H200) and checked against the reference executor, the
fused norm variants bit for bit against their unfused stages (the contract's `fused: EXACT`, which
counts here: the simulator rounds every operation on its own anyway), and kernels recorded into a
cuda.core graph replaying to the same bits as direct launches."""

from __future__ import annotations

import numpy as np
import pytest
from support.checks_attention import check_attention, check_rope
from support.checks_gemv import check_dense, check_q8_0, check_q8_0_int8
from support.checks_moe import check_moe, check_router
from support.checks_norms import check_layer_norm_softmax, check_rms_norm, check_rms_norm_exact
from support.checks_quantize_unary import check_elementwise, check_quantize, check_transpose
from support.kernels_common import bits_equal, rng

from fwdshim.codegen import gemv, norms, quantize
from fwdshim.codegen.device import simulating

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(simulating(), reason="the gpu suite runs on a device (FWDSHIM_GPU=1), not the simulator"),
]

F32 = np.float32


@pytest.mark.parametrize("rows,n", [(1, 4096), (1, 576), (32, 128)])
def test_rms_norm(rows, n):
    check_rms_norm(rows, n, None)


@pytest.mark.parametrize("fmt", ["one_word", "two_words"])
@pytest.mark.parametrize("n", [4096, 576, 5120])
def test_fused_norms_bit_exact(n, fmt):
    check_rms_norm_exact(1, n, None, fmt)


def test_layer_norm_softmax():
    check_layer_norm_softmax(4, 4096, None)


@pytest.mark.parametrize("fmt", ["one_word", "two_words"])
@pytest.mark.parametrize("n", [4096, 14336, 1000])
def test_quantize(n, fmt):
    check_quantize(1, n, fmt, block=256)


def test_elementwise_silu_transpose():
    check_elementwise(4096 * 4 + 3, block=256)
    check_transpose(1000, 700)


@pytest.mark.parametrize("n,k", [(4096, 4096), (14336, 4096), (4096, 14336), (1000, 32 * 37)])
def test_q8_0_gemv(n, k):
    check_q8_0(n, k)


@pytest.mark.parametrize("n,k", [(4096, 4096), (14336, 4096), (4096, 14336), (1000, 32 * 37)])
def test_int8_gemv(n, k):
    check_q8_0_int8(n, k)


@pytest.mark.parametrize("split", [2, 4])
@pytest.mark.parametrize("n,k", [(4096, 4096), (1000, 32 * 37 * 5)])
def test_gemvs_split_over_warps(n, k, split):
    check_q8_0(n, k, shape=gemv.Shape(16, 4, 8, 1, split))
    check_q8_0(n, k, shape=gemv.Shape(4, 4, 8, 2, split))
    check_q8_0_int8(n, k, shape=gemv.Shape(16, 2, 4, 2, split))
    check_q8_0(n, k, shape=gemv.Shape(32, 4, 8, 1, split))
    check_q8_0_int8(n, k, shape=gemv.Shape(32, 2, 4, 2, split))


@pytest.mark.parametrize("n,k", [(576, 576), (192, 576), (1536, 576), (576, 1536), (1000, 32 * 37), (14336, 4096)])
@pytest.mark.parametrize(
    "shape",
    [
        gemv.Shape(16, 1, 4, 1, 1),
        gemv.Shape(4, 2, 4, 4, 2),
        gemv.Shape(16, 8, 8, 2, 8),
        gemv.Shape(16, 4, 4, 2, 1, prefetch=True),
        gemv.Shape(16, 2, 4, 2, 4, blocks=7, prefetch=True),
        gemv.Shape(16, 2, 4, 1, 1, stages=3),
    ],
)
def test_gemv_launch_shapes(n, k, shape):
    check_q8_0(n, k, shape=shape)
    check_q8_0_int8(n, k, shape=shape)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_dense_gemv(dtype):
    check_dense(1536, 576, dtype)


@pytest.mark.parametrize("ratio", [1, 3, 4, 8])
def test_attention_gqa(ratio):
    check_attention(h=8 * ratio, kv=8, hd=128, l=4096, c=4095, block=128)


@pytest.mark.parametrize("c", [0, 1, 777])
def test_attention_steps(c):
    check_attention(h=32, kv=8, hd=128, l=4096, c=c, block=128)


@pytest.mark.parametrize("fmt", ["one_word", "two_words"])
def test_attention_quant(fmt):
    check_attention(h=32, kv=8, hd=128, l=12256, c=3000, quant=fmt, block=128)


def test_rope():
    check_rope(32, 128, 64)


@pytest.mark.parametrize("act", ["f32", "int8"])
def test_moe(act):
    check_moe(8, 1024, 2816, 2, act)


def test_router_qwen_sized():
    """Qwen3-30B-A3B's router: its logits' GEMV, then the top-k (the one-block router it replaced
    failed to launch there at 32 warps: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES on an H100)."""
    scales = rng().permutation(np.linspace(0.1, 1.0, 128))
    scales[7] = scales[100] = 2.0  # a tie for the best: expert 7 first
    idx, _ = check_router(128, 2048, 8, "int8", scales)
    assert list(idx[:2]) == [7, 100]


def test_graph_replay_equals_direct_launches():
    """rms_norm(weight, quant) -> int8 GEMV, recorded into a cuda.core graph and replayed."""
    from cuda.core import Device
    from numba import cuda

    g = rng()
    n, k = 4096, 4096
    x = g.standard_normal(k).astype(F32)
    w = g.standard_normal(k).astype(F32)
    qs = g.integers(-127, 128, size=(n, k), dtype=np.int8)
    dw = (g.random((n, k // 32)) * 0.01).astype(F32)
    norm = norms.rms_norm(k, 1, 1e-5, weight=True, quant="one_word")
    mm = gemv.q8_0_int8(n, k)
    dev = {name: cuda.to_device(a) for name, a in (("x", x), ("w", w), ("qs", qs.ravel()), ("dw", dw.ravel()))}
    q = cuda.device_array(k, np.int8)
    d = cuda.device_array(k // 32, F32)
    y = cuda.device_array(n, F32)
    norm.launch(dev["x"], dev["w"], q, d)
    mm.launch(dev["qs"], dev["dw"], q, d, y)
    cuda.synchronize()
    direct = y.copy_to_host()

    device = Device(cuda.get_current_device().id)
    device.set_current()
    stream = device.create_stream()
    y2 = cuda.device_array(n, F32)
    builder = device.create_graph_builder()
    builder.begin_building()
    norm.launch(dev["x"], dev["w"], q, d, stream=builder)
    mm.launch(dev["qs"], dev["dw"], q, d, y2, stream=builder)
    graph = builder.end_building().complete()
    for _ in range(3):
        graph.launch(stream)
    stream.sync()
    bits_equal(y2.copy_to_host(), direct, "graph replay == direct launches")
    assert np.isfinite(direct).all() and np.abs(direct).max() > 0


def test_quantize_kernel_compiles_for_the_device():
    k = quantize.quantize(4096, 1, "two_words")
    k.compile()
    from numba import cuda

    cc = cuda.get_current_device().compute_capability
    assert cc >= (7, 0)


@pytest.mark.parametrize("act", ["f32", "int8"])
@pytest.mark.parametrize(
    "n,k,shape",
    [
        (4096, 4096, gemv.Shape(16, 4, 4, 1, 1, stages=2)),
        (14336, 4096, gemv.Shape(16, 8, 4, 1, 1, stages=2)),
        (4096, 14336, gemv.Shape(16, 4, 4, 1, 2, stages=2)),
        (4096, 14336, gemv.Shape(16, 4, 8, 1, 2, stages=2)),
        (14336, 4096, gemv.Shape(16, 2, 4, 1, 1, stages=3)),
    ],
)
def test_async_copy_pipelines_are_bit_for_bit_the_plain_gemv(n, k, shape, act):
    """The pipelined GEMVs (`gemv.Shape.stages`, the defaults on Llama-3-8B's shapes) on the device:
    the same bits as the same launch shape without the pipeline (the same adds in the same order)."""
    import dataclasses

    g = rng()
    qs = g.integers(-127, 128, size=n * k, dtype=np.int8)
    dw = (g.random(n * k // 32) * 0.01).astype(F32)
    if act == "f32":
        args = dict(qs=qs, dw=dw, x=g.standard_normal(k).astype(F32))
    else:
        args = dict(qs=qs, dw=dw, xq=g.integers(-127, 128, size=k, dtype=np.int8), xd=g.random(k // 32).astype(F32))
    y = gemv.gemv_q8(n, k, 1, act, shape).run(**args)["y"]
    y0 = gemv.gemv_q8(n, k, 1, act, dataclasses.replace(shape, stages=0)).run(**args)["y"]
    bits_equal(y, y0, f"{shape.tag} == its shape without the pipeline")
    assert np.isfinite(y).all() and np.abs(y).max() > 0


@pytest.mark.parametrize("mode", ["wait", "ahead", "early"])
def test_programmatic_dependent_launches_replay_the_same_bits(mode):
    """A norm -> GEMV -> norm chain built with `Tuning.pdl` and recorded with `Kernel.launch_on`
    (programmatic dependent launch) replays to the bits of plain launches."""
    from cuda.core import Device
    from numba import cuda

    from fwdshim.codegen.tuning import Tuning

    g = rng()
    n = k = 4096
    x = g.standard_normal(k).astype(F32)
    w = g.standard_normal(k).astype(F32)
    qs = g.integers(-127, 128, size=n * k, dtype=np.int8)
    dw = (g.random(n * k // 32) * 0.01).astype(F32)
    outs = []
    for pdl in ("off", mode):
        tuning = Tuning(pdl=pdl)
        norm = norms.rms_norm(k, 1, 1e-5, weight=True, tuning=tuning)
        mm = gemv.gemv_q8(n, k, 1, "f32", gemv.Shape(16, 4, 4, 1, 1, stages=2), tuning=tuning)
        norm2 = norms.rms_norm(n, 1, 1e-5, weight=True, tuning=tuning)
        assert ("pdl_wait()" in mm.source) == (pdl != "off")
        dev = {name: cuda.to_device(a) for name, a in (("x", x), ("w", w), ("qs", qs), ("dw", dw))}
        h = cuda.device_array(k, F32)
        y = cuda.device_array(n, F32)
        z = cuda.device_array(n, F32)
        device = Device(cuda.get_current_device().id)
        device.set_current()
        stream = device.create_stream()
        for kern in (norm, mm, norm2):
            kern.compile()
        builder = device.create_graph_builder()
        builder.begin_building()
        norm.launch_on(builder, dev["x"], dev["w"], h)
        mm.launch_on(builder, dev["qs"], dev["dw"], h, y)
        norm2.launch_on(builder, y, dev["w"], z)
        graph = builder.end_building().complete()
        for _ in range(3):
            graph.launch(stream)
        stream.sync()
        outs.append(z.copy_to_host())
    bits_equal(outs[1], outs[0], f"PDL {mode} == plain launches")
    assert np.isfinite(outs[0]).all()
