"""Instructions per weight byte of the block-type GEMVs, from their PTX (issue 40, item 3).

    python bench/instructions.py [--types q4_k,q6_k,q4_1] [--shape 4096x4096] [--results bench/RESULTS.md]
    python bench/instructions.py --sass [--ptxas PATH] [--cuobjdump PATH]

`--sass` counts the machine code instead: the PTX assembled by `ptxas -arch=sm_90 -O3` and listed
by `cuobjdump -sass` (both from a CUDA toolkit, or PyPI's `nvidia-cuda-nvcc-cu12` and
`nvidia-cuda-cuobjdump`; no GPU needed), every instruction but `NOP` — for kernels without loops
(the coalesced family's steps written out, as at 4096 columns); a kernel with a loop is an error.

Each kernel is compiled to PTX for sm_90 (`numba.cuda.compile_ptx`: NVVM and NVRTC, no GPU needed;
under the simulator there is no PTX) and its instructions are
counted as one thread executes them: straight-line code once, a loop's body (the instructions between
a label and the branch back to it) once per trip, the trip count that thread's share of the row's
pieces (the coalesced family writes its steps out at 4096 columns, so there its count is static).
Divided by the weight bytes the
thread reads (quants, bit planes and scales of its pieces, every row it holds): instructions per
weight byte, the cost a dequantizing GEMV must keep under what the SMs issue while HBM delivers the
bytes. PTX, not SASS: `ptxas` may merge or split some, the same way for both kernels.
"""

from __future__ import annotations

import argparse
import datetime
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

_LABEL = re.compile(r"^\s*(\$?[\w$]+):\s*$")
_BRA = re.compile(r"\bbra(?:\.uni)?\s+(\$?[\w$]+);")


def ptx_counts(ptx: str) -> tuple[int, list[int]]:
    """(instructions outside loops, each loop's body instructions) of a PTX function: an instruction
    is a line ending in `;` that is not a directive (`.reg`, `.param`, ...); a loop is a branch to a
    label above it."""
    body = ptx[ptx.index("{") :]
    lines = [ln.strip() for ln in body.splitlines()]
    labels: dict[str, int] = {}
    index = []  # (line number, is instruction)
    for i, ln in enumerate(lines):
        m = _LABEL.match(ln)
        if m:
            labels[m.group(1)] = i
        index.append(ln.endswith(";") and not ln.startswith((".", "//")))
    loops = []
    in_loop = [False] * len(lines)
    for i, ln in enumerate(lines):
        m = _BRA.search(ln)
        if m and m.group(1) in labels and labels[m.group(1)] < i:
            a = labels[m.group(1)]
            loops.append(sum(index[a : i + 1]))
            for j in range(a, i + 1):
                in_loop[j] = True
    straight = sum(1 for i, f in enumerate(index) if f and not in_loop[i])
    return straight, loops


_SASS = re.compile(r"^\s+/\*[0-9a-f]{4}\*/\s+([^;]*);", re.M)


def sass_count(ptx: str, ptxas: str, cuobjdump: str) -> int:
    """The SASS instructions (but `NOP`) of a loop-free PTX module for sm_90; ValueError for a kernel
    with a backward branch (a loop: its count would not be per thread), other than the final
    self-branch after `EXIT`."""
    with tempfile.TemporaryDirectory() as d:
        src, obj = Path(d) / "k.ptx", Path(d) / "k.cubin"
        src.write_text(ptx)
        subprocess.run([ptxas, "-arch=sm_90", "-O3", str(src), "-o", str(obj)], check=True)
        sass = subprocess.run([cuobjdump, "-sass", str(obj)], check=True, capture_output=True, text=True).stdout
    ins = [i.strip() for i in _SASS.findall(sass)]
    branches = [i for i in ins if re.search(r"\bBRA\b", i)]
    if len(branches) > 1:
        raise ValueError(f"a kernel with {len(branches)} branches (a loop?): SASS counts only loop-free kernels")
    return sum(1 for i in ins if not i.startswith("NOP"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--types", default="q4_0,q4_1,q5_0,q2_k,q3_k,q4_k,q5_k,q6_k",
                    help="affine GGML types, comma-separated (default: all but Q5_1)")
    ap.add_argument("--shape", default="4096x4096", help="N x K of the GEMV, K a positive multiple of 256 (default 4096x4096)")
    ap.add_argument("--results", type=Path, help="append the table to this markdown file")
    ap.add_argument("--sass", action="store_true", help="count SASS (ptxas, cuobjdump) instead of PTX")
    ap.add_argument("--ptxas", default="ptxas", help="the ptxas binary (--sass; default: on PATH)")
    ap.add_argument("--cuobjdump", default="cuobjdump", help="the cuobjdump binary (--sass; default: on PATH)")
    args = ap.parse_args(argv)
    if args.sass:
        for tool in (args.ptxas, args.cuobjdump):
            if shutil.which(tool) is None:
                ap.error(f"--sass: no {tool} (a CUDA toolkit's, or PyPI's nvidia-cuda-nvcc-cu12 / nvidia-cuda-cuobjdump)")
    from fwdshim.codegen.gemv_decode import BLOCK_TYPES

    args.types = args.types.lower()
    bad = [repr(t) for t in args.types.split(",") if t not in BLOCK_TYPES or t == "q8_0"]
    if bad:
        ap.error(f"--types: {', '.join(bad)}: affine GGML types of {', '.join(BLOCK_TYPES[1:])}")
    try:
        n, k = (int(v) for v in args.shape.split("x"))
        if n <= 0 or k <= 0 or k % 256:
            raise ValueError
    except ValueError:
        ap.error(f"--shape {args.shape}: N x K, K a positive multiple of 256 (e.g. 4096x4096)")
    from numba import config

    if config.ENABLE_CUDASIM:
        ap.exit(1, f"{ap.prog}: NUMBA_ENABLE_CUDASIM=1 runs Numba's CUDA simulator, which compiles no PTX: unset it, on a GPU\n")
    import importlib.util

    if importlib.util.find_spec("_numba_cuda_redirector"):
        import _numba_cuda_redirector  # noqa: F401  (numba.cuda -> numba_cuda, as its .pth does)
    from numba import cuda

    from fwdshim import ggml_blocks as G
    from fwdshim.codegen import gemv

    gpu = "sm_90 SASS (ptxas -O3)" if args.sass else "sm_90 PTX"
    rows = []
    for t in args.types.split(","):
        qt = G.QT[t.upper()]
        wbytes = sum(G.part_specs(qt, n, k)[i][2] * (1 if d == "int8" else 2 if d == "float16" else 4)
                     for i, (_, d, _) in enumerate(G.part_specs(qt, n, k)))  # fmt: skip
        per_row = wbytes / n
        for act in ("f32", "int8"):
            out = []
            kern = gemv.blocks(t, n, k, act=act)
            shape = kern.spec.shape
            try:
                ptx = cuda.compile_ptx(kern.fn.py_func, kern.signature, cc=(9, 0))[0]
            except Exception as e:  # noqa: BLE001 - no NVRTC/NVVM library here: one line, not a traceback
                if "nvrtc" not in str(e).lower() and "nvvm" not in str(e).lower():
                    raise
                ap.exit(1, f"{ap.prog}: compiling PTX needs CUDA's NVVM and NVRTC libraries (a CUDA toolkit, or PyPI's "
                           f"nvidia-cuda-nvcc-cu12 and nvidia-cuda-nvrtc-cu12): {str(e).splitlines()[0]}\n")
            if args.sass:
                total = sass_count(ptx, args.ptxas, args.cuobjdump)
            else:
                straight, loops = ptx_counts(ptx)
                pieces = k // 32
                trips = -(-pieces // (32 * shape.split)) // max(1, shape.unroll)
                total = straight + trips * sum(loops)
            thread_bytes = shape.rows * per_row / (32 * shape.split)
            out.append((shape.tag, total, total / thread_bytes))
            for label, total, per in out:
                rows.append((t.upper(), "dequant" if act == "f32" else "int8-act", label, total, per))
                print(rows[-1], flush=True)
    lines = [
        f"### {datetime.date.today().isoformat()} — {gpu} — `bench/instructions.py` ({n} x {k})",
        "",
        ("SASS instructions a thread executes (no `NOP`)" if args.sass else
         "PTX instructions a thread executes (loops counted per trip)") + " over the weight bytes it reads.",
        "",
        "| type | numerics | launch shape | instructions a thread | per weight byte |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {t} | {a} | {label} | {total} | {per:.2f} |" for t, a, label, total, per in rows]
    table = "\n".join(lines) + "\n"
    print(table)
    if args.results:
        with args.results.open("a") as f:
            f.write("\n" + table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
