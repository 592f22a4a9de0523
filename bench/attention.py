"""The decode attention on a GPU: `fwdshim.codegen.attention` at its default launch and at the launch
shapes of a sweep (threads a block, positions a lane a step, splits a head), against the bytes it
must read, an empty kernel of the same grid and torch's `scaled_dot_product_attention` (f32, GQA).

    python bench/attention.py [--shapes smollm2,llama8b] [--fill 512] [--context 1024] [--sweep]
                              [--try b256u4s16,...] [--reps 20] [--jobs 8] [--stages] [--tuning KEY=VALUE ...]
                              [--json FILE] [--results FILE]

Shapes: `smollm2` (9 query heads over 3 kv heads of 64), `llama8b` (32 over 8 of 128) and the probe
`llama8b_kv` (8 over 8 of 128: a kv head's grid and bytes, `SHAPES`), a cache of
`context - 1` rows holding `fill` of them (the kernel reads `pos = fill` from the device). Each
kernel is timed by graph replay over copies of the caches passing 4x the 60 MB L2 (each launch reads
its rows from HBM), at least 64 launches a graph. Bytes: the `fill` K and V rows of every kv head
once, the current q, k, v, and y written; GB/s over the time a launch. Each result is checked against
a NumPy float64 attention (max abs error printed; a variant over 1e-4 is marked). `--quant` also
times the int8-act form (y quantized, `one_word`, as the int8-act plans launch it). A tag `b128u4s9`:
128 threads, 4 positions a lane a step, 9 splits a head (`b128u4s17o5`: and launch bounds of 5 blocks an
SM, `o0` none; without `o` the kernel's default, `attention.MIN_BLOCKS`). `--stages` also stamps the
default launch's stages (`bench/stages.py`) in one plain launch after warm-up: how long each takes a
block, and when. `--tuning KEY=VALUE` builds every kernel under that `Tuning` field (in the compiling
processes too), as `bench/decode_step.py --tuning` does. `--results` appends the table to
a markdown file with the date and the GPU; `--json` writes every timing.
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
from multiprocessing import get_context
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

SHAPES = {"smollm2": (9, 3, 64), "llama8b": (32, 8, 128), "llama8b_kv": (8, 8, 128)}
"""(query heads, kv heads, head width) of each shape. `llama8b_kv` is a probe, not a model: Llama-3-8B's
eight kv heads with a query head each — the grid and bytes a kernel taking a kv head's query heads
together in one block would have (its time a bound on what such grouping could save)."""
L2_BYTES = 60 * 2**20
MIN_LAUNCHES = 64
_TAG = re.compile(r"b(\d+)u(\d+)s(\d+)(?:o(\d+))?$")


def parse_tag(tag: str) -> tuple[int, int, int, int | None]:
    """(block, unroll, splits, min_blocks) of a tag such as `b128u4s9` or `b128u4s17o5` (launch bounds
    of at least 5 blocks an SM; `o0` none; without `o` the kernel's default); ValueError otherwise."""
    m = _TAG.match(tag)
    if not m or min(int(g) for g in m.groups()[:3]) < 1:
        raise ValueError(f"`{tag}` is not an attention launch tag (b<threads>u<unroll>s<splits>[o<blocks an SM>], e.g. b128u4s9)")
    b, u, s, o = m.groups()
    return int(b), int(u), int(s), None if o is None else int(o)


def tag(launch: tuple) -> str:
    """The tag of a (block, unroll, splits, min_blocks) launch (`parse_tag`'s inverse)."""
    b, u, s, o = launch
    return f"b{b}u{u}s{s}" + ("" if o is None else f"o{o}")


def default_launch(h: int, kv: int, hd: int, l: int) -> tuple[int, int, int, None]:  # noqa: E741
    """The (block, unroll, splits, min_blocks) the plan launches the attention with (None: the
    kernel's default launch bounds)."""
    from fwdshim.codegen import attention as A

    block = A.default_block(hd, l)
    return block, A.default_unroll(hd), A.default_splits(h, hd, l, block), None


def sweep_launches(h: int, kv: int, hd: int, l: int) -> list[tuple[int, int, int, None]]:  # noqa: E741
    """Threads 64..512, unroll 1..8, splits for 132..1056 blocks over the heads."""
    out = []
    for block in (64, 128, 256, 512):
        for unroll in (1, 2, 4, 8):
            for blocks in (132, 264, 528, 1056):
                out.append((block, unroll, max(1, -(-blocks // h)), None))
    return out


def kernel_for(spec: tuple):
    """The Kernel of a spec (shape name, l, (block, unroll, splits, min_blocks), quant): `quant` None (y stored) or
    an int8-act format (`one_word`: y quantized, not stored, as the int8-act plans launch it)."""
    from fwdshim.codegen import attention as A

    name, l, (block, unroll, splits, min_blocks), quant = spec
    h, kv, hd = SHAPES[name]
    return A.attention(h, kv, hd, l, quant=quant, store_y=quant is None, block=block, unroll=unroll, splits=splits,
                       min_blocks=min_blocks, tuning=TUNING[0])


def _compile_one(spec: tuple) -> tuple:
    t = time.perf_counter()
    try:
        kern = kernel_for(spec)
        kern.compile()
        return spec, None, time.perf_counter() - t
    except Exception as e:  # noqa: BLE001 - a launch shape that does not build is reported, not fatal
        return spec, f"{type(e).__name__}: {str(e)[:200]}", time.perf_counter() - t


TUNING: list = [None]
"""The `Tuning` every kernel is built under (`--tuning`; set by `apply_settings` in each process)."""


def apply_settings(items: list[str]) -> list[str]:
    """Build every kernel of this process under the `--tuning KEY=VALUE` items (`decode_step.tuning_of`;
    ValueError, one line); `items`."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from decode_step import tuning_of

    TUNING[0] = tuning_of(items)
    return items


def precompile(specs: list[tuple], jobs: int, settings: list[str] = ()) -> dict[tuple, tuple]:
    """Compile every spec in `jobs` fresh processes (Numba's disk cache keeps the results), each with
    `settings` applied first (`apply_settings`)."""
    if jobs <= 1:
        return {s[0]: s[1:] for s in map(_compile_one, specs)}
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn"), initializer=apply_settings, initargs=(list(settings),)) as ex:
        return {s[0]: s[1:] for s in ex.map(_compile_one, specs, chunksize=2)}


def reference(q, k, v, kc, vc, c, h, kv, hd) -> np.ndarray:
    """Single-query GQA attention in float64: `[h*hd]` (the kernel's contract, `codegen.attention`)."""
    g = h // kv
    row = kv * hd
    keys = np.concatenate([kc[: c * row].reshape(c, kv, hd), k.reshape(1, kv, hd)]).astype(np.float64)
    vals = np.concatenate([vc[: c * row].reshape(c, kv, hd), v.reshape(1, kv, hd)]).astype(np.float64)
    y = np.empty((h, hd))
    for j in range(h):
        s = keys[:, j // g] @ q.reshape(h, hd)[j].astype(np.float64) / math.sqrt(hd)
        p = np.exp(s - s.max())
        y[j] = (p / p.sum()) @ vals[:, j // g]
    return y.reshape(-1)


class Caches:
    """Copies of random K and V caches of `l - 1` rows (enough to pass 4x L2), q, k, v and `pos`."""

    def __init__(self, h, kv, hd, l, fill, rng):  # noqa: E741
        from numba import cuda

        self.h, self.kv, self.hd, self.l, self.fill = h, kv, hd, l, fill
        row = kv * hd
        per = 2 * (l - 1) * row * 4
        self.copies = max(2, math.ceil(4 * L2_BYTES / per))
        self.kc = [cuda.to_device(rng.standard_normal((l - 1) * row).astype(np.float32)) for _ in range(self.copies)]
        self.vc = [cuda.to_device(rng.standard_normal((l - 1) * row).astype(np.float32)) for _ in range(self.copies)]
        self.q = rng.standard_normal(h * hd).astype(np.float32)
        self.k = rng.standard_normal(row).astype(np.float32)
        self.v = rng.standard_normal(row).astype(np.float32)
        self.dq, self.dk, self.dv = (cuda.to_device(a) for a in (self.q, self.k, self.v))
        self.pos = cuda.to_device(np.array([fill], np.int32))
        self.y = cuda.device_array(h * hd, np.float32)
        self.nbytes = 4 * (2 * fill * row + h * hd + 2 * row + h * hd)
        self.ref = reference(self.q, self.k, self.v, self.kc[0].copy_to_host(), self.vc[0].copy_to_host(), fill, h, kv, hd)

    def scratch(self, kern):
        """The kernel's arrays after `pos`: `y` (when it stores it), then fresh zeroed outputs and scratch."""
        from numba import cuda

        return [self.y if p.name == "y" else cuda.to_device(np.zeros(p.size, np.dtype(p.dtype))) for p in kern.params[6:]]

    def args(self, i, scratch):
        c = i % self.copies
        return (self.dq, self.dk, self.dv, self.kc[c], self.vc[c], self.pos, *scratch)


def launches_for(copies: int) -> int:
    return copies * -(-MIN_LAUNCHES // copies)


def time_kernel(timer, kern, caches: Caches, reps: int) -> tuple[float, float]:
    """(ms a launch by graph replay, max abs error of y against the float64 reference)."""
    from numba import cuda

    scratch = caches.scratch(kern)
    kern.launch(*caches.args(0, scratch))
    cuda.synchronize()
    names = [p.name for p in kern.params[6:]]
    if "y" in names:
        y = caches.y.copy_to_host().astype(np.float64)
    else:  # one_word: int8 values and a float32 scale a 32-value block
        yq = scratch[names.index("yq")].copy_to_host().astype(np.float64)
        yd = scratch[names.index("yd")].copy_to_host().astype(np.float64)
        y = (yq.reshape(-1, 32) * yd.reshape(-1, 1)).reshape(-1)
    err = float(np.abs(y - caches.ref).max())
    launches = launches_for(caches.copies)

    def record(builder):
        for i in range(launches):
            kern.launch(*caches.args(i, scratch), stream=builder)

    return timer.replay_ms(timer.graph(record), reps) / launches, err


def stage_rows(kern, caches: Caches, warm: int = 8) -> list[dict]:
    """`kern` stamped at `stages.ATTENTION_STAGES` (`bench/stages.py`): `warm` plain launches over the
    cache copies, then one more, the GPU idle before it, whose stamps `stages.summarize` reads."""
    import stages
    from numba import cuda

    stamped = stages.instrument(kern)
    names = ["entry", *(st.name for st in stages.ATTENTION_STAGES)]
    scratch = caches.scratch(kern)
    size = stamped.params[-1].size
    marks = [cuda.to_device(np.zeros(size, np.int64)) for _ in range(2)]
    for i in range(warm + 1):
        if i == warm:
            cuda.synchronize()
            marks = [cuda.to_device(np.zeros(size, np.int64)) for _ in range(2)]
        stamped.launch(*caches.args(i, scratch), *marks)
    cuda.synchronize()
    return stages.summarize(marks[0].copy_to_host(), marks[1].copy_to_host(), names)


def bench_torch(caches: Caches, reps: int) -> float | None:
    """ms a launch of torch's f32 `scaled_dot_product_attention` (enable_gqa) over the same rows, graph
    replay over the same number of cache copies; None where this torch has no GQA attention."""
    import torch
    import torch.nn.functional as F

    h, kv, hd, c = caches.h, caches.kv, caches.hd, caches.fill + 1
    ks = [torch.randn(1, kv, c, hd, device="cuda") for _ in range(caches.copies)]
    vs = [torch.randn(1, kv, c, hd, device="cuda") for _ in range(caches.copies)]
    q = torch.randn(1, h, 1, hd, device="cuda")
    launches = launches_for(caches.copies)
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for i in range(3):
                F.scaled_dot_product_attention(q, ks[i], vs[i], enable_gqa=True)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i in range(launches):
                F.scaled_dot_product_attention(q, ks[i % caches.copies], vs[i % caches.copies], enable_gqa=True)
    except (TypeError, RuntimeError) as e:
        print(f"torch peer left out: {type(e).__name__}: {str(e)[:120]}")
        return None
    from gemv import torch_replay_ms

    ms = torch_replay_ms(graph, reps, launches)
    del ks, vs, graph
    torch.cuda.empty_cache()
    return ms


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--shapes", default="smollm2,llama8b", help="comma-separated: smollm2, llama8b, llama8b_kv (a probe)")
    ap.add_argument("--fill", type=int, default=512, help="cache rows written (default 512)")
    ap.add_argument("--context", type=int, default=1024, help="positions the cache holds plus one (default 1024)")
    ap.add_argument("--sweep", action="store_true", help="also time sweep_launches' launch shapes")
    ap.add_argument("--try", dest="tries", help="launch tags to time too, e.g. b256u4s16,b512u2s8")
    ap.add_argument("--reps", type=int, default=20, help="graph replays timed a kernel (default 20)")
    ap.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1), help="processes compiling first")
    ap.add_argument("--no-torch", action="store_true", help="leave out torch's attention")
    ap.add_argument("--quant", action="store_true", help="also the int8-act form (y quantized one_word, not stored)")
    ap.add_argument("--stages", action="store_true",
                    help="also stamp the default launch's stages (bench/stages.py: the global timer and the SM's cycles at "
                         "each stage, thread 0 of every block) in one launch after warm-up, and print where its time goes")
    ap.add_argument("--tuning", action="append", default=[], metavar="KEY=VALUE",
                    help="build every kernel under this Tuning field (repeatable; fwdshim.codegen.tuning), e.g. "
                         "combine_registers=0; the table's heading says so")
    ap.add_argument("--json", type=Path, help="write every timing to this JSON file")
    ap.add_argument("--results", type=Path, help="append the table to this markdown file")
    args = ap.parse_args(argv)
    names = [s for s in args.shapes.split(",") if s]
    bad = [s for s in names if s not in SHAPES]
    if bad or not names:
        ap.error(f"--shapes: unknown shape {', '.join(map(repr, bad)) or '(none)'} (known: {', '.join(SHAPES)})")
    try:
        tries = [parse_tag(t) for t in (args.tries or "").split(",") if t]
    except ValueError as e:
        ap.error(f"--try: {e}")
    if not 0 <= args.fill < args.context:
        ap.error(f"--fill {args.fill}, --context {args.context}: needs 0 <= fill < context")
    if args.jobs < 1 or args.reps < 1:
        ap.error("--jobs and --reps are at least 1")
    try:
        apply_settings(args.tuning)
    except ValueError as e:
        ap.error(str(e))
    from gemv import Timer, empty_ms, gpu_ceiling, print_table, require_gpu

    require_gpu(ap)
    l = args.context  # noqa: E741
    specs = []
    for name in names:
        h, kv, hd = SHAPES[name]
        launches = [default_launch(h, kv, hd, l)] + (sweep_launches(h, kv, hd, l) if args.sweep else []) + tries
        for quant in (None, "one_word") if args.quant else (None,):
            specs += [(name, l, t, quant) for t in dict.fromkeys(launches)]
    t = time.perf_counter()
    compiled = precompile(specs, args.jobs, args.tuning)
    failed = {s: v[0] for s, v in compiled.items() if v[0]}
    print(f"compiled {len(specs)} kernels in {time.perf_counter() - t:.1f} s ({args.jobs} processes); {len(failed)} did not build")

    rng = np.random.default_rng(0)
    timer = Timer()
    gpu, ceiling = gpu_ceiling(timer, args.reps)
    print(f"GPU {gpu}; read ceiling {ceiling:.0f} GB/s")
    records, rows, staged = [], [], []
    for name in names:
        h, kv, hd = SHAPES[name]
        caches = Caches(h, kv, hd, l, args.fill, rng)
        floor_us = caches.nbytes / ceiling / 1e3
        res, quant_res = {}, {}
        for spec in specs:
            if spec[0] != name or spec in failed:
                continue
            kern = kernel_for(spec)
            kern.compile()
            ms, err = time_kernel(timer, kern, caches, args.reps)
            if spec[3]:
                quant_res[spec[2]] = ms
            else:
                res[spec[2]] = (ms, err, kern)
            records.append(dict(shape=name, launch=list(spec[2]), quant=spec[3], us=ms * 1e3, err=err, grid=list(kern.grid)))
        dflt = default_launch(h, kv, hd, l)
        ranked = sorted(res, key=lambda s: res[s][0])
        empty = empty_ms(timer, res[dflt][2].grid, res[dflt][2].block, launches_for(caches.copies), args.reps) if dflt in res else None
        peer = None if args.no_torch else bench_torch(caches, args.reps)
        if args.sweep or tries:
            print(f"{name}: " + "; ".join(f"{tag(t)} {res[t][0] * 1e3:.2f} us" + (" (err!)" if res[t][1] > 1e-4 else "")
                                          for t in ranked[:12]))
        if quant_res:
            print(f"{name} one_word: " + "; ".join(f"{tag(t)} {ms * 1e3:.2f} us" for t, ms in sorted(quant_res.items(), key=lambda kv: kv[1])[:12]))
        rows.append((name, dflt, res.get(dflt), ranked[0] if ranked else None, res, empty, peer, floor_us, caches.nbytes))
        for quant in ((None, "one_word") if args.quant else (None,)) if args.stages else ():
            import stages

            kern = kernel_for((name, l, dflt, quant))
            got = stage_rows(kern, caches)
            records.append(dict(shape=name, launch=list(dflt), quant=quant, stages=got))
            staged += ["", *stages.stage_lines(f"**{name}** `{kern.name}`, fill {args.fill}: one launch, stamped", got)]
            print("\n".join(staged[-len(got) - 4:]))
        del caches
    if args.json:
        args.json.write_text(json.dumps(dict(gpu=gpu, ceiling=ceiling, records=records), indent=1))
    lines = [
        f"### {datetime.date.today().isoformat()} — {gpu} — `bench/attention.py`" + "".join(f" `--tuning {x}`" for x in args.tuning),
        "",
        f"Read ceiling {ceiling:.0f} GB/s (same run). Context {l}, fill {args.fill}; graph replay over cache "
        "copies past 4x L2. floor: the bytes at the read ceiling. empty: an empty kernel of the default's grid.",
        "",
        "| shape | launch | us | GB/s | of ceiling | ÷ floor | max abs err | empty us | best (tag, us) | torch sdpa us | ÷ torch |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, dflt, d, best, res, empty, peer, floor_us, nbytes in rows:
        if d is None:
            lines.append(f"| {name} | {tag(dflt)} | did not build | | | | | | | | |")
            continue
        us = d[0] * 1e3
        b = f"{tag(best)} {res[best][0] * 1e3:.2f}" if best else ""
        p = f"{peer * 1e3:.2f} | {us / (peer * 1e3):.2f}" if peer else " | "
        e = f"{empty * 1e3:.2f}" if empty else ""
        lines.append(f"| {name} | {tag(dflt)} | {us:.2f} | {nbytes / d[0] / 1e6:.0f} | {nbytes / d[0] / 1e6 / ceiling:.1%} | "
                     f"{us / floor_us:.1f} | {d[1]:.1e} | {e} | {b} | {p} |")
    if staged:
        lines += ["", "Stages (`--stages`, `bench/stages.py`): ns since the same block's previous stamp (its SM's cycles), "
                  "and when the stage was reached after the first block's entry.", *staged]
    return print_table(lines, args.results)


if __name__ == "__main__":
    raise SystemExit(main())
