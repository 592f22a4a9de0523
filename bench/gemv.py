"""GEMV bandwidth on a GPU, every block type: the dequantizing and int8-activation kernels of
`fwdshim.codegen.gemv` (Q8_0 and the affine GGML types, `--types`) against a read-bandwidth ceiling
measured in the same run, torch's fp16 GEMV and an empty kernel.

    python bench/gemv.py [--types q8_0,q4_k,...] [--sweep] [--small] [--shapes NxK,...] [--try TAG,...]
                         [--results bench/RESULTS.md] [--json FILE] [--reps 20] [--jobs 8]

`--types` (default q8_0) times each type's GEMV at its default launch shape (`gemv.block_shape`) and
the `--try`/`--sweep` shapes; an affine type's weights are random blocks (`ggml_blocks.random_raw`)
in `ggml_blocks.repack`'s layout, its GB/s over the bytes that layout holds; F32, F16 and BF16
weights are random values as stored (dequant only).

Shapes (N x K, y = W x): 4096x4096, 14336x4096 (gate/up of a Llama-3-8B layer), 4096x14336 (down);
with `--small` also SmolLM2's 576x576, 192x576 (k/v), 1536x576 (gate/up), 576x1536 (down).
Each kernel is timed by graph replay: one cuda.core graph holds one launch per copy of the weights,
enough copies to pass 4x the 60 MB L2 (so every launch reads its weights from HBM), taken in turn
for at least 64 launches, and is replayed `reps` times between two timing events; the time per
GEMV is the total over launches. GB/s counts
the bytes a GEMV must read once (quants, scales, x) and write (y). The ceiling is the faster of a
streaming-read kernel (16-byte loads over 2 GiB) and torch's sum over the same buffer; `empty` is an
empty kernel of the GEMV's grid in a graph of as many launches (the launch floor of issue 12).
`before` is the GEMV before issue 12 (whole-block lanes, its default launch shapes); `after` the
coalesced GEMV with `gemv.launch_shape`'s default. `--sweep` also times the launch shapes of
`sweep_shapes` (compiled first in `--jobs` processes) and reports the best; `--try` times the launch
shapes its tags name (`gemv.Shape.tag`, e.g. `v16r8w4u1s1a2`: 16-byte pieces, 8 rows, 4 warps,
unroll 1, split 1, a 2-stage async-copy pipeline) wherever they build. `--results` appends the
table, with the date and the GPU, to that markdown file; `--json` writes every timing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import astuple
from multiprocessing import get_context
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fwdshim.tools.timing import L2_BYTES, Timer, empty_launch_us, streaming_read_kernel  # noqa: E402 - the timing library

TYPES = ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "f32", "f16", "bf16")
"""The weight types `--types` takes (`gemv_decode.BLOCK_TYPES`, `DENSE_TYPES`: these dequant only)."""
DENSE = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}


def acts(weights: str) -> tuple[str, ...]:
    """The numerics a type's GEMV computes: f32 (dequant), and int8 for the block types."""
    return ("f32",) if weights in DENSE else ("f32", "int8")

BIG = [(4096, 4096), (14336, 4096), (4096, 14336)]
SMALL = [(576, 576), (192, 576), (1536, 576), (576, 1536)]
SHAPES = BIG
"""The Llama-3-8B shapes."""
ALIGN = 256


_BASES = {
    "int8": "v16r4w4u1s4 v16r1w4u4s1 v16r2w4u2s2 v16r4w4u2s1 v16r1w4u2s1 v16r2w4u4s1 v16r2w4u2s4 v16r2w8u2s4",
    "f32": "v16r2w4u2s4 v16r2w4u1s2 v16r4w8u1s8 v16r2w4u2s1 v16r4w4u1s1 v16r2w8u2s8 v4r1w4u4s4 v16r4w4u1s4",
}
_SMALL_BASES = {
    "int8": "v16r1w4u1s4 v16r1w8u1s8 v16r1w4u1s1 v16r1w2u1s1 v16r1w4u1s2",
    "f32": "v16r4w4u1s4 v16r4w8u1s8 v16r1w8u1s8 v16r2w4u1s4 v16r1w4u1s4",
}
_TALL_BASES = "v16r2w4u1s1 v16r4w4u1s1 v16r4w8u1s2 v16r8w8u1s4 v16r2w8u1s4 v16r4w4u1s2 v16r2w4u1s2 v16r8w8u1s8"
"""More for short rows of many (SmolLM2's 49152 x 576 output projection)."""
_VARIANTS = ((0, False), (0, True), (264, False), (264, True), (528, True), (1056, True))


_TAG = re.compile(r"v(\d+)r(\d+)w(\d+)u(\d+)s(\d+)(?:b(\d+))?(p)?(?:a(\d+))?$")


def _parse(tag: str) -> tuple[int, ...]:
    """The (vec, rows, warps, unroll, split) of a launch-shape tag such as `v16r2w4u2s1`."""
    return parse_tag(tag)[:5]


def parse_tag(tag: str) -> tuple:
    """The `gemv.Shape` fields of a launch-shape tag (`gemv.Shape.tag`: `v16r2w4u1s1a4`, `v16r2w8u2s8b264p`)."""
    m = _TAG.match(tag)
    if not m:
        raise ValueError(f"`{tag}` is not a launch-shape tag (v16r2w4u2s1, optionally b<blocks>, p, a<stages>)")
    v, r, w, u, sp, b, p, a = m.groups()
    return (int(v), int(r), int(w), int(u), int(sp), int(b or 0), bool(p), int(a or 0))


_AFFINE_BASES = ("v16r1w4u2s1 v16r2w4u2s1 v16r2w4u1s1 v16r4w4u1s1 v16r4w4u2s1 v16r2w8u2s2 v16r4w8u1s2 v16r1w4u4s1 "
                 "v16r2w4u4s1 v16r2w8u1s4 v16r1w8u2s8 v16r2w4u2s4")
"""The launch shapes `--sweep` times for an affine type (16-byte pieces of 32 values, no pipeline)."""


def sweep_shapes(n: int, k: int, act: str, weights: str = "q8_0") -> list[tuple]:
    """The launch shapes (vec, rows, warps, unroll, split, blocks, prefetch) `--sweep` times for N x K
    under `act`: `_BASES`' (`_SMALL_BASES`' below K 2048) in each of `_VARIANTS` (a looping grid of
    so many blocks, an L2 prefetch of the rows), less those unrolling past a lane's steps and grids
    no smaller than one block per row group."""
    out = []
    if weights != "q8_0":
        for tag in _AFFINE_BASES.split():
            v, r, w, u, sp = _parse(tag)
            if u > 1 and u > k // 32 / (32 * sp):
                continue
            out.append((v, r, w, u, sp, 0, False, 0))
        return out
    small = k < 2048
    tags = (_SMALL_BASES if small else _BASES)[act].split() + (_TALL_BASES.split() if small and n >= 8192 else [])
    for tag in dict.fromkeys(tags):
        v, r, w, u, sp = _parse(tag)
        if u > 1 and u > k // v / (32 * sp):
            continue
        n_blocks = -(-n // (w // sp * r))
        for blocks, pf in ((0, False), (0, True)) if small else _VARIANTS:
            if blocks and blocks >= n_blocks:
                continue
            out.append((v, r, w, u, sp, blocks, pf, 0))
    return out


def kernel_for(spec: tuple):
    """The Kernel of a spec (weights, n, k, act, impl, shape): impl `before` or `after`, shape a
    `gemv.Shape` tuple."""
    from fwdshim.codegen import gemv

    weights, n, k, act, impl, shape = spec
    return gemv.gemv_blocks(n, k, 1, act, gemv.Shape(*shape), weights=weights)


def before_shape(n: int, k: int, act: str) -> tuple:
    """The default launch of the GEMV before issue 12 (whole-block lanes, `gemv.Shape(32, ...)`)."""
    if act == "f32":
        return (32, 4, 8, 1, 2) if k >= 8192 else (32, 4, 8, 2, 1)
    if k >= 8192:
        return (32, 2, 8, 2, 4)
    return (32, 2, 4, 2, 2) if n <= 4096 else (32, 2, 4, 2, 1)


def torch_ms(fn, reps: int) -> float:
    """ms a call of `fn` (torch work on the current stream), called `reps` times between two CUDA
    events after one warm call."""
    import torch

    fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / reps


def torch_replay_ms(graph, reps: int, launches: int) -> float:
    """ms a launch of a captured torch CUDA graph of `launches` launches, replayed `reps` times
    between two events (after one warm replay)."""
    return torch_ms(graph.replay, reps) / launches


def gpu_ceiling(timer, reps: int) -> tuple[str, float]:
    """The GPU's name and the read ceiling (GB/s: the better of Numba's and torch's streaming reads)."""
    from numba import cuda

    gpu = cuda.get_current_device().name
    gpu = gpu.decode() if isinstance(gpu, bytes) else gpu
    numba_ceiling, torch_ceiling = read_ceiling(timer, reps)
    ceiling = max(numba_ceiling, torch_ceiling)
    return gpu, ceiling


def print_table(lines: list[str], results: Path | None) -> int:
    """Print the table's `lines` and append them to `results` (`--results`) when given; 0."""
    table = "\n".join(lines) + "\n"
    print(table)
    if results:
        with results.open("a") as f:
            f.write("\n" + table)
    return 0


SIMULATOR_ON = "NUMBA_ENABLE_CUDASIM=1 runs Numba's CUDA simulator, which times nothing: unset it, on a GPU"
"""Why a benchmark does not run under the simulator (its `cuda.is_available()` is true there)."""


def require_gpu(ap: argparse.ArgumentParser) -> None:
    """Exit with one line (status 1) when no CUDA device is here, or Numba's simulator stands in for
    one (`NUMBA_ENABLE_CUDASIM=1`, as the tests set it): the benchmarks time kernels on a device."""
    from numba import config, cuda

    if config.ENABLE_CUDASIM:
        ap.exit(1, f"{ap.prog}: {SIMULATOR_ON}\n")
    if not cuda.is_available():
        ap.exit(1, f"{ap.prog}: no CUDA GPU here (the benchmarks time kernels on a device; the tests run without one)\n")


def _compile_one(spec: tuple) -> tuple:
    t = time.perf_counter()
    try:
        kern = kernel_for(spec)
        kern.compile()
        regs = None
        try:
            regs = kern.fn.get_regs_per_thread(kern.signature)
        except Exception:  # noqa: BLE001 - not every numba-cuda has it
            pass
        return spec, None, regs, time.perf_counter() - t
    except Exception as e:  # noqa: BLE001 - a kernel that fails to compile is reported, not fatal
        return spec, f"{type(e).__name__}: {str(e)[:300]}", None, time.perf_counter() - t


def precompile(specs: list[tuple], jobs: int) -> dict[tuple, tuple]:
    """Compile every spec in `jobs` fresh processes (Numba's disk cache keeps the results)."""
    if jobs <= 1:
        return {s[0]: s[1:] for s in map(_compile_one, specs)}
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as ex:
        return {s[0]: s[1:] for s in ex.map(_compile_one, specs, chunksize=2)}


MIN_LAUNCHES = 64


def copies_for(nbytes: int) -> int:
    return max(2, math.ceil(4 * L2_BYTES / nbytes))


def launches_for(copies: int) -> int:
    """Launches per timed graph: the copies in turn, as many rounds as make `MIN_LAUNCHES` (so one
    graph launch's own cost is spread over many kernels, as in a decode step's graph)."""
    return copies * -(-MIN_LAUNCHES // copies)


class Weights:
    """`copies` copies of random weights of N x K of type `weights` (Q8_0: one allocation each for
    quants and scales; an affine GGML type: random blocks of it, `ggml_blocks.random_raw`, in
    `ggml_blocks.repack`'s layout) and an activation, on the device."""

    def __init__(self, n: int, k: int, rng, weights: str = "q8_0"):
        from numba import cuda

        nb = k // 32
        self.n, self.k = n, k
        if weights in DENSE:  # random values as stored (bfloat16 as the top half of float32 bits)
            vals = rng.standard_normal(n * k).astype(np.float32)
            arr = (vals.view(np.uint32) >> 16).astype(np.uint16) if weights == "bf16" else vals.astype(DENSE[weights])
            self.wbytes = self.file_bytes = arr.nbytes
            self.copies = copies_for(self.wbytes)
            self.parts = [[cuda.to_device(arr)] for _ in range(self.copies)]
        elif weights != "q8_0":
            from fwdshim import ggml_blocks as G

            qt = G.QT[weights.upper()]
            raw = G.random_raw(qt, n, k, rng)
            parts = list(G.repack(raw, qt).values())  # in the kernel's parameter order
            self.wbytes = sum(a.nbytes for a in parts)
            self.file_bytes = raw.nbytes
            self.copies = copies_for(self.wbytes)
            self.parts = [[cuda.to_device(a) for a in parts] for _ in range(self.copies)]
        else:
            self.wbytes = self.file_bytes = n * k + n * nb * 4
            self.copies = copies_for(self.wbytes)
            qstride = -(-n * k // ALIGN) * ALIGN
            dstride = -(-n * nb * 4 // ALIGN) * ALIGN // 4
            qs = cuda.to_device(rng.integers(-127, 128, size=qstride * self.copies, dtype=np.int8))
            dw = cuda.to_device((rng.random(dstride * self.copies) * 0.01).astype(np.float32))
            self.parts = [[qs[c * qstride : c * qstride + n * k], dw[c * dstride : c * dstride + n * nb]]
                          for c in range(self.copies)]  # fmt: skip
        self.x = cuda.to_device(rng.standard_normal(k).astype(np.float32))
        self.xq = cuda.to_device(rng.integers(-127, 128, size=k, dtype=np.int8))
        self.xd = cuda.to_device(rng.random(nb).astype(np.float32))
        self.y = cuda.device_array(n, np.float32)
        cuda.synchronize()

    def nbytes(self, act: str) -> int:
        xbytes = 4 * self.k if act == "f32" else self.k + 4 * (self.k // 32)
        return self.wbytes + xbytes + 4 * self.n

    def args(self, c: int, act: str) -> tuple:
        xs = (self.x,) if act == "f32" else (self.xq, self.xd)
        return (*self.parts[c], *xs, self.y)


def time_kernel(timer, kern, w: Weights, act: str, reps: int) -> float:
    """ms per GEMV of `kern` over the weight copies of `w` (graph replay)."""

    launches = launches_for(w.copies)

    def record(builder):
        for i in range(launches):
            kern.launch(*w.args(i % w.copies, act), stream=builder)

    return timer.replay_ms(timer.graph(record), reps) / launches


def empty_ms(timer, grid, block, launches: int, reps: int) -> float:
    """ms per launch of an empty kernel of `grid` x `block` in a graph of `launches` launches."""
    return empty_launch_us(timer, reps, grid, block, launches) / 1e3


def bench_torch(n: int, k: int, reps: int) -> tuple[float, int]:
    import torch

    wbytes = 2 * n * k
    copies = copies_for(wbytes)
    launches = launches_for(copies)
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
        for i in range(launches):
            torch.mv(ws[i % copies], x, out=y)
    ms = torch_replay_ms(graph, reps, launches)
    torch.cuda.empty_cache()
    return ms, wbytes + 2 * k + 2 * n


def read_ceiling(timer: Timer, reps: int) -> tuple[float, float]:
    """(GB/s of a streaming-read Numba kernel, GB/s of torch's sum) over the same 2 GiB."""
    import torch
    from numba import cuda

    words = 2**29  # 2 GiB of int32
    grid, block = 1024, 256  # 2^18 threads, each four 16-byte loads a step: 128 steps exactly
    read_k = streaming_read_kernel(words, grid, block)

    t = torch.ones(words, device="cuda", dtype=torch.int32)
    a = cuda.as_cuda_array(t)
    out = cuda.device_array(1, np.int64)
    torch.cuda.synchronize()

    def record(builder):
        read_k[grid, block, builder](a, out)

    ms = timer.replay_ms(timer.graph(record), reps)
    numba_gbs = 4 * words / ms / 1e6
    f = t.view(torch.float32)
    torch_gbs = 4 * words / torch_ms(f.sum, reps) / 1e6
    torch.cuda.empty_cache()
    return numba_gbs, torch_gbs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--sweep", action="store_true", help="also time the launch shapes of sweep_shapes")
    ap.add_argument("--small", action="store_true", help="also SmolLM2's GEMV shapes")
    ap.add_argument("--only-small", action="store_true", help="SmolLM2's shapes alone")
    ap.add_argument("--results", type=Path, help="append the table to this markdown file")
    ap.add_argument("--json", type=Path, help="write every timing to this JSON file")
    ap.add_argument("--reps", type=int, default=20, help="graph replays timed per kernel (default 20)")
    ap.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1), help="processes compiling the kernels first")
    ap.add_argument("--no-torch", action="store_true", help="leave out torch's fp16 GEMV")
    ap.add_argument("--shapes", help="N x K pairs to time instead, e.g. 49152x576,4096x4096")
    ap.add_argument("--types", default="q8_0", help="weight types, comma-separated, of " + ", ".join(TYPES) + " (default q8_0)")
    ap.add_argument("--try", dest="tries", help="launch-shape tags to time too, e.g. v16r2w4u1s1a4,v16r4w4u1s1a3 "
                    "(each where it builds for the N x K and numerics)")
    args = ap.parse_args(argv)
    try:
        tries = [parse_tag(t) for t in (args.tries or "").split(",") if t]
    except ValueError as e:
        ap.error(f"--try: {e}")
    picked = None
    if args.shapes:
        try:
            picked = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
            if any(len(p) != 2 or min(p) <= 0 or p[1] % 32 for p in picked):
                raise ValueError
        except ValueError:
            ap.error(f"--shapes {args.shapes}: expected N x K pairs such as 4096x4096,14336x4096 (K a multiple of 32)")
    types = [t.strip().lower() for t in args.types.split(",") if t.strip()]
    if not types or any(t not in TYPES for t in types):
        ap.error(f"--types {args.types}: weight types of {', '.join(TYPES)}")
    if args.jobs < 1 or args.reps < 1:
        ap.error("--jobs and --reps are at least 1")
    require_gpu(ap)
    from fwdshim.codegen import gemv

    shapes = ([] if args.only_small else BIG) + (SMALL if args.small or args.only_small else [])
    if picked:
        shapes = picked
    specs = []
    for t in types:
        for n, k in shapes:
            for act in acts(t):
                if t == "q8_0":
                    specs.append((t, n, k, act, "before", before_shape(n, k, act)))
                specs.append((t, n, k, act, "after", tuple(astuple(gemv.block_shape(t, n, k, act)))))
                if args.sweep:
                    specs += [(t, n, k, act, "after", s) for s in sweep_shapes(n, k, act, t)]
                specs += [(t, n, k, act, "after", tag) for tag in tries]
    specs = list(dict.fromkeys(specs))
    t = time.perf_counter()
    compiled = precompile(specs, args.jobs)
    failed = {s: v[0] for s, v in compiled.items() if v[0]}
    print(f"compiled {len(specs)} kernels in {time.perf_counter() - t:.1f} s ({args.jobs} processes); {len(failed)} failed")
    for s, e in list(failed.items())[:5]:
        print("  FAILED", s, e)

    from numba import cuda

    rng = np.random.default_rng(0)
    timer = Timer()
    gpu = cuda.get_current_device().name
    gpu = gpu.decode() if isinstance(gpu, bytes) else gpu
    numba_ceiling, torch_ceiling = read_ceiling(timer, args.reps)
    ceiling = max(numba_ceiling, torch_ceiling)
    print(f"GPU {gpu}; read ceiling {ceiling:.0f} GB/s (Numba streaming read {numba_ceiling:.0f}, torch sum {torch_ceiling:.0f})")
    records, rows = [], []
    for wt, n, k in ((t, n, k) for t in types for n, k in shapes):
        w = Weights(n, k, rng, wt)
        for act, label in (("f32", f"{wt.upper()} dequant"), ("int8", f"{wt.upper()} int8-act"))[: len(acts(wt))]:
            res = {}
            for spec in specs:
                if spec[:4] != (wt, n, k, act) or spec in failed:
                    continue
                kern = kernel_for(spec)
                kern.compile()
                ms = time_kernel(timer, kern, w, act, args.reps)
                gbs = w.nbytes(act) / ms / 1e6
                res[spec] = (ms, gbs, kern)
                rec = dict(weights=wt, n=n, k=k, act=act, impl=spec[4], shape=list(spec[5]), us=ms * 1e3, gbs=gbs,
                           share=gbs / ceiling, regs=compiled[spec][1], grid=list(kern.grid), block=list(kern.block))
                records.append(rec)
            before = res.get((wt, n, k, act, "before", before_shape(n, k, act)))
            after_spec = (wt, n, k, act, "after", tuple(astuple(gemv.block_shape(wt, n, k, act))))
            after = res.get(after_spec)
            best_spec = min((s for s in res if s[4] == "after"), key=lambda s: res[s][0], default=None)
            if after is None and before is None:
                continue
            floor = empty_ms(timer, (after or before)[2].grid, (after or before)[2].block, launches_for(w.copies), args.reps)
            records.append(dict(weights=wt, n=n, k=k, act=act, impl="empty", us=floor * 1e3))
            rows.append((label, wt, n, k, before, after, res.get(best_spec) if args.sweep or tries else None, best_spec, floor))
            if args.sweep or args.tries:
                top = sorted((s for s in res if s[4] == "after"), key=lambda s: res[s][0])[:8]
                print(f"{label} {n}x{k}: " + "; ".join(f"{gemv.Shape(*s[5]).tag} {res[s][1] / ceiling:.1%}" for s in top), flush=True)
        if not args.no_torch and (n, k) in BIG and wt == types[0]:
            ms, nbytes = bench_torch(n, k, args.reps)
            rows.append(("torch fp16 mv", "", n, k, (ms, nbytes / ms / 1e6, None), None, None, None, None))
        del w
    if args.json:
        args.json.write_text(json.dumps(dict(gpu=gpu, ceiling=ceiling, numba_ceiling=numba_ceiling,
                                             torch_ceiling=torch_ceiling, records=records), indent=1))
    lines = [
        f"### {datetime.date.today().isoformat()} — {gpu} — `bench/gemv.py`",
        "",
        (
            f"Read ceiling {ceiling:.0f} GB/s (streaming-read Numba kernel {numba_ceiling:.0f}, torch sum "
            f"{torch_ceiling:.0f}), measured in the same run. Graph replay, weights rotated past 4x the 60 MB "
            "L2. before: the previous generator at its default launch; after: the coalesced GEMV at "
            "`gemv.launch_shape`'s default (v bytes a load, r rows per warp group, w warps per block, "
            "u unrolled steps, s warps splitting a row). empty: an empty kernel of the same grid, per "
            "launch in a graph of as many launches."
        ),
        "",
        "| kernel | N x K | before us | before | after us | after GB/s | after | empty us | after / empty |"
        + (" best (sweep) |" if args.sweep or tries else ""),
        "|---|---|---|---|---|---|---|---|---|" + ("---|" if args.sweep or tries else ""),
    ]
    for label, wt, n, k, before, after, best, best_spec, floor in rows:
        if label.startswith("torch"):
            ms, gbs, _ = before
            lines.append(f"| {label} | {n} x {k} | | | {ms * 1e3:.1f} | {gbs:.0f} | {gbs / ceiling:.1%} | | |" + (" |" if args.sweep or tries else ""))
            continue
        act = "f32" if "dequant" in label else "int8"
        b = f"{before[0] * 1e3:.1f} | {before[1] / ceiling:.1%}" if before else " | "
        a = f"{after[0] * 1e3:.1f} | {after[1]:.0f} | {after[1] / ceiling:.1%}" if after else "failed | | "
        ratio = f"{after[0] / floor:.2f}" if after else ""
        line = f"| {label} {gemv.Shape(*astuple(gemv.block_shape(wt, n, k, act))).tag} | {n} x {k} | {b} | {a} | {floor * 1e3:.1f} | {ratio} |"
        if args.sweep or tries:
            line += f" {gemv.Shape(*best_spec[5]).tag}: {best[1] / ceiling:.1%} |" if best else " |"
        lines.append(line)
    return print_table(lines, args.results)


if __name__ == "__main__":
    raise SystemExit(main())
