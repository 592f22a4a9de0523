"""Where the compile time of `fwdshim run` goes (issue 12): one process, its phases timed.

    python bench/compile_time.py --model smollm2 [--numerics dequant] [--context 4096] [--json FILE]

Phases, in the order `fwdshim run` meets them: `import` (numba's CUDA target, fwdshim, xDSL),
`model` (the GGUF import: header, tensors, the cached sidecar), `passes` (`forward-shim{numerics}`),
`plan` (the launch plan: every kernel's source generated, written to the kernel cache and imported),
`kernels` (each distinct kernel compiled for the device: Numba typing, NVVM, ptxas — or Numba's disk
cache loaded when the kernel cache holds them), `runtime` (weights uploaded, the stages run once,
the graph captured), `first step`. Run it twice: the first run with an empty `$FWDSHIM_CACHE/kernels`
is the cold compile, the second the warm one. Under Numba's CUDA simulator the `kernels` and
`runtime` phases are skipped (no device). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--model", default="smollm2", help="smollm2 (fetched into the cache) or a GGUF file (default smollm2)")
    ap.add_argument("--numerics", default="dequant", choices=("dequant", "int8-act", "two-pass-int8"), help="default dequant")
    ap.add_argument("--context", type=int, default=None, help="the attention's capacity (default: as `fwdshim run`)")
    ap.add_argument("--json", type=Path, help="also write the JSON object to this file")
    args = ap.parse_args(argv)
    from numba import cuda

    if not cuda.is_available():
        ap.exit(1, f"{ap.prog}: no CUDA GPU here (the benchmarks time kernels on a device; the tests run without one)\n")
    t: dict[str, float] = {}
    t0 = time.perf_counter()
    from numba import cuda  # noqa: F401

    from fwdshim.codegen.device import simulating
    from fwdshim.codegen.kernel_cache import cache_dir
    from fwdshim.frontend.cache import resolve_model
    from fwdshim.frontend.importer import import_gguf
    from fwdshim.tools.runner import _func, compile_step

    t["import"] = time.perf_counter() - t0
    s = time.perf_counter()
    from fwdshim.frontend.gguf_model import ModelError

    try:
        model = import_gguf(resolve_model(args.model), requantize="q8_0", context=args.context)
    except ModelError as e:  # a missing, damaged or unsupported model, a bad --context: `fwdshim run`'s line
        ap.exit(1, f"{ap.prog}: error: {e}\n")
    t["model"] = time.perf_counter() - s
    s = time.perf_counter()
    module = compile_step(model, args.numerics)
    t["passes"] = time.perf_counter() - s
    s = time.perf_counter()
    from fwdshim.codegen.plan import plan_for

    plan = plan_for(_func(module))
    t["plan"] = time.perf_counter() - s
    if not simulating():
        cached = len(list(cache_dir().glob("**/*.nbi")))
        s = time.perf_counter()
        for k in plan.kernels():
            k.compile()
        t["kernels"] = time.perf_counter() - s
        s = time.perf_counter()
        from fwdshim.codegen.runtime import CompiledForward, DeviceMemoryError

        try:
            rt = CompiledForward(_func(module), model.weights, plan=plan)
        except DeviceMemoryError as e:  # a step larger than the device: one line, as `fwdshim run` says it
            ap.exit(1, f"{ap.prog}: {e}\n")
        t["runtime"] = time.perf_counter() - s
        s = time.perf_counter()
        import numpy as np

        first = [np.zeros(rt.plan.buffer(n).shape, np.float32) for n in rt.plan.inputs[:2]]  # x, angles
        rt.step(first, 0)
        rt.sync()
        t["first step"] = time.perf_counter() - s
    else:
        cached = None
    total = time.perf_counter() - t0
    rec = {
        "model": args.model, "numerics": args.numerics, "launches": plan.kernel_count, "kernels": len(plan.kernels()),
        "numba cache index files before": cached, "seconds": {k: round(v, 3) for k, v in t.items()}, "total": round(total, 3),
    }  # fmt: skip
    print(json.dumps(rec))
    if args.json:
        with args.json.open("a") as f:
            f.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
