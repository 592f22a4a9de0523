"""The forward shim's `supports` table for all 86 classes under the three numerics, and its name,
activation and numerics — against the seed's match written out here independently."""

from __future__ import annotations

import pytest

from fwdshim.classes import ClassId, Q8MatKind, Support
from fwdshim.shim.forward import ForwardShim

# The seed's `supports` match (forward_shim.rs lines 132–161), transcribed arm by arm.
SEED_NATIVE = "NormWeight AddNorm ElementwiseChains ElementwiseRegions GemmDequantInkernel CudaGraphs RouterTopk MoeGateUpAct MoeDownCombine"
SEED_PRODUCER_QUANT = "NormQuant AddNormQuant AttnOutputQuant"
SEED_DECOMPOSE = """AttnOutputGate RowWriteQuant NormThenAdd NormScale NormWeightOffset DualNorm GatedNorm EmbedNorm EmbedScale
GemvNormEpilogue PrefillNormEpilogues AttnResidualNorm RecomputeFanout QkNormRope QkNormRopeKvAppend RopeKvAppend
RopeQkOneLaunch QkNormRopeGateSplit QkvHeadEpilogue HorizontalNormRopeInsert CrossLayerLaunch Mla MlaPrologue
MlaUnabsorbInFold GluActMul GluActMulQuant GemvGateUpGlu MaskedExpertActivation GemmBias GemmScale MergedQkv
MergedGateUp AffineInputFold RouterSharedGateMerge MoeTokenSort MoeGatherInOperand MoeDeferredFinalize
SharedExpertFusion GdnInputEpilogue GdnDecodeWhole GdnPostConvPrep ConvBiasSilu ConvParts ConvSiluL2norm
GdnGateProjections GdnGating FusedSampling LastLayerRows AllreduceNorm ElementwiseQuant GdnOutputQuant GemvQuant"""
SEED_REFUSE = {
    "ReluSqr": "the forward links no ReLU",
    "FlashDecode FlashPrefill": "the forward attends one query over a cache held in one block's shared scores",
    "AttentionVariantsInline Softcap MixedBatchAttention SparseAttention": "the forward's attention takes no mask, window, sink, soft cap or given scale",
    "AttnGqaRowPacking AttnLseMerge": "the forward attends a cache in one block, never in chunks",
    "GroupedTopk": "the forward routes by one top-k over every expert",
    "Sampling": "the forward computes logits and picks no token",
    "GdnStep": "the forward links no delta rule",
    "KvCacheQuant HadamardRotation": "the forward holds its caches in f32",
    "CompensatedResidual": "the forward sums its residual in f32, uncompensated",
    "HostResidentKv": "the forward keeps every buffer on the device",
    "MoeDirectPairs": "the forward runs one sequence's row through its kept experts",
    "PersistentLayerMegakernel": "the forward replays a graph of a kernel a stage",
    "StridedRead RowWrite JoinInPlace StridedValues": "the forward's stages read and write whole buffers",
}


def snake(camel: str) -> str:
    out = ""
    for i, ch in enumerate(camel):
        out += ("_" if i and ch.isupper() else "") + ch.lower()
    return out


def expected(kind: Q8MatKind) -> dict[str, tuple[str, str | None]]:
    table: dict[str, tuple[str, str | None]] = {}
    for c in SEED_NATIVE.split():
        table[snake(c)] = ("native", None)
    for c in SEED_PRODUCER_QUANT.split():
        table[snake(c)] = ("native" if kind is Q8MatKind.INT8_ACT else "decompose", None)
    for c in SEED_DECOMPOSE.split():
        table[snake(c)] = ("decompose", None)
    for names, why in SEED_REFUSE.items():
        for c in names.split():
            table[snake(c)] = ("refuse", why)
    return table


@pytest.mark.parametrize("kind", list(Q8MatKind))
def test_supports_table_all_86_classes(kind: Q8MatKind) -> None:
    want = expected(kind)
    assert len(want) == 86 == len(ClassId)
    shim = ForwardShim(kind)
    got = {c.value: (shim.supports(c).kind, shim.supports(c).reason) for c in ClassId}
    assert got == want


@pytest.mark.parametrize("kind", list(Q8MatKind))
def test_supports_counts(kind: Q8MatKind) -> None:
    shim = ForwardShim(kind)
    answers = [shim.supports(c) for c in ClassId]
    native = sum(a == Support.NATIVE for a in answers)
    assert native == (12 if kind is Q8MatKind.INT8_ACT else 9)
    assert sum(a.is_refuse for a in answers) == 22
    assert sum(a.is_decompose for a in answers) == 86 - 22 - native


def test_names_and_numerics() -> None:
    names = [ForwardShim(k).name() for k in Q8MatKind]
    assert names == ["cuda-forward:Dequant", "cuda-forward:Int8Act", "cuda-forward:TwoPassInt8"]
    c = ForwardShim(Q8MatKind.TWO_PASS_INT8).numerics().as_dict()
    assert c == {
        "point": "the older forward: TwoPassInt8 activations",
        "activations": "int8 blocks of 32, two_words",
        "cache": "f32",
        "state": "f32",
        "attention": None,
        "fused": "exact",
        "accumulator_bits": 32,
    }
    assert ForwardShim(Q8MatKind.DEQUANT).numerics().activations is None
