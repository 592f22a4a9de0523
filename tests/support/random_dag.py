"""Helpers the tests share (from tests/passes/test_fuse_property.py, which imports them from here, as others do)."""

from __future__ import annotations

import numpy as np

BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def random_dag(rng: np.random.Generator) -> tuple[str, list[tuple], int, int, list[int]]:
    """A random function: returns (its text, its ops as (kind, operand ids), #inputs, size, outputs).

    Values 0..n_in-1 are the inputs; value n_in + i is op i's result. `kind` is an elementwise kind,
    `silu`, `norm` or `matmul` (the barriers, reading the weight argument `%w`)."""
    n = int(rng.choice([8, 32]))
    n_in = int(rng.integers(2, 5))
    n_ops = int(rng.integers(4, 31))
    depth_bias = float(rng.uniform(0.0, 1.0))  # 1: each op reads the latest values (deep); 0: any (wide)
    barrier_p = float(rng.choice([0.0, 0.1, 0.25]))
    ops: list[tuple] = []

    def pick(count: int) -> int:
        if rng.uniform() < depth_bias:
            return int(count - 1 - min(rng.geometric(0.5) - 1, count - 1))
        return int(rng.integers(0, count))

    for i in range(n_ops):
        count = n_in + i
        r = rng.uniform()
        if r < barrier_p:
            ops.append(("norm" if rng.uniform() < 0.4 else "matmul", (pick(count),)))
        elif r < barrier_p + 0.15:
            ops.append(("silu", (pick(count),)))
        else:
            a = pick(count)
            b = a if rng.uniform() < 0.08 else pick(count)
            if rng.uniform() < 0.5:
                a, b = b, a
            ops.append((str(rng.choice(list(BINARY))), (a, b)))
    used = {v for _, args in ops for v in args}
    sinks = [n_in + i for i in range(n_ops) if n_in + i not in used]
    extra = [int(v) for v in rng.choice(n_in + n_ops, size=int(rng.integers(0, 4)), replace=True) if v >= n_in]
    outputs = list(dict.fromkeys(sinks + extra))
    t = f"tensor<{n}xf32>"
    lines = []
    args = ", ".join(f"%v{i}: {t}" for i in range(n_in)) + f", %w: tensor<{n}x{n}xf32>"
    rets = ", ".join([t] * len(outputs))
    lines.append(f"func.func @dag({args}) -> ({rets}) {{")
    for i, (kind, a) in enumerate(ops):
        v = f"%v{n_in + i}"
        if kind == "silu":
            lines.append(f"  {v} = fwd.silu %v{a[0]} : {t} -> {t}")
        elif kind == "norm":
            lines.append(f"  {v} = fwd.rms_norm %v{a[0]} eps 1.0e-05 : {t} -> {t}")
        elif kind == "matmul":
            lines.append(f"  {v} = fwd.matmul %v{a[0]}, %w : {t}, tensor<{n}x{n}xf32> -> {t}")
        else:
            lines.append(f"  {v} = fwd.elementwise {kind} %v{a[0]}, %v{a[1]} : {t}, {t} -> {t}")
    lines.append(f"  func.return {', '.join(f'%v{o}' for o in outputs)} : {rets}")
    lines.append("}")
    return "\n".join(lines), ops, n_in, n, outputs
