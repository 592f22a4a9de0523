"""A step that does not fit the device's memory: refused before anything is allocated, in one line
(the GiB it needs, the GiB free of the total), and a CUDA out-of-memory error on allocation said the
same way, through `fwdshim run` as through the runtime (found by an adversary, 2026-12-02: a step of
`tensor<99999999999xf32>` planned ~400 GB of buffers and the runtime would have failed at allocation).

The check runs on the GPU only (the simulator's context has infinite memory): here the device's
memory figure is monkeypatched (`runtime.device_memory`), and an allocation made to fail."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest
from numba import cuda
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin
from xdsl.dialects.func import Func
from xdsl.parser import Parser

from fwdshim.codegen import runtime
from fwdshim.codegen.device import simulating
from fwdshim.codegen.loop import loop_bytes
from fwdshim.codegen.plan import plan_for
from fwdshim.codegen.runtime import (
    GIB,
    CompiledForward,
    DeviceMemoryError,
    StepMemory,
    memory_refusal,
    step_memory,
)  # fmt: skip
from fwdshim.dialects.fwd import Fwd
from fwdshim.frontend.export import byte_vocab, random_llama, write_llama
from fwdshim.frontend.gguf_model import LlamaParams
from fwdshim.tools import cli, runner

pytestmark = pytest.mark.skipif(not simulating(), reason="patches the simulator's allocations")

HUGE = """
func.func @f(%x: tensor<99999999999xf32>) -> tensor<99999999999xf32> {
  %n = fwd.rms_norm %x eps 1.0e-05 : tensor<99999999999xf32> -> tensor<99999999999xf32>
  func.return %n : tensor<99999999999xf32>
}
"""
H200 = (139.5 * GIB, 139.8 * GIB)
TINY = LlamaParams(n_layer=1, d=64, ff=96, h=4, kv=2, hd=16, rope_dim=16, rope_base=10000.0, eps=1e-5,
                   vocab=257, context_length=64)  # fmt: skip


def _parse(text: str):
    ctx = Context()
    for d in (Builtin, Func, Fwd):
        ctx.load_dialect(d)
    return Parser(ctx, text).parse_module()


class CudaAPIError(Exception):
    """Numba's driver error as a real GPU raises it (the simulator's has no `code`)."""

    def __init__(self, code, msg):
        self.code, self.msg = code, msg

    def __str__(self):
        return f"[{self.code}] {self.msg}"


OOM = CudaAPIError(runtime.OUT_OF_MEMORY, "Call to cuMemAlloc results in CUDA_ERROR_OUT_OF_MEMORY")


def test_step_memory_counts_every_buffer_and_weight():
    plan = plan_for(_parse(HUGE))
    need = step_memory(plan, extra=123)
    # %x is packed (rounded up to 256 bytes), %n its own allocation; no weight
    assert need == StepMemory(400_000_000_000 + 399_999_999_996, 0, 123, ("%x", 399_999_999_996))
    assert need.total == 799_999_999_996 + 123


def test_the_plan_text_says_the_memory_the_step_needs():
    """`fwdshim-opt -t numba` on a step too large for any GPU prints its need in the plan's header,
    the line a device refuses it with (the refusal itself comes at allocation)."""
    lines = plan_for(_parse(HUGE)).text().splitlines()
    assert lines[2] == "//   the step needs 745.1 GiB of device memory (745.1 GiB of buffers, the largest %x 372.5 GiB; 0.0 GiB of weights)"


def test_memory_refusal_compares_the_need_with_the_free_memory():
    need = step_memory(plan_for(_parse(HUGE)))
    assert memory_refusal(need, *H200) == (
        "the step needs 745.1 GiB of device memory (745.1 GiB of buffers, the largest %x 372.5 GiB; "
        "0.0 GiB of weights); the device has 139.5 GiB free of 139.8 GiB"
    )
    small = StepMemory(buffers=3 * GIB, weights=5 * GIB, extra=GIB // 2)
    assert memory_refusal(small, free=8.5 * GIB, total=80 * GIB) is None  # exactly fits
    assert memory_refusal(small, free=8 * GIB, total=80 * GIB) == (
        "the step needs 8.5 GiB of device memory (3.0 GiB of buffers; 5.0 GiB of weights; "
        "0.5 GiB for the decode loop); the device has 8.0 GiB free of 80.0 GiB"
    )
    assert memory_refusal(StepMemory(2048, 0), free=1024, total=4096) == (
        "the step needs 1.91e-06 GiB of device memory (1.91e-06 GiB of buffers; 0.0 GiB of weights); "
        "the device has 9.54e-07 GiB free of 3.81e-06 GiB"
    )


def test_runtime_refuses_a_step_larger_than_the_device_before_allocating(monkeypatch):
    allocated = []
    monkeypatch.setattr(runtime, "device_memory", lambda: H200)
    monkeypatch.setattr(cuda, "to_device", lambda a, *args, **kw: allocated.append(a.nbytes))
    monkeypatch.setattr(cuda, "pinned_array", lambda *args, **kw: allocated.append(args))
    with pytest.raises(DeviceMemoryError) as e:
        CompiledForward(_parse(HUGE), None)
    assert str(e.value) == memory_refusal(step_memory(plan_for(_parse(HUGE))), *H200)
    assert allocated == []


@pytest.mark.parametrize(
    "error",
    [
        OOM,
        RuntimeError("CUDA_ERROR_OUT_OF_MEMORY: out of memory"),  # cuda.core's CUDAError says it so
    ],
)
def test_an_allocation_the_device_refuses_is_one_line(monkeypatch, error):
    module = _parse(HUGE.replace("99999999999", "1024"))
    monkeypatch.setattr(runtime, "device_memory", lambda: (GIB, 2 * GIB))

    def refuse(*args, **kw):
        raise error

    monkeypatch.setattr(cuda, "to_device", refuse)
    with pytest.raises(DeviceMemoryError) as e:
        CompiledForward(module, None)
    assert str(e.value) == (
        "the device is out of memory (CUDA_ERROR_OUT_OF_MEMORY): the step needs 7.63e-06 GiB of device "
        "memory (7.63e-06 GiB of buffers, the largest %x 3.81e-06 GiB; 0.0 GiB of weights); "
        "the device has 1.0 GiB free of 2.0 GiB"
    )
    other = CudaAPIError(1, "Call to cuMemAlloc results in CUDA_ERROR_INVALID_VALUE")
    monkeypatch.setattr(cuda, "to_device", lambda *a, **kw: (_ for _ in ()).throw(other))
    with pytest.raises(CudaAPIError):  # any other driver error is left as it is
        CompiledForward(module, None)


def test_loop_bytes_follows_the_embedding_table_layout():
    def emb(ggml):
        return SimpleNamespace(shape=(257, 64), ggml=SimpleNamespace(value=ggml))

    tables = 10 * 16 * 4 + 12 * 4  # 10 positions of 16 angles, and the ids
    assert loop_bytes(emb("q8_0"), 10, 16) == 257 * (64 + 2 * 4) + tables
    assert loop_bytes(emb("f16"), 10, 16) == 257 * 64 * 2 + tables
    assert loop_bytes(emb("q4_1"), 10, 16) == 257 * 64 * 4 + tables


def _gpu_run(monkeypatch, tmp_path, capsys, memory):
    """`fwdshim run --device gpu` of a tiny model with the device's memory figure `memory`."""
    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("FWDSHIM_TRACEBACK", raising=False)
    monkeypatch.setattr(runner, "gpu_available", lambda: True)
    monkeypatch.setattr(runtime, "device_memory", lambda: memory)
    path = write_llama(tmp_path / "m.gguf", TINY, random_llama(TINY, seed=5), vocab=byte_vocab())
    argv = ["run", "--model", str(path), "--prompt", "ab", "--device", "gpu", "--max-tokens", "1",
            "--context", "16", "--requantize", "q8_0", "-q"]  # fmt: skip
    rc = cli.main(argv)
    return rc, capsys.readouterr().err, path


def test_fwdshim_run_says_the_step_does_not_fit_in_one_line(monkeypatch, tmp_path, capsys):
    allocated = []
    monkeypatch.setattr(cuda, "to_device", lambda a, *args, **kw: allocated.append(a.nbytes))
    rc, err, path = _gpu_run(monkeypatch, tmp_path, capsys, (1024, 24 * GIB))  # the step takes a few MiB
    assert rc == 1 and allocated == [] and err.count("\n") == 1
    # a tiny step, so its figures are small: the test holds their form, the decode loop's share in
    want = (
        rf"fwdshim: error: {re.escape(str(path))}: the step needs ([\d.e-]+) GiB of device memory "
        r"\([\d.e-]+ GiB of buffers, the largest %\S+ [\d.e-]+ GiB; [\d.e-]+ GiB of weights; "
        r"[\d.e-]+ GiB for the decode loop\); the device has 9.54e-07 GiB free of 24.0 GiB"
    )
    assert re.fullmatch(want, err.strip()), err
    rc, err, _ = _gpu_run(monkeypatch, tmp_path, capsys, (0, 24 * GIB))  # a device with nothing free
    assert rc == 1 and err.strip().endswith("the device has 0.0 GiB free of 24.0 GiB")


def test_fwdshim_run_says_an_out_of_memory_allocation_in_one_line(monkeypatch, tmp_path, capsys):
    real = cuda.to_device
    calls = []

    def to_device(a, *args, **kw):  # the third allocation fails, as a full device would
        calls.append(np.asarray(a).nbytes)
        if len(calls) == 3:
            raise OOM
        return real(a, *args, **kw)

    monkeypatch.setattr(cuda, "to_device", to_device)
    rc, err, path = _gpu_run(monkeypatch, tmp_path, capsys, (GIB, 24 * GIB))
    assert rc == 1 and len(calls) == 3 and err.count("\n") == 1, err
    oom = "the device is out of memory (CUDA_ERROR_OUT_OF_MEMORY)"
    assert err.startswith(f"fwdshim: error: {path}: {oom}: the step needs ")
    assert err.strip().endswith("the device has 1.0 GiB free of 24.0 GiB")


def test_the_device_loop_says_an_out_of_memory_allocation_in_one_line(monkeypatch, tmp_path, capsys):
    """The step's buffers fit; the device loop's mapped token slots do not (CUDA_ERROR_OUT_OF_MEMORY)."""

    def refuse(*args, **kw):
        raise RuntimeError("CUDA_ERROR_OUT_OF_MEMORY: out of memory")

    monkeypatch.setattr(cuda, "mapped_array", refuse)
    rc, err, path = _gpu_run(monkeypatch, tmp_path, capsys, (GIB, 24 * GIB))
    assert rc == 1 and err.count("\n") == 1, err
    assert re.fullmatch(
        rf"fwdshim: error: {re.escape(str(path))}: the device is out of memory \(CUDA_ERROR_OUT_OF_MEMORY\): "
        r"the step needs [\d.e-]+ GiB of device memory \(.* GiB for the decode loop\); "
        r"the device has 1.0 GiB free of 24.0 GiB",
        err.strip(),
    ), err
