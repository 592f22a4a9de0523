"""Registers, shared memory, blocks an SM and waves of every kernel of a decode step, without a GPU:
the plan's kernels compiled for an architecture by Numba (`numba.cuda.compile_ptx`, the kernel's
launch bounds kept) and assembled by `ptxas -v` from a CUDA toolkit, the occupancy rule of
`fwdshim.codegen.device.occupancy` over an H200's SM limits (`SMLimits`, 132 SMs).

    python bench/occupancy.py [--shapes llama8b,smollm2] [--numerics dequant,int8-act] [--arch sm_90]
                              [--cap 80,96] [--loops]

Each shape's step is planned from a random Q8_0 model of `bench/decode_step.py`'s shapes cut to one
layer (the vocabulary cut to 1024: the output projection's rows do not change its kernel's registers),
context 1024. `--cap R,...` also assembles every kernel at `-maxrregcount=R` (registers, spilled bytes
and blocks an SM at each cap): what CUDA launch bounds would give, before a device call measures it.
`--loops` also disassembles each kernel (`cuobjdump -sass`) and gives its largest loop (a backward
branch's range): SASS instructions an iteration and their mix (loads, tensor-core mmas, FMAs, ...) —
how far from its bytes a GEMV's loop is (a dequant Q8_0 loop at ~4.4 instructions a weight byte is
instruction-bound; `bench/RESULTS.md`, twelfth session). On the GPU `fwdshim profile` reads the same columns from the kernels as the driver loaded them (the
device's ptxas may allocate a few registers differently).

Needs `ptxas` (a CUDA toolkit's `bin`, on PATH or under `$CUDA_HOME`) and Numba's NVVM (the toolkit's
`nvvm/lib64`, or the `nvidia-cuda-nvrtc` wheel's libraries on `LD_LIBRARY_PATH`). Without them: one
line saying what is missing, exit status 2.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

NUMERICS = ("dequant", "int8-act", "two-pass-int8")


def find_ptxas() -> str | None:
    """`ptxas` on PATH, else under `$CUDA_HOME/bin` or `/usr/local/cuda*/bin` (None: no toolkit)."""
    found = shutil.which("ptxas")
    if found:
        return found
    roots = [os.environ.get("CUDA_HOME", "")] + sorted(str(p) for p in Path("/usr/local").glob("cuda*"))
    for root in roots:
        p = Path(root, "bin", "ptxas")
        if root and p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return None


def parse_ptxas(text: str) -> tuple[int, int, int]:
    """(registers, spilled bytes stored, static shared bytes) from `ptxas -v`'s lines for one kernel."""
    regs = re.search(r"Used (\d+) registers", text)
    if regs is None:
        raise ValueError(f"no register count in ptxas's output: {text.strip()[:200]}")
    spill = re.search(r"(\d+) bytes spill stores", text)
    smem = re.search(r"(\d+) bytes smem", text)
    return int(regs.group(1)), int(spill.group(1)) if spill else 0, int(smem.group(1)) if smem else 0


def assemble(ptxas: str, ptx: str, arch: str, cap: int = 0, sass: list | None = None) -> tuple[int, int, int]:
    """`parse_ptxas` of `ptx` assembled for `arch` (at `-maxrregcount=cap` when `cap`); with `sass` (a
    list), the cubin's `cuobjdump -sass` text is appended to it (cuobjdump beside ptxas, or on PATH)."""
    with tempfile.TemporaryDirectory() as d:
        Path(d, "k.ptx").write_text(ptx)
        cmd = [ptxas, f"-arch={arch}", "-v", *([f"-maxrregcount={cap}"] if cap else []), "-o", f"{d}/k.cubin", f"{d}/k.ptx"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"ptxas failed: {r.stderr.strip()[-300:]}")
        if sass is not None:
            tool = Path(ptxas).with_name("cuobjdump")
            tool = str(tool) if tool.is_file() else shutil.which("cuobjdump")
            if tool is None:
                raise RuntimeError("no cuobjdump beside ptxas or on PATH (--loops disassembles with it)")
            sass.append(subprocess.run([tool, "-sass", f"{d}/k.cubin"], capture_output=True, text=True, check=True).stdout)
        return parse_ptxas(r.stderr)


_SASS = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)[.\s;]([^;]*)", re.M)
_MIX = ("LDG", "LDS", "STS", "HMMA", "IMMA", "IDP", "FFMA", "FADD", "FMUL", "PRMT", "LOP3", "I2F")


def largest_loop(sass: str) -> tuple[int, dict[str, int]] | None:
    """(instructions, their mix by opcode of `_MIX`) of the largest loop of a kernel's SASS: the range
    from a backward branch's target to the branch; None when it has no loop."""
    ins = [(int(m[1], 16), m[2], m[3]) for m in _SASS.finditer(sass)]
    best = None
    for addr, op, rest in ins:
        t = re.match(r"\s*(?:`\(\.L_x_\d+\)|0x([0-9a-f]+))", rest) if op == "BRA" else None
        if t and t[1] and int(t[1], 16) < addr:
            body = [o for a, o, _ in ins if int(t[1], 16) <= a <= addr]
            if best is None or len(body) > len(best):
                best = body
    if best is None:
        return None
    return len(best), {k: sum(o == k for o in best) for k in _MIX if any(o == k for o in best)}


def step_kernels(shape: str, numerics: str):
    """The distinct kernels (in plan order) and the launches of a one-layer step of `shape`."""
    import decode_step as ds

    from fwdshim.codegen import merge
    from fwdshim.codegen.plan import build_plan
    from fwdshim.frontend.importer import import_gguf
    from fwdshim.tools.runner import _func, compile_step

    merge.PRO_INLINE = ", inline=True"  # `forceinline` would need a CUDA driver here (`merge.PRO_INLINE`)
    params = dict(ds.SHAPES[shape], n_layer=1, vocab=1024)
    path = Path(tempfile.gettempdir()) / "fwdshim_bench" / f"occupancy_{shape}.gguf"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        ds.write_random_q8_0(path, params, 1024)
    module = compile_step(import_gguf(path, requantize="none", context=1024), numerics)
    plan = build_plan(_func(module), module)
    seen, kernels = set(), []
    for launch in plan.launches:
        if launch.kernel.name not in seen:
            seen.add(launch.kernel.name)
            kernels.append(launch.kernel)
    return kernels


def cells(kern, regs: int, spill: int, smem: int) -> tuple[str, str, str]:
    """(registers and spills, blocks an SM and their limit, waves) of `kern` as assembled."""
    from fwdshim.codegen.device import SMLimits, occupancy

    n, limit = occupancy(regs, smem, kern.block[0])
    grid = kern.grid[0] * (kern.grid[1] if len(kern.grid) > 1 else 1)
    return f"{regs}{f' (spills {spill} B)' if spill else ''}", f"{n} ({limit})", f"{grid / (n * SMLimits().sms):.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--shapes", default="llama8b,smollm2", help="comma-separated: llama8b, smollm2")
    ap.add_argument("--numerics", default="dequant,int8-act", help=f"comma-separated, of {', '.join(NUMERICS)}")
    ap.add_argument("--arch", default="sm_90", help="the architecture ptxas assembles for (default sm_90: the H200)")
    ap.add_argument("--cap", default="", help="register caps to assemble at too, e.g. 80,96")
    ap.add_argument("--loops", action="store_true", help="also each kernel's largest loop: SASS instructions an iteration and their mix")
    args = ap.parse_args(argv)
    import decode_step as ds

    shapes = [s for s in args.shapes.split(",") if s]
    numerics = [s for s in args.numerics.split(",") if s]
    if not shapes or any(s not in ds.SHAPES for s in shapes):
        ap.error(f"--shapes {args.shapes!r}: of {', '.join(ds.SHAPES)}")
    if not numerics or any(n not in NUMERICS for n in numerics):
        ap.error(f"--numerics {args.numerics!r}: of {', '.join(NUMERICS)}")
    m = re.fullmatch(r"sm_(\d)(\d+)", args.arch)
    if m is None:
        ap.error(f"--arch {args.arch!r}: an architecture such as sm_90")
    try:
        caps = [int(c) for c in args.cap.split(",") if c]
    except ValueError:
        ap.error(f"--cap {args.cap!r}: register counts, comma-separated")
    if any(not 16 <= c <= 255 for c in caps):
        ap.error(f"--cap {args.cap!r}: register counts from 16 to 255")
    ptxas = find_ptxas()
    if ptxas is None:
        ap.exit(2, "occupancy.py: no ptxas here (a CUDA toolkit's bin on PATH, or CUDA_HOME): nothing to assemble with\n")
    from numba import config, cuda

    if config.ENABLE_CUDASIM:  # its kernels are Python functions: nothing to compile to PTX
        ap.exit(2, "occupancy.py: NUMBA_ENABLE_CUDASIM=1 runs Numba's CUDA simulator, which compiles no PTX: unset it\n")
    cc = (int(m.group(1)), int(m.group(2)))
    head = "| kernel | grid | block | regs | blocks/SM (limit) | waves |" + "".join(f" at {c} regs |" for c in caps)
    head += " largest loop (SASS) |" if args.loops else ""
    for shape in shapes:
        for num in numerics:
            print(f"\n{shape}, {num}, one layer, context 1024, {args.arch}:\n\n{head}\n|" + "---|" * (head.count("|") - 1))
            for kern in step_kernels(shape, num):
                try:
                    ptx, _ = cuda.compile_ptx(kern.fn.py_func, kern.signature, cc=cc,
                                              launch_bounds=kern.fn.targetoptions.get("launch_bounds"))  # fmt: skip
                except Exception as e:  # noqa: BLE001 - no NVVM here: said once, not per kernel
                    ap.exit(2, f"occupancy.py: Numba cannot compile for {args.arch} here ({type(e).__name__}: "
                               f"{str(e).splitlines()[0][:160]}): it needs a CUDA toolkit's NVVM\n")  # fmt: skip
                sass: list = [] if args.loops else None
                try:
                    cols = list(cells(kern, *assemble(ptxas, ptx, args.arch, sass=sass)))
                except RuntimeError as e:
                    ap.exit(2, f"occupancy.py: {e}\n")
                for c in caps:
                    r, n, w = cells(kern, *assemble(ptxas, ptx, args.arch, c))
                    cols.append(f"{r}: {n.split()[0]} an SM, {w} waves")
                if args.loops:
                    loop = largest_loop(sass[0])
                    cols.append("none" if loop is None else f"{loop[0]}: " + ", ".join(f"{k} {v}" for k, v in loop[1].items()))
                print(f"| {kern.name} | {kern.grid[0]} | {kern.block[0]} | " + " | ".join(cols) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
