"""GEMV bandwidth of the GGUF block types on a GPU: `fwdshim.codegen.gemv_ggml` (Q4_0, Q4_1, Q5_0,
Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K), dequant and int8-act, at the shapes of `bench/gemv.py` (issue 13,
item 5).

    python bench/gemv_ggml.py [--types q4_1,q4_k] [--warps 2,4,8] [--results bench/RESULTS.md] [--reps 20]

Timing as `bench/gemv.py` (its `Timer`, `copies_for` and `read_ceiling`): graph replay, one launch
per copy of the weights, enough copies to pass 4x the L2. Two byte counts per GEMV: `layout` — what
the kernel reads (its repacked quants, the file's scales, x, y), the base of
GB/s and of the share of the read ceiling — and `file` — the GGUF's own bytes for the same matrix
(x and y included), the base of `file GB/s` (the rate at which the model as shipped is consumed).
The weights are random blocks of each type (`ggml_blocks.random_raw`) repacked by `ggml_blocks.repack`.
`--warps` times each kernel at several warps per block (the first is the default's, 4).
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemv import SHAPES, Timer, copies_for, gpu_ceiling, print_table, require_gpu  # noqa: E402  (bench/gemv.py)
from numba import cuda  # noqa: E402

from fwdshim import ggml_blocks as G  # noqa: E402
from fwdshim.codegen import gemv_ggml  # noqa: E402


def bench_type(timer: Timer, t, n: int, k: int, act: str, warps: int, reps: int, rng) -> tuple[float, int, int]:
    """(ms per GEMV, layout bytes, file bytes) of type `t`'s kernel."""
    kern = gemv_ggml.affine(n, k, ggml=t.name.lower(), act=act, warps=warps)
    raw = G.random_raw(t, n, k, rng)
    parts = list(G.repack(raw, t).values())  # in the kernel's parameter order
    nc = k // 32
    xbytes = 4 * k if act == "f32" else k + 4 * nc
    wbytes = sum(a.nbytes for a in parts)
    copies = copies_for(wbytes)
    ws = [[cuda.to_device(a) for a in parts] for _ in range(copies)]
    if act == "f32":
        xs = [cuda.to_device(rng.standard_normal(k).astype(np.float32))]
    else:
        xs = [cuda.to_device(rng.integers(-127, 128, size=k, dtype=np.int8)), cuda.to_device(rng.random(nc).astype(np.float32))]
    y = cuda.device_array(n, np.float32)
    kern.launch(*ws[0], *xs, y)  # compiles before the capture
    cuda.synchronize()

    def record(builder):
        for c in range(copies):
            kern.launch(*ws[c], *xs, y, stream=builder)

    ms = timer.replay_ms(timer.graph(record), reps) / copies
    return ms, wbytes + xbytes + 4 * n, raw.nbytes + xbytes + 4 * n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--types", default=",".join(t.name.lower() for t in G.AFFINE), help=f"GGML types, comma-separated (default: {','.join(t.name.lower() for t in G.AFFINE)})")
    ap.add_argument("--warps", default="4", help="warps per block to time, comma-separated (first: the default)")
    ap.add_argument("--results", type=Path, help="append the table to this markdown file")
    ap.add_argument("--reps", type=int, default=20, help="graph replays timed per kernel (default 20)")
    args = ap.parse_args(argv)
    unknown = [s for s in args.types.split(",") if s.lower() not in {t.name.lower() for t in G.AFFINE}]
    if unknown:
        ap.error(f"--types: unknown GGML type(s) {', '.join(unknown)} (known: {', '.join(t.name.lower() for t in G.AFFINE)})")
    if not all(w.strip().isdigit() and int(w) >= 1 for w in args.warps.split(",")):
        ap.error(f"--warps {args.warps!r}: whole numbers of warps, comma-separated")
    require_gpu(ap)
    types = [G.QT[s.upper()] for s in args.types.split(",")]
    warps = [int(w) for w in args.warps.split(",")]
    rng = np.random.default_rng(0)
    timer = Timer()
    gpu, ceiling = gpu_ceiling(timer, args.reps)
    print(f"GPU {gpu}; read ceiling {ceiling:.0f} GB/s", flush=True)
    rows = []
    for t in types:
        for n, k in SHAPES:
            for act, label in (("f32", "dequant"), ("int8", "int8-act")):
                best = None
                for w in warps:
                    ms, lb, fb = bench_type(timer, t, n, k, act, w, args.reps, rng)
                    print(f"  {t.name} {label} {n}x{k} w{w}: {ms * 1e3:7.1f} us {lb / ms / 1e6:6.0f} GB/s", flush=True)
                    if best is None or ms < best[0]:
                        best = (ms, lb, fb, w)
                ms, lb, fb, w = best
                rows.append((f"{t.name} {label} w{w}", n, k, ms, lb / ms / 1e6, fb / ms / 1e6))
    lines = [
        f"### {datetime.date.today().isoformat()} — {gpu} — `bench/gemv_ggml.py`",
        "",
        f"Read ceiling {ceiling:.0f} GB/s (as `bench/gemv.py`). GB/s over the bytes the kernel reads (its "
        "layout: quants, the file's scales, x, y); file GB/s over the GGUF's own bytes.",
        "",
        "| kernel | N x K | us | GB/s | of ceiling | file GB/s |",
        "|---|---|---|---|---|---|",
    ]
    for label, n, k, ms, gbs, fgbs in rows:
        lines.append(f"| {label} | {n} x {k} | {ms * 1e3:.1f} | {gbs:.0f} | {gbs / ceiling:.1%} | {fgbs:.0f} |")
    return print_table(lines, args.results)


if __name__ == "__main__":
    raise SystemExit(main())
