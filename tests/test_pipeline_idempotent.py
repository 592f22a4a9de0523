"""`forward-shim` is what its numerics say, and a fixed point (issue 10, item 4): its output run
through it again is unchanged, for the examples and for fused ops of Decompose classes met in the
input (split first, so their parts are quantized and fused like any stage), under every numerics."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.utils.exceptions import PassFailedException

from fwdshim.classes import Q8MatKind
from fwdshim.diagnostics import LocatingParser
from fwdshim.dialects.attributes import QActType, WeightsType
from fwdshim.dialects.fwd import MatmulOp, MoeOp
from fwdshim.tools.driver import FwdOptMain
from fwdshim.passes.pipeline import ForwardShimPass

ROOT = Path(__file__).resolve().parents[1]
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
