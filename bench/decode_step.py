"""One SmolLM2-shaped decode step on a GPU: per-step time, its host part, and the attention kernel.

    python bench/decode_step.py [--fills 1000,4000] [--steps 40] [--check] [--sweep] [--json FILE]

The model is random (`export.random_llama`) with SmolLM2-135M's shape: 30 layers, d 576, 9
heads over 3 kv heads of 64, ff 1536, vocab 49152 (tied embedding, Q8_0 projections), context 4096,
decoded by `runner.Decoder` on the GPU (numerics `--numerics`, default dequant, as `fwdshim run`).
For each cache fill F the decoder is set to position F (the caches' contents do not change the
time) and `--steps` tokens are decoded:

- `step us`: wall time of `Decoder.step` (embedding row, angles, uploads, graph launch, logits back);
- `graph us`: the captured graph alone, replayed back to back at cache length F (GPU time per step);
- `host us`: their difference, the host overhead per step;
- `attention us`: the plan's attention launch in a graph of 16 launches, each over its own copy of
  the caches (100 MB in all, past the 60 MB L2, as 30 layers are in a step), at cache length F.

`--check` first decodes 3 tokens on the GPU and on the CPU executor and prints their relative
difference. `--sweep` times other attention launch shapes (threads per block, unroll) at the last fill.
`FWDSHIM_SRC` (a folder holding `fwdshim/`) picks the implementation, e.g. an older checkout, so one
script measures before and after. Prints one JSON object per measurement (and appends them to `--json`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.environ.get("FWDSHIM_SRC") or str(Path(__file__).resolve().parent.parent))

SMOL = dict(n_layer=30, d=576, ff=1536, h=9, kv=3, hd=64, rope_dim=64, rope_base=100000.0, eps=1e-5, vocab=49152)


def emit(out: list, **rec) -> None:
    print(json.dumps(rec), flush=True)
    out.append(rec)


def model(context: int):
    from fwdshim.frontend.export import random_llama, write_llama
    from fwdshim.frontend.gguf_model import LlamaParams
    from fwdshim.frontend.importer import import_gguf

    p = LlamaParams(**SMOL)
    path = Path(tempfile.gettempdir()) / "fwdshim_bench" / "smol_shape.gguf"
    if not path.exists():
        write_llama(path, p, random_llama(p, seed=1))
    return import_gguf(path, context=context)


def graph_of(dev, record):
    gb = dev.create_graph_builder()
    gb.begin_building()
    record(gb)
    gb.end_building()
    return gb.complete()


def replay_us(rt, graph, reps: int, per: int = 1) -> float:
    graph.launch(rt.stream)
    rt.sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        graph.launch(rt.stream)
    rt.sync()
    return 1e6 * (time.perf_counter() - t0) / (reps * per)


def attention_us(rt, kernel, args: tuple, fill: int, copies: int = 16, reps: int = 10) -> float:
    """One attention launch's time: a graph of `copies` launches, each over its own caches."""
    from numba import cuda

    names = [p.name for p in kernel.params]
    ik, iv = names.index("k_cache"), names.index("v_cache")
    rng = np.random.default_rng(0)
    host = rng.standard_normal(args[ik].size).astype(np.float32)
    sets = []
    for _ in range(copies):
        a = list(args)
        a[ik], a[iv] = cuda.to_device(host), cuda.to_device(host)
        sets.append(tuple(a))
    rt.set_cache_len(fill)
    kernel.fn[kernel.grid, kernel.block, rt.stream](*sets[0])  # compiled and loaded before the capture
    rt.sync()

    def record(gb):
        for a in sets:
            kernel.fn[kernel.grid, kernel.block, gb](*a)

    return replay_us(rt, graph_of(rt.device, record), reps, copies)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fills", default="1000,4000")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--numerics", default="dequant")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--label", default="")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    out: list = []
    from fwdshim.tools.runner import Decoder

    m = model(4096)
    t0 = time.perf_counter()
    dec = Decoder(m, args.numerics, "gpu")
    rt = dec.forward.runtime
    emit(out, label=args.label, what="compile", s=round(time.perf_counter() - t0, 2), kernels=rt.plan.kernel_count,
         graph_nodes=rt.graph_kernel_nodes)  # fmt: skip
    if args.check:
        cpu = Decoder(m, args.numerics, "cpu")
        errs = []
        for tok in (5, 123, 4567):
            g, c = dec.step(tok), cpu.step(tok)
            errs.append(float(np.linalg.norm(g - c) / np.linalg.norm(c)))
        emit(out, label=args.label, what="check", rel_err=errs, argmax_equal=bool(np.argmax(g) == np.argmax(c)))
    att = next(i for i, launch in enumerate(rt.plan.launches) if launch.name.startswith("attention"))
    launch = rt.plan.launches[att]
    fills = [int(f) for f in args.fills.split(",")]
    for fill in fills:
        dec.pos = fill
        for _ in range(3):
            dec.step(7)
        t0 = time.perf_counter()
        for i in range(args.steps):
            dec.step(100 + i)
        step = 1e6 * (time.perf_counter() - t0) / args.steps
        prof = {}
        fwd = dec.forward
        if hasattr(fwd, "profile"):
            fwd.profile = True
            dec.pos = fill
            parts: dict[str, float] = {}
            for i in range(args.steps):
                dec.step(100 + i)
                for k, v in fwd.timings.items():
                    parts[k] = parts.get(k, 0.0) + 1e6 * v / args.steps
            fwd.profile = False
            prof = {k: round(v, 1) for k, v in parts.items()}
        rt.set_cache_len(fill)
        graph = replay_us(rt, rt.graph, 20)
        a_us = attention_us(rt, launch.kernel, rt._args[att], fill)
        emit(out, label=args.label, what="step", fill=fill, step_us=round(step, 1), graph_us=round(graph, 1),
             host_us=round(step - graph, 1), tokens_per_s=round(1e6 / step, 1), attention=launch.name,
             attention_us=round(a_us, 2), host_parts_us=prof)  # fmt: skip
        if args.sweep and fill == fills[-1]:
            from fwdshim.codegen import attention

            p = dec.params
            for block in (512, 1024):
                for unroll in (2, 4, 8):
                    k = attention.attention(p.h, p.kv, p.hd, 4096, block=block, unroll=unroll)
                    emit(out, label=args.label, what="sweep", fill=fill, block=block, unroll=unroll,
                         attention_us=round(attention_us(rt, k, rt._args[att], fill), 2))  # fmt: skip
    if args.json:
        with open(args.json, "a") as f:
            for rec in out:
                f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
