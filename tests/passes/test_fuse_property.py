"""Property test of fwd-fuse: random elementwise DAGs (depth, fan-in, fan-out varied, with matmuls and
norms as barriers) fused and unfused compute the same values, and the fusion is well formed.

Oracles: a small NumPy evaluator of the IR written here (it walks fused regions too), and the
reference executor `fwdshim.reference.execute`; fused and unfused results must be
bit-identical, and both must agree with an evaluation from the generator's own description.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.random_dag import BINARY, random_dag
from support.seeds import seed_list
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func, FuncOp, ReturnOp
from xdsl.ir import Block
from xdsl.parser import Parser

from fwdshim.dialects.fwd import (
    ElementwiseOp,
    FusedOp,
    Fwd,
    MatmulOp,
    RmsNormOp,
    SiluOp,
    YieldOp,
    leaves,
    stages,
)
from fwdshim.passes.fuse import fuse_module
from fwdshim.passes.legalize import LegalizePass
from fwdshim.passes.rules import RULES, FuseContext, _carries, _pointwise
from fwdshim.shim.forward import ForwardShim

F32, F64 = np.float32, np.float64


def silu(x):
    x = np.asarray(x, F32).astype(F64)
    return (x / (1.0 + np.exp(-x))).astype(F32)


def rms_norm(x):
    x = np.asarray(x, F32).astype(F64)
    return (x / np.sqrt(np.mean(x * x) + 1e-5)).astype(F32)


def matmul(x, w):
    return (np.asarray(w, F32).astype(F64) @ np.asarray(x, F32).astype(F64)).astype(F32)


# ---------------------------------------------------------------------------------------------
# the generator


def evaluate_description(ops, inputs, w, outputs):
    vals = list(inputs)
    for kind, a in ops:
        if kind == "silu":
            vals.append(silu(vals[a[0]]))
        elif kind == "norm":
            vals.append(rms_norm(vals[a[0]]))
        elif kind == "matmul":
            vals.append(matmul(vals[a[0]], w))
        else:
            with np.errstate(all="ignore"):
                vals.append(BINARY[kind](vals[a[0]], vals[a[1]]).astype(F32))
    return [vals[o] for o in outputs]


# ---------------------------------------------------------------------------------------------
# the evaluator of the IR


def _run_block(block: Block, args: list) -> list:
    env = dict(zip(block.args, args))
    for op in block.ops:
        if isinstance(op, ReturnOp | YieldOp):
            return [env[v] for v in op.operands]
        x = [env[v] for v in op.operands]
        if isinstance(op, FusedOp):
            outs = _run_block(op.body.block, x)
        elif isinstance(op, SiluOp):
            outs = [silu(x[0])]
        elif isinstance(op, RmsNormOp):
            outs = [rms_norm(x[0])]
        elif isinstance(op, MatmulOp):
            outs = [matmul(x[0], x[1])]
        elif isinstance(op, ElementwiseOp):
            with np.errstate(all="ignore"):
                outs = [BINARY[op.kind.data.value](x[0], x[1]).astype(F32)]
        else:
            raise AssertionError(f"unexpected op {op.name}")
        env.update(zip(op.results, outs))
    raise AssertionError("no terminator")


def evaluate(module: ModuleOp, inputs: list) -> list:
    func = next(op for op in module.walk() if isinstance(op, FuncOp))
    return _run_block(func.body.block, inputs)


def reference(module: ModuleOp, inputs: list) -> list:
    from fwdshim.reference import execute

    return execute(module, inputs)


# ---------------------------------------------------------------------------------------------
# the property


def parse(text: str) -> ModuleOp:
    ctx = Context()
    for d in (Builtin, Func, Fwd):
        ctx.load_dialect(d)
    m = Parser(ctx, text).parse_module()
    m.verify()
    return m


def same(a, b) -> bool:
    return all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b, strict=True))


def close(a, b) -> bool:
    return all(np.allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True) for x, y in zip(a, b, strict=True))


SEEDS = seed_list([*range(40), 227, 3433607886])
"""Fixed DAGs (tests/support/seeds.py: fresh ones added under FWDSHIM_FRESH_SEEDS=<n>, one replayed by
FWDSHIM_SEED=<n>). Kept: 3433607886 (a silu whose first user could not continue its chain left the
chain unfused) and 227 (the same, a sub and a max)."""


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("order", ["forward", "shared"])
def test_random_dag_fuses_to_the_same_values(seed, order):
    print(f"FWDSHIM_SEED={seed}")
    check_random_dag(seed, order)


def check_random_dag(seed: int, order: str) -> dict[str, int]:
    """Fuse one random DAG and check it; returns how many fused ops of each class it formed."""
    formed: dict[str, int] = {}
    rng = np.random.default_rng(seed)
    text, ops, n_in, n, outputs = random_dag(rng)
    inputs = [rng.uniform(-2, 2, n).astype(F32) for _ in range(n_in)]
    w = (rng.uniform(-1, 1, (n, n)) / np.sqrt(n)).astype(F32)
    args = [*inputs, w]

    unfused = parse(text)
    n_stages = sum(1 for _ in stages(unfused))
    want = evaluate(unfused, args)
    assert close(want, evaluate_description(ops, inputs, w, outputs))

    m = parse(text)
    shim = ForwardShim()
    fuse_module(m, shim, RULES if order == "shared" else None)
    m.verify()
    got = evaluate(m, args)
    assert same(got, want), "fused and unfused differ"
    assert close(reference(m, args), want), "the reference executor differs"

    # well formed: every original stage is one leaf, covered once, in stage order inside each op
    tops = list(stages(m))
    assert sum(len(leaves(op)) for op in tops) == n_stages
    covers = sorted(n for op in tops if isinstance(op, FusedOp) for n in op.cover_list)
    assert len(covers) == len(set(covers))
    for op in tops:
        if isinstance(op, FusedOp):
            formed[op.class_.data] = formed.get(op.class_.data, 0) + 1
            assert list(op.cover_list) == sorted(op.cover_list)
    # every fused op is one the forward runs (its fits, the chain condition included)
    LegalizePass("dequant", "strict").apply(Context(), m)

    # maximal: no two unfused neighbours that a chain step joins
    ctx = FuseContext.of(m, shim)
    loose = [op for op in tops if _pointwise(op, ctx)]
    for u in loose:
        for use in u.results[0].uses:
            v = use.operation
            assert not (v in loose and _carries(u, v) and ctx.convex([u, v])), f"{u} -> {v} left unfused"
    return formed


def test_the_property_exercised_regions_chains_and_norms():
    """The DAGs of this run form every kind of fused op the property is about (so it can fail)."""
    formed: dict[str, int] = {}
    for seed in SEEDS:
        for cls, n in check_random_dag(seed, "forward").items():
            formed[cls] = formed.get(cls, 0) + n
    print(f"seeds {SEEDS}: formed {formed}")
    assert formed.get("elementwise_regions", 0) >= 10
    assert formed.get("elementwise_chains", 0) >= 10
