"""The shim vocabulary: fused kernel classes, a shim's answer for one, and the forward's numerics.

Source: the seed `forward_shim.rs` (`ClassId`, `Support`, `Q8MatKind`). `ClassId` lists the 86 classes
of the seed's `supports` match in the seed's order; each member's value is its snake_case name, the
name a `fwd.fused` op's `class` property carries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum


def _snake(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


_SEED_CLASSES = """
NormWeight AddNorm ElementwiseChains ElementwiseRegions GemmDequantInkernel CudaGraphs
RouterTopk MoeGateUpAct MoeDownCombine
NormQuant AddNormQuant AttnOutputQuant
AttnOutputGate RowWriteQuant
NormThenAdd NormScale NormWeightOffset DualNorm GatedNorm EmbedNorm EmbedScale
GemvNormEpilogue PrefillNormEpilogues AttnResidualNorm RecomputeFanout
QkNormRope QkNormRopeKvAppend RopeKvAppend RopeQkOneLaunch QkNormRopeGateSplit QkvHeadEpilogue
HorizontalNormRopeInsert CrossLayerLaunch Mla MlaPrologue MlaUnabsorbInFold
GluActMul GluActMulQuant GemvGateUpGlu MaskedExpertActivation
GemmBias GemmScale MergedQkv MergedGateUp AffineInputFold RouterSharedGateMerge
MoeTokenSort MoeGatherInOperand MoeDeferredFinalize SharedExpertFusion
GdnInputEpilogue GdnDecodeWhole GdnPostConvPrep ConvBiasSilu ConvParts ConvSiluL2norm
GdnGateProjections GdnGating FusedSampling LastLayerRows AllreduceNorm
ElementwiseQuant GdnOutputQuant GemvQuant
ReluSqr
FlashDecode FlashPrefill
AttentionVariantsInline Softcap MixedBatchAttention SparseAttention
AttnGqaRowPacking AttnLseMerge
GroupedTopk
Sampling
GdnStep
KvCacheQuant HadamardRotation
CompensatedResidual
HostResidentKv
MoeDirectPairs
PersistentLayerMegakernel
StridedRead RowWrite JoinInPlace StridedValues
""".split()

ClassId = Enum(  # type: ignore[misc]
    "ClassId",
    [(_snake(c).upper(), _snake(c)) for c in _SEED_CLASSES],
    module=__name__,
)
ClassId.__doc__ = """A fused kernel class of the shared optimizer (the seed's `ClassId`, 86 members).

`ClassId.ADD_NORM.value == "add_norm"`; `ClassId("add_norm")` looks a class up by its name."""

assert len(ClassId) == 86


def class_named(name: str) -> ClassId | None:
    """The class whose snake_case name is `name`, or None."""
    try:
        return ClassId(name)
    except ValueError:
        return None


@dataclass(frozen=True)
class Support:
    """A shim's answer for a class (the seed's `Support`): NATIVE, DECOMPOSE or REFUSE(reason)."""

    kind: str
    reason: str | None = None

    NATIVE: "Support" = None  # type: ignore[assignment]  # set below
    DECOMPOSE: "Support" = None  # type: ignore[assignment]

    @staticmethod
    def REFUSE(reason: str) -> "Support":  # noqa: N802 - the seed's name
        return Support("refuse", reason)

    @property
    def is_native(self) -> bool:
        return self.kind == "native"

    @property
    def is_decompose(self) -> bool:
        return self.kind == "decompose"

    @property
    def is_refuse(self) -> bool:
        return self.kind == "refuse"

    def __str__(self) -> str:
        return f"refuse: {self.reason}" if self.is_refuse else self.kind


Support.NATIVE = Support("native")
Support.DECOMPOSE = Support("decompose")


class Q8MatKind(Enum):
    """The forward's numerics (the seed's `Q8MatKind`); the value is the pass option spelling."""

    DEQUANT = "dequant"
    INT8_ACT = "int8-act"
    TWO_PASS_INT8 = "two-pass-int8"

    @property
    def seed_name(self) -> str:
        """`Dequant`, `Int8Act`, `TwoPassInt8`: the seed's Debug spelling, used in `name()`."""
        return {"dequant": "Dequant", "int8-act": "Int8Act", "two-pass-int8": "TwoPassInt8"}[self.value]

    @staticmethod
    def parse(text: str) -> "Q8MatKind":
        """The numerics a pass option or `--numerics` names; ValueError (one line) for another."""
        try:
            return Q8MatKind(text)
        except ValueError:
            raise ValueError(
                f"unknown numerics `{text}` (expected dequant, int8-act or two-pass-int8)"
            ) from None


NUMERICS: tuple[str, ...] = tuple(kind.value for kind in Q8MatKind)
"""The numerics spellings (pass options `numerics=...`, `fwdshim run --numerics`), in the seed's order."""
