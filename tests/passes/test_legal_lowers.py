"""Legality and lowering agree (issue 10, item 4): every stage `fwd-legalize` calls native lowers to a
launch plan, and at tiny shapes computes what the executor computes (kernels under the simulator).

Every limit a kernel has is a `fits` refusal (`fwdshim.limits`, B08–B10 of the shim): issue 10's
cases were an attention over heads of 12288 values (legal, then fwd-lower-numba failed) and a
`fwd.moe` keeping 33 experts (legal, lowered, and it computed a top-32 mixture)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support import random_stages
from support.seeds import case_seed, seed_list
from xdsl.context import Context
from xdsl.utils.exceptions import PassFailedException

from fwdshim import reference
from fwdshim.codegen.plan import plan_for
from fwdshim.codegen.runtime import CompiledForward
from fwdshim.diagnostics import LocatingParser
from fwdshim.dialects.attributes import WeightsType
from fwdshim.dialects.fwd import WeightOp, dims_of
from fwdshim.tools.driver import FwdOptMain
from fwdshim.weights import DictWeights, quantize_weight

CASES = Path(__file__).resolve().parents[1] / "cases"
SEEDS = seed_list(list(range(120)), fresh=40)


def shimmed(text: str, numerics: str):
    """The module after forward-shim, or None where legality refuses its stage."""
    module = LocatingParser(FwdOptMain(args=[]).ctx, text, "t.mlir").parse_module()
    module.verify()
    try:
        from fwdshim.passes.pipeline import ForwardShimPass

        ForwardShimPass(numerics=numerics).apply(Context(), module)
    except PassFailedException:
        return None
    return module


def weights_of(module, rng) -> DictWeights:
    out = {}
    for op in module.walk():
        if isinstance(op, WeightOp):
            t = op.result.type
            shape = tuple(dims_of(t))
            kind = t.type.value if isinstance(t, WeightsType) else "f32"
            data = (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)
            out[op.tensor_name.data] = quantize_weight(data, kind)
    return DictWeights(out)


@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
@pytest.mark.parametrize("seed", SEEDS)
def test_every_legal_stage_lowers_and_matches_the_executor(seed, numerics):
    kind, big, text = random_stages.draw(seed)
    module = shimmed(text, numerics)
    if module is None:
        return  # refused: legality's answer, with its reason (checked below for the known limits)
    plan_for(module)  # raises PlanError where a legal stage has no kernel
    if big:
        return  # the simulator runs tiny shapes only
    rng = np.random.default_rng(case_seed())
    weights = weights_of(module, rng)
    func = next(op for op in module.walk() if op.name == "func.func")
    inputs = {a.name_hint: rng.standard_normal(dims_of(a.type) or ()).astype(np.float32) for a in func.body.block.args}
    fw = CompiledForward(module, weights)
    got = [np.asarray(a.copy_to_host()) for a in fw.run_stagewise(inputs, cache_len=None if "kc" not in inputs else len(inputs["kc"]))]
    want = reference.execute(module, inputs, weights)
    tol = 2e-5 if numerics == "dequant" else 2e-2
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=0, atol=tol * max(1.0, float(np.abs(w).max())), err_msg=f"{kind}: {text}")


@pytest.mark.parametrize(
    "case,reason",
    [
        ("wide_head.mlir", "an attention over heads of 12288 values — its kernel holds a split's scores"),
        ("moe_topk33.mlir", "an expert mixture keeping 33 experts — its router keeps at most 32, one a lane of one warp"),
    ],
)
def test_issue_cases_are_refused_with_the_kernels_limit(case, reason):
    with pytest.raises(PassFailedException, match=reason):
        from fwdshim.passes.pipeline import ForwardShimPass

        module = LocatingParser(FwdOptMain(args=[]).ctx, (CASES / case).read_text(), case).parse_module()
        ForwardShimPass(numerics="int8-act").apply(Context(), module)


@pytest.mark.parametrize(
    "h,kv,hd,l,fits",
    [
        (1, 1, 12288, 2, False),  # the case: one warp's partial row of the head alone is 48 KiB
        (8, 2, 16384, 2, False),
        (1, 1, 12256, 2, True),  # the widest head one warp's row holds
        (300, 300, 4, 12256, True),  # 17 splits a head: a split's rows, rounded to 128-row passes, fit
        (32, 8, 128, 12256, True),
    ],
)
def test_attention_limit_is_the_factorys(h, kv, hd, l, fits):
    """Sibling: `limits.attention_limit` says yes exactly where the attention factory builds a kernel."""
    from fwdshim.codegen import attention
    from fwdshim.limits import attention_limit

    assert (attention_limit(h, kv, hd, l) is None) == fits
    if fits:
        attention.attention(h, kv, hd, l)
    else:
        with pytest.raises(ValueError, match="static shared memory"):
            attention.attention(h, kv, hd, l)
