"""Q8_0 GEMV bandwidth on a GPU: the dequantizing and int8-activation kernels of `fwdshim.codegen.gemv`
against a read-bandwidth ceiling measured in the same run and torch's fp16 GEMV (issue 5, item 6).

    python bench/gemv.py [--sweep] [--results bench/RESULTS.md] [--reps 20]

Shapes (N x K, y = W x): 4096x4096, 14336x4096 (gate/up of a Llama-3-8B layer), 4096x14336 (down).
Each kernel is timed by graph replay: one cuda.core graph holds one launch per copy of the weights,
enough copies to pass 4x the 60 MB L2 (so every launch reads its weights from HBM), and is replayed
`reps` times between two timing events; the time per GEMV is the total over launches. GB/s counts
the bytes a GEMV must read once (quants, scales, x) and write (y). The ceiling is the faster of a
streaming-read kernel (16-byte loads over 2 GiB) and torch's sum over the same buffer. `--sweep`
also times other launch shapes (rows per warp, warps per block, unrolled steps) of each kernel.
`--results` appends the table, with the date and the GPU, to that markdown file. The launch shapes
are `r` rows per warp group, `w` warps per block, `u` unrolled steps, `s` warps splitting a row's K
(see `fwdshim.codegen.gemv`).
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from numba import cuda

from fwdshim.codegen import gemv

SHAPES = [(4096, 4096), (14336, 4096), (4096, 14336)]
L2_BYTES = 60 * 2**20
SWEEP = [(2, 4, 2, 1), (4, 8, 2, 1), (4, 8, 1, 2), (4, 8, 1, 4), (2, 8, 2, 4), (4, 4, 1, 4), (2, 4, 2, 2), (8, 8, 1, 8)]



class Timer:
    """CUDA-event timing on a cuda.core stream (wall clock after a sync if events are missing)."""

    def __init__(self):
        from cuda.core import Device

        self.device = Device()
        self.device.set_current()
        self.stream = self.device.create_stream()

    def graph(self, record) -> object:
        builder = self.device.create_graph_builder()
        builder.begin_building()
        record(builder)
        return builder.end_building().complete()

    def replay_ms(self, graph, reps: int) -> float:
        graph.launch(self.stream)  # warm-up
        graph.launch(self.stream)
        self.stream.sync()
        try:
            from cuda.core import EventOptions

            opts = EventOptions(timing_enabled=True)
            start = self.stream.record(options=opts)
            for _ in range(reps):
                graph.launch(self.stream)
            stop = self.stream.record(options=opts)
            stop.sync()
            return float(stop - start) / reps
        except Exception:  # noqa: BLE001 - no timing events in this cuda.core: wall clock
            t = time.perf_counter()
            for _ in range(reps):
                graph.launch(self.stream)
            self.stream.sync()
            return (time.perf_counter() - t) * 1e3 / reps


def _cfg(cfg) -> str:
    return "r{} w{} u{} s{}".format(*cfg)


def copies_for(nbytes: int) -> int:
    return max(2, math.ceil(4 * L2_BYTES / nbytes))


def bench_q8(timer: Timer, n: int, k: int, act: str, cfg, reps: int, rng) -> tuple[float, int]:
    """(ms per GEMV, bytes per GEMV) of the Q8_0 kernel `act` (f32 or int8) with launch shape cfg."""
    r, w, u, sp = cfg
    make = gemv.q8_0 if act == "f32" else gemv.q8_0_int8
    kern = make(n, k, rows_per_warp=r, warps=w, unroll=u, split=sp)
    try:
        kern.compile()
    except Exception as e:  # noqa: BLE001 - the first launch compiles it anyway (before the capture)
        print(f"  (eager compile of {kern.name} failed: {e}; compiling on launch)")
        kern.launch(cuda.device_array(n * k, np.int8), cuda.device_array(n * (k // 32), np.float32),
                    *([cuda.device_array(k, np.float32)] if act == "f32" else [cuda.device_array(k, np.int8), cuda.device_array(k // 32, np.float32)]),
                    cuda.device_array(n, np.float32))
    nb = k // 32
    wbytes = n * k + n * nb * 4
    copies = copies_for(wbytes)
    qs = [cuda.to_device(rng.integers(-127, 128, size=n * k, dtype=np.int8)) for _ in range(copies)]
    dw = [cuda.to_device((rng.random(n * nb) * 0.01).astype(np.float32)) for _ in range(copies)]
    y = cuda.device_array(n, np.float32)
    if act == "f32":
        xs = [cuda.to_device(rng.standard_normal(k).astype(np.float32))]
        xbytes = 4 * k
    else:
        xs = [cuda.to_device(rng.integers(-127, 128, size=k, dtype=np.int8)), cuda.to_device(rng.random(nb).astype(np.float32))]
        xbytes = k + 4 * nb
    cuda.synchronize()

    def record(builder):
        for c in range(copies):
            kern.launch(qs[c], dw[c], *xs, y, stream=builder)

    ms = timer.replay_ms(timer.graph(record), reps) / copies
    return ms, wbytes + xbytes + 4 * n


def bench_torch(n: int, k: int, reps: int) -> tuple[float, int]:
    import torch

    wbytes = 2 * n * k
    copies = copies_for(wbytes)
    ws = [torch.randn(n, k, device="cuda", dtype=torch.float16) for _ in range(copies)]
    x = torch.randn(k, device="cuda", dtype=torch.float16)
    y = torch.empty(n, device="cuda", dtype=torch.float16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for w in ws:
            torch.mv(w, x, out=y)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for w in ws:
            torch.mv(w, x, out=y)
    graph.replay()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        graph.replay()
    stop.record()
    stop.synchronize()
    ms = start.elapsed_time(stop) / reps / copies
    torch.cuda.empty_cache()
    return ms, wbytes + 2 * k + 2 * n


def read_ceiling(timer: Timer, reps: int) -> tuple[float, float]:
    """(GB/s of a streaming-read Numba kernel, GB/s of torch's sum) over the same 2 GiB."""
    import torch

    from fwdshim.codegen.intrinsics import ld_i32x4

    words = 2**29  # 2 GiB of int32
    grid, block = 1024, 256  # 2^18 threads, each four 16-byte loads a step: 128 steps exactly
    stride = grid * block * 4

    @cuda.jit
    def read_k(a, out):
        i = cuda.grid(1) * 4
        acc = 0
        while i < words:
            a0, a1, a2, a3 = ld_i32x4(a, i)
            b0, b1, b2, b3 = ld_i32x4(a, i + stride)
            c0, c1, c2, c3 = ld_i32x4(a, i + 2 * stride)
            d0, d1, d2, d3 = ld_i32x4(a, i + 3 * stride)
            acc ^= a0 ^ a1 ^ a2 ^ a3 ^ b0 ^ b1 ^ b2 ^ b3 ^ c0 ^ c1 ^ c2 ^ c3 ^ d0 ^ d1 ^ d2 ^ d3
            i += 4 * stride
        if acc == 0x7FEDCBA9:
            out[0] = acc

    t = torch.ones(words, device="cuda", dtype=torch.int32)
    a = cuda.as_cuda_array(t)
    out = cuda.device_array(1, np.int64)
    torch.cuda.synchronize()

    def record(builder):
        read_k[grid, block, builder](a, out)

    ms = timer.replay_ms(timer.graph(record), reps)
    numba_gbs = 4 * words / ms / 1e6
    f = t.view(torch.float32)
    f.sum()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        f.sum()
    stop.record()
    stop.synchronize()
    torch_gbs = 4 * words / (start.elapsed_time(stop) / reps) / 1e6
    torch.cuda.empty_cache()
    return numba_gbs, torch_gbs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", action="store_true", help="also time other launch shapes of each kernel")
    ap.add_argument("--results", type=Path, help="append the table to this markdown file")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    timer = Timer()
    gpu = cuda.get_current_device().name
    gpu = gpu.decode() if isinstance(gpu, bytes) else gpu
    numba_ceiling, torch_ceiling = read_ceiling(timer, args.reps)
    ceiling = max(numba_ceiling, torch_ceiling)
    print(f"GPU {gpu}; read ceiling {ceiling:.0f} GB/s (Numba streaming read {numba_ceiling:.0f}, torch sum {torch_ceiling:.0f})")
    rows = []
    for n, k in SHAPES:
        for act, label in (("f32", "Q8_0 dequant"), ("int8", "Q8_0 int8-act")):
            default_cfg = gemv.launch_shape(n, k, act)
            configs = [default_cfg] + [c for c in SWEEP if c != default_cfg] if args.sweep else [default_cfg]
            results = []
            for cfg in configs:
                ms, nbytes = bench_q8(timer, n, k, act, cfg, args.reps, rng)
                gbs = nbytes / ms / 1e6
                results.append((ms, gbs, cfg))
                if args.sweep:
                    print(f"  {label} {n}x{k} {_cfg(cfg)}: {ms * 1e3:7.1f} us {gbs:6.0f} GB/s {gbs / ceiling:5.1%}")
            default = results[0]
            best = min(results)
            rows.append((f"{label} {_cfg(default_cfg)}", n, k, default[0], default[1], best if args.sweep else None))
        ms, nbytes = bench_torch(n, k, args.reps)
        rows.append(("torch fp16 mv", n, k, ms, nbytes / ms / 1e6, None))
    lines = [
        f"### {datetime.date.today().isoformat()} — {gpu} — `bench/gemv.py`",
        "",
        (
            f"Read ceiling {ceiling:.0f} GB/s (streaming-read Numba kernel {numba_ceiling:.0f}, torch sum "
            f"{torch_ceiling:.0f}), measured in the same run. Graph replay, weights rotated past 4x the 60 MB "
            "L2. Launch shapes (`gemv.launch_shape` defaults in the table's first columns): r rows per "
            "warp group, w warps per block, u unrolled steps, s warps splitting a row group's K."
        ),
        "",
        "| kernel | N x K | us | GB/s | of ceiling |" + (" best launch (sweep) |" if args.sweep else ""),
        "|---|---|---|---|---|" + ("---|" if args.sweep else ""),
    ]
    for label, n, k, ms, gbs, best in rows:
        line = f"| {label} | {n} x {k} | {ms * 1e3:.1f} | {gbs:.0f} | {gbs / ceiling:.1%} |"
        if args.sweep:
            line += f" {_cfg(best[2])}: {best[1]:.0f} GB/s |" if best else " |"
        lines.append(line)
    table = "\n".join(lines) + "\n"
    print(table)
    if args.results:
        with args.results.open("a") as f:
            f.write("\n" + table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
