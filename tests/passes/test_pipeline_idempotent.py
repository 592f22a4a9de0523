"""`forward-shim` is what its numerics say, and a fixed point (issue 10, item 4): its output run
through it again is unchanged, for the examples and for fused ops of Decompose classes met in the
input (split first, so their parts are quantized and fused like any stage), under every numerics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.seeds import seed_list
from xdsl.context import Context
from xdsl.utils.exceptions import PassFailedException

from fwdshim.classes import Q8MatKind
from fwdshim.diagnostics import LocatingParser
from fwdshim.dialects.attributes import QActType, WeightsType
from fwdshim.dialects.fwd import FusedOp, MatmulOp, MoeOp, stages
from fwdshim.passes.fuse import FusePass
from fwdshim.passes.pipeline import ForwardShimPass
from fwdshim.passes.quantize_activations import QuantizeActivationsPass
from fwdshim.passes.rules import number_stages
from fwdshim.tools.driver import FwdOptMain

ROOT = Path(__file__).resolve().parents[2]
NUMERICS = [k.value for k in Q8MatKind]


def chunks() -> list[tuple[str, str]]:
    out = [(p.name, p.read_text()) for p in sorted((ROOT / "examples").glob("*.mlir"))]
    for path in (ROOT / "filecheck_tests/fwd-legalize/decompose.mlir", ROOT / "filecheck_tests/forward-shim/decompose_first.mlir"):
        for i, text in enumerate(path.read_text().split("// -----")):
            out.append((f"{path.name}#{i}", text))
    return out


CHUNKS = chunks()


def run(text: str, numerics: str):
    module = LocatingParser(FwdOptMain(args=[]).ctx, text, "t.mlir").parse_module()
    module.verify()
    ForwardShimPass(numerics=numerics).apply(Context(), module)
    module.verify()
    return module


def shimmed(text: str, numerics: str):
    """The pipeline's output, or None where the input holds ops the forward refuses."""
    try:
        return run(text, numerics)
    except PassFailedException:  # a refused op: the chunk tests legality, not this property
        return None


@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("name,text", CHUNKS, ids=[n for n, _ in CHUNKS])
def test_forward_shim_is_a_fixed_point(name, text, numerics):
    once = shimmed(text, numerics)
    if once is None:
        pytest.skip("the forward refuses an op of this input")
    twice = run(str(once), numerics)
    assert str(twice) == str(once), f"{name}: a second forward-shim{{numerics={numerics}}} changed the IR"


@pytest.mark.parametrize("numerics", NUMERICS)
@pytest.mark.parametrize("name,text", CHUNKS, ids=[n for n, _ in CHUNKS])
def test_every_block_quantized_product_reads_what_the_numerics_say(name, text, numerics):
    """Under int8-act and two-pass-int8 every Q8_0 matmul and every mixture reads a quantized
    activation (of the numerics' format); under dequant none does."""
    module = shimmed(text, numerics)
    if module is None:
        pytest.skip("the forward refuses an op of this input")
    want = {"dequant": None, "int8-act": "one_word", "two-pass-int8": "two_words"}[numerics]
    readers = [
        op for op in module.walk()
        if isinstance(op, MoeOp) or (isinstance(op, MatmulOp) and isinstance(op.w.type, WeightsType) and op.w.type.type.value == "q8_0")
    ]  # fmt: skip
    for op in readers:
        t = op.operands[0].type
        got = t.format.data.value if isinstance(t, QActType) else None
        assert got == want, f"{name}: {op.name} reads {t} under {numerics}"


# ---------------------------------------------------------------------------------------------
# random DAGs: fused ops land after stages of higher numbers


def _dag(seed: int, weights: str) -> str:
    """test_fuse_property's random DAG; `q8_0`: its matmuls over a Q8_0 weight (32-wide DAGs only)."""
    from support.random_dag import random_dag

    text = random_dag(np.random.default_rng(seed))[0]
    if weights == "q8_0":
        if "tensor<32x32xf32>" not in text:
            pytest.skip("an 8-wide DAG: no Q8_0 weight fits it")
        w = "!fwd.weights<32x32, q8_0>"
        text = text.replace(", %w: tensor<32x32xf32>", "").replace("tensor<32x32xf32>", w)
        at = text.index("{\n") + 2
        text = f'{text[:at]}  %w = fwd.weight "w" : {w}\n{text[at:]}'
    return text


DAG_SEEDS = seed_list([*range(24)])
"""Fixed DAGs. Seed 1 (and most others) failed before 2026-12-03: `fwd-fuse` puts a fused op after
its last part, past stages of higher numbers than its first cover; numbering the output again, those
stages took the fused op's numbers and every later fused op's covers moved on (`[0, 6, 18]` became
`[4, 10, 22]`): a second `forward-shim` rewrote every `covers`."""


@pytest.mark.parametrize("weights", ["f32", "q8_0"])
@pytest.mark.parametrize("seed", DAG_SEEDS)
def test_forward_shim_is_a_fixed_point_on_random_dags(seed, weights):
    print(f"FWDSHIM_SEED={seed}")
    text = _dag(seed, weights)
    for numerics in NUMERICS:
        once = shimmed(text, numerics)
        if once is None:
            continue
        twice = run(str(once), numerics)
        assert str(twice) == str(once), f"seed {seed}: a second forward-shim{{numerics={numerics}}} changed the IR"


@pytest.mark.parametrize("seed", DAG_SEEDS)
def test_quantizes_put_into_fused_ir_take_numbers_no_fused_op_covers(seed):
    """fwd-fuse, then fwd-quantize-activations (`rules.make_room`), then fwd-fuse: every stage number
    and every cover differ, and the result is a fixed point of both passes."""
    print(f"FWDSHIM_SEED={seed}")
    text = _dag(seed, "q8_0")
    for numerics in ("int8-act", "two-pass-int8"):
        module = LocatingParser(FwdOptMain(args=[]).ctx, text, "t.mlir").parse_module()
        FusePass(numerics).run(module)
        QuantizeActivationsPass(numerics).run(module)
        numbers = list(number_stages(module).values())
        covers = [c for op in stages(module) if isinstance(op, FusedOp) for c in op.cover_list]
        assert len(set(numbers + covers)) == len(numbers + covers), f"seed {seed}: a stage number is a cover"
        FusePass(numerics).run(module)
        module.verify()
        once = str(module)
        FusePass(numerics).run(module)
        QuantizeActivationsPass(numerics).run(module)
        assert str(module) == once, f"seed {seed} under {numerics}: not a fixed point"
