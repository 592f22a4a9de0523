"""Per-index kernels: silu, a plain elementwise op, and transpose; plus the expression text of each
per-index op, shared with the generated elementwise chain/region kernels.

- `binary_expr(kind, a, b) -> str`: the float32 expression of `fwd.elementwise` `kind` (add, sub, mul,
  div, max, min) on expression texts `a`, `b`, rounding spelled out (`fadd_rn`, ...), so a fused chain
  that uses it computes the same bits as the unfused kernel below.
- `silu_expr(x) -> str`: `x / (1 + exp(-x))` in float32 (`math.exp` is libdevice `expf` on a GPU).
- `elementwise(kind, n, block=)`: `y[i] = a[i] kind b[i]`; params `a, b f32 [n]`, `y f32 [n]`.
- `silu(n, block=)`: params `x f32 [n]`, `y f32 [n]`.
- `transpose(rows, cols, block_rows=)`: `y[c, r] = x[r, c]`; params `x f32 [rows*cols]` (row-major
  `[rows, cols]`), `y f32 [cols*rows]` (`[cols, rows]`); 32x32 tiles through shared memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from fwdshim.codegen.kernel import Kernel, KernelSpec, Param, build, factory
from fwdshim.codegen.source import check_block
from fwdshim.codegen.tuning import DEFAULT, Tuning

KINDS = {"add": "fadd_rn", "sub": "fsub_rn", "mul": "fmul_rn", "div": "fdiv_rn", "max": "max", "min": "min"}


def binary_expr(kind: str, a: str, b: str) -> str:
    """The generated-source expression of `a kind b` (see the module docstring)."""
    if kind not in KINDS:
        raise ValueError(f"elementwise kind `{kind}` is not one of {', '.join(KINDS)}")
    return f"{KINDS[kind]}({a}, {b})"


def silu_expr(x: str) -> str:
    """The generated-source expression of `silu(x)` (float32)."""
    return f"fdiv_rn({x}, fadd_rn(float32(1.0), float32(math.exp(-({x})))))"


def _grid(n: int, block: int) -> tuple[int]:
    if n <= 0:
        raise ValueError(f"a per-index kernel over {n} values")
    check_block(block)
    return (-(-n // block),)


@dataclass(frozen=True)
class BinarySpec(KernelSpec):
    """An elementwise kernel's spec: `y = a kind b` over `n` float32 values (what `codegen.merge`
    runs as a GEMV's epilogue)."""

    family = "elementwise"
    kind: str
    n: int


@factory
def elementwise(kind: str, n: int, *, block: int = 256, tuning: Tuning = DEFAULT) -> Kernel:
    """`y = a kind b` per index (see the module docstring)."""
    grid = _grid(n, block)
    body = f"""\
@cuda.jit(cache=True)
def elementwise_k(a, b, y):
    i = $gid
    if i < {n}:
        y[i] = {binary_expr(kind, "a[i]", "b[i]")}
"""
    params = [
        Param("a", "float32", n, "in", f"[{n}]"),
        Param("b", "float32", n, "in", f"[{n}]"),
        Param("y", "float32", n, "out", f"[{n}]"),
    ]
    return build(f"elementwise_{kind}_{n}", body, "elementwise_k", grid, (block,), params, f"elementwise {kind} of {n}", pdl=tuning.pdl,
                 spec=BinarySpec(kind, n))


@factory
def silu(n: int, *, block: int = 256, tuning: Tuning = DEFAULT) -> Kernel:
    """`y = silu(x)` per index (see the module docstring)."""
    grid = _grid(n, block)
    body = f"""\
@cuda.jit(cache=True)
def silu_k(x, y):
    i = $gid
    if i < {n}:
        v = x[i]
        y[i] = {silu_expr("v")}
"""
    params = [Param("x", "float32", n, "in", f"[{n}]"), Param("y", "float32", n, "out", f"[{n}]")]
    return build(f"silu_{n}", body, "silu_k", grid, (block,), params, f"silu of {n}", pdl=tuning.pdl)


@factory
def transpose(rows: int, cols: int, *, block_rows: int = 8, tuning: Tuning = DEFAULT) -> Kernel:
    """`y [cols, rows] = x [rows, cols]ᵀ` (see the module docstring)."""
    if rows <= 0 or cols <= 0:
        raise ValueError(f"a transpose of {rows}x{cols}")
    if 32 % block_rows:
        raise ValueError(f"transpose block rows {block_rows} do not divide the 32-row tile")
    body = f"""\
@cuda.jit(cache=True)
def transpose_k(x, y):
    tile = cuda.shared.array((32, 33), float32)
    tx = $tx
    ty = cuda.threadIdx.y
    c0 = $bx * 32
    r0 = $by * 32
    for j in range(ty, 32, {block_rows}):
        r = r0 + j
        c = c0 + tx
        if r < {rows} and c < {cols}:
            tile[j, tx] = x[r * {cols} + c]
    cuda.syncthreads()
    for j in range(ty, 32, {block_rows}):
        c = c0 + j
        r = r0 + tx
        if c < {cols} and r < {rows}:
            y[c * {rows} + r] = tile[tx, j]
"""
    grid = (-(-cols // 32), -(-rows // 32))
    params = [
        Param("x", "float32", rows * cols, "in", f"[{rows}, {cols}]"),
        Param("y", "float32", rows * cols, "out", f"[{cols}, {rows}]"),
    ]
    return build(f"transpose_{rows}x{cols}", body, "transpose_k", grid, (32, block_rows), params, f"transpose of {rows}x{cols}", pdl=tuning.pdl)
