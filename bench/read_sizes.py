"""The read ceiling at a launch's size: how fast one launch can read N bytes from HBM, against the
2 GiB streaming read that `bench/gemv.py` calls the read ceiling, and the GEMVs of those bytes.

    python bench/read_sizes.py [--small] [--reps 20] [--results bench/RESULTS.md] [--json FILE]

For each size (the bytes of a Q8_0 GEMV in fwdshim's layout: quants and f32 scales; Llama-3-8B's
4096x4096, 6144x4096 (Q/K/V), 14336x4096, 4096x14336 and 2x14336x4096 (gate/up), and SmolLM2's
1536x576; with `--small` all of SmolLM2's: 576x576, 192x576, 1536x576, 576x1536), a streaming-read kernel (16-byte loads, `unroll` in flight a thread, a grid of
`blocks` x `threads` looping over the bytes) reads one copy of the bytes a launch; the copies are
taken in turn, enough of them to pass 4x the 60 MB L2 (as `bench/gemv.py` rotates its weights),
in a cuda.core graph of at least 64 launches replayed `reps` times. Every grid of `GRIDS` is timed
and the best reported, with torch's sum over the same bytes (a captured torch graph of the same
launches) and the default GEMVs of `bench/gemv.py` (dequant and int8-act, their activation bytes
included), and an empty kernel of the best read's grid in a graph of as many launches (issue 12's
launch floor). Shares are GB/s over the 2 GiB ceiling, in brackets a GEMV's over the best read of
its size. Issue 12's GEMV targets (90 % of the ceiling at 14336x4096 and 4096x14336, 80 % at
4096x4096) ask for shares no read of those sizes may reach: this measures what a launch of that
many bytes can.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from dataclasses import astuple
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemv import (
    Timer,
    Weights,
    copies_for,
    empty_ms,
    gpu_ceiling,
    kernel_for,
    launches_for,
    print_table,
    require_gpu,
    time_kernel,
    torch_replay_ms,
)

from fwdshim.tools.timing import read_times

SHAPES = [(1536, 576), (4096, 4096), (6144, 4096), (14336, 4096), (4096, 14336), (2 * 14336, 4096)]
"""(N, K) of the GEMVs whose bytes are read: SmolLM2's gate or up, Llama-3-8B's O, Q/K/V, gate or up,
down, gate and up together."""
SMALL = [(576, 576), (192, 576), (1536, 576), (576, 1536)]
"""SmolLM2's GEMVs (`--small`): O, K or V, gate or up, down."""

GRIDS = [(132 * b, t, u) for t in (256, 512) for b in (1, 2, 4, 8) for u in (2, 4, 8) if b * t <= 2048]
"""(blocks, threads, unroll) of the reads timed at every size (132 SMs on an H200)."""
SMALL_GRIDS = [(b, t, u) for b in (16, 33, 66) for t in (128, 256) for u in (1, 2)]
"""More for reads under `SMALL_BYTES`: fewer blocks, one or two loads in flight."""
SMALL_BYTES = 4 * 2**20


def bench_size(timer, nbytes: int, reps: int) -> dict:
    """Best and every grid's GB/s of reading `nbytes` (a multiple of 16) a launch, and torch's sum."""
    import torch
    from numba import cuda

    words = nbytes // 4
    copies = copies_for(nbytes)
    launches = launches_for(copies)
    stride = -(-words // 64) * 64
    t = torch.randint(-(2**31), 2**31 - 1, (stride * copies,), device="cuda", dtype=torch.int32)
    flat = cuda.as_cuda_array(t)
    bufs = [flat[c * stride : c * stride + words] for c in range(copies)]
    grid_list = GRIDS + (SMALL_GRIDS if nbytes < SMALL_BYTES else [])
    times = read_times(bufs, words, grid_list, launches, lambda record: timer.replay_ms(timer.graph(record), reps) / launches)
    grids = {f"{b}x{th}u{u}": nbytes / ms / 1e6 for (b, th, u), ms in times.items()}
    fs = [t[c * stride : c * stride + words].view(torch.float32) for c in range(copies)]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    sums = torch.empty(launches, device="cuda")
    with torch.cuda.stream(s):
        for c in range(copies):
            torch.sum(fs[c], dim=0, out=sums[c])
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(launches):
            torch.sum(fs[i % copies], dim=0, out=sums[i])
    torch_gbs = nbytes / torch_replay_ms(g, reps, launches) / 1e6
    del t, flat, bufs, fs, g
    torch.cuda.empty_cache()
    best = max(grids, key=grids.get)
    blocks, threads = (int(v) for v in best.split("u")[0].split("x"))
    empty = empty_ms(timer, blocks, threads, launches, reps)
    return {"bytes": nbytes, "grids": grids, "best": best, "best_gbs": grids[best], "torch_gbs": torch_gbs,
            "empty_us": empty * 1e3}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--small", action="store_true", help="SmolLM2's GEMV shapes (all four) before Llama-3-8B's")
    ap.add_argument("--reps", type=int, default=20, help="graph replays timed per kernel (default 20)")
    ap.add_argument("--results", type=Path, help="append the table to this markdown file")
    ap.add_argument("--json", type=Path, help="write every timing to this JSON file")
    args = ap.parse_args(argv)
    if args.reps < 1:
        ap.error("--reps is at least 1")
    require_gpu(ap)
    from fwdshim.codegen import gemv

    timer = Timer()
    gpu, ceiling = gpu_ceiling(timer, args.reps)
    print(f"GPU {gpu}; read ceiling {ceiling:.0f} GB/s (2 GiB)", flush=True)
    rng = np.random.default_rng(0)
    rows, records = [], []
    for n, k in ([s for s in SMALL if s not in SHAPES] if args.small else []) + SHAPES:
        nbytes = n * k + n * (k // 32) * 4
        r = bench_size(timer, nbytes, args.reps)
        gemvs = {}
        w = Weights(n, k, rng)
        for act in ("f32", "int8"):
            shape = astuple(gemv.launch_shape(n, k, act))
            kern = kernel_for((n, k, act, "after", shape))
            ms = time_kernel(timer, kern, w, act, args.reps)
            gemvs[act] = (gemv.Shape(*shape).tag, w.nbytes(act) / ms / 1e6)
        r.update(n=n, k=k, gemvs=gemvs)
        records.append(r)
        print(f"{n}x{k} ({nbytes / 1e6:.1f} MB): best read {r['best']} {r['best_gbs']:.0f} GB/s "
              f"({r['best_gbs'] / ceiling:.1%}); torch sum {r['torch_gbs'] / ceiling:.1%}; "
              + "; ".join(f"{a} {tag} {g / ceiling:.1%}" for a, (tag, g) in gemvs.items()), flush=True)
        us = nbytes / r["best_gbs"] / 1e3
        cells = " | ".join(f"{g / ceiling:.1%} ({g / r['best_gbs']:.1%}), {w.nbytes(a) / g / 1e3:.2f}"
                           for a, (_, g) in gemvs.items())
        rows.append(f"| {n} x {k} | {nbytes / 1e6:.2f} | {r['best_gbs'] / ceiling:.1%} (`{r['best']}`), {us:.2f} | "
                    f"{r['empty_us']:.2f} ({us / r['empty_us']:.1f}x) | {r['torch_gbs'] / ceiling:.1%} | {cells} |")
    if args.json:
        args.json.write_text(json.dumps({"gpu": gpu, "ceiling": ceiling, "records": records}, indent=1))
    lines = [
        f"### {datetime.date.today()} — {gpu} — `bench/read_sizes.py`",
        "",
        (f"Read ceiling {ceiling:.0f} GB/s (the 2 GiB streaming read), measured in the same run. Each size read "
         "a launch from copies rotated past 4x the 60 MB L2, graph replay; share of the ceiling (and, for the "
         "GEMVs, of the best read of their size), then µs a launch; `empty`: an empty kernel of the best read's "
         "grid, and the best read's time over it."),
        "",
        ("| bytes of | MB | best read (blocks x threads, unroll), µs | empty µs (read / empty) | torch sum "
         "| Q8_0 dequant GEMV, µs | Q8_0 int8-act GEMV, µs |"),
        "|---|---|---|---|---|---|---|",
        *rows,
    ]
    return print_table(lines, args.results)


if __name__ == "__main__":
    sys.exit(main())
