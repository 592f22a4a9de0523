"""The forward shim: what the compiled forward (CUDA kernels in one graph) computes.

Source: the seed `forward_shim.rs` — `ForwardShim::{name, supports, fits, rules, activation,
numerics}` and `kernel_refusal`, with the same branches, order of checks and reasons.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation

from fwdshim.classes import ClassId, Q8MatKind, Support
from fwdshim.dialects.attributes import QuantFormat
from fwdshim.dialects.fwd import MatmulOp, MoeOp, ggml_type_of
from fwdshim.shim import Contract, Position, Scheme

C = ClassId
_N, _D = Support.NATIVE, Support.DECOMPOSE

_NATIVE = {C.NORM_WEIGHT, C.ADD_NORM, C.ELEMENTWISE_CHAINS, C.ELEMENTWISE_REGIONS,
           C.GEMM_DEQUANT_INKERNEL, C.CUDA_GRAPHS, C.ROUTER_TOPK, C.MOE_GATE_UP_ACT,
           C.MOE_DOWN_COMBINE}  # fmt: skip
_PRODUCER_QUANT = {C.NORM_QUANT, C.ADD_NORM_QUANT, C.ATTN_OUTPUT_QUANT}
_REFUSE: dict[ClassId, str] = {
    C.RELU_SQR: "the forward links no ReLU",
    C.FLASH_DECODE: "the forward attends one query over a cache held in one block's shared scores",
    C.FLASH_PREFILL: "the forward attends one query over a cache held in one block's shared scores",
    **dict.fromkeys(
        (C.ATTENTION_VARIANTS_INLINE, C.SOFTCAP, C.MIXED_BATCH_ATTENTION, C.SPARSE_ATTENTION),
        "the forward's attention takes no mask, window, sink, soft cap or given scale",
    ),
    C.ATTN_GQA_ROW_PACKING: "the forward attends a cache in one block, never in chunks",
    C.ATTN_LSE_MERGE: "the forward attends a cache in one block, never in chunks",
    C.GROUPED_TOPK: "the forward routes by one top-k over every expert",
    C.SAMPLING: "the forward computes logits and picks no token",
    C.GDN_STEP: "the forward links no delta rule",
    C.KV_CACHE_QUANT: "the forward holds its caches in f32",
    C.HADAMARD_ROTATION: "the forward holds its caches in f32",
    C.COMPENSATED_RESIDUAL: "the forward sums its residual in f32, uncompensated",
    C.HOST_RESIDENT_KV: "the forward keeps every buffer on the device",
    C.MOE_DIRECT_PAIRS: "the forward runs one sequence's row through its kept experts",
    C.PERSISTENT_LAYER_MEGAKERNEL: "the forward replays a graph of a kernel a stage",
    **dict.fromkeys(
        (C.STRIDED_READ, C.ROW_WRITE, C.JOIN_IN_PLACE, C.STRIDED_VALUES),
        "the forward's stages read and write whole buffers",
    ),
}


@dataclass(frozen=True)
class ForwardShim:
    """The older compiled forward under its numerics `kind` (the seed's `ForwardShim`)."""

    kind: Q8MatKind = Q8MatKind.DEQUANT

    def name(self) -> str:
        """`cuda-forward:Dequant`, `cuda-forward:Int8Act` or `cuda-forward:TwoPassInt8`."""
        return f"cuda-forward:{self.kind.seed_name}"

    def supports(self, cls: ClassId) -> Support:
        """The seed's `supports` table: 9 native classes (12 under INT8_ACT), 19 refused, the rest
        DECOMPOSE."""
        if cls in _NATIVE:
            return _N
        if cls in _PRODUCER_QUANT:
            return _N if self.kind is Q8MatKind.INT8_ACT else _D
        if cls in _REFUSE:
            return Support.REFUSE(_REFUSE[cls])
        return _D

    def rules(self) -> list[tuple[Position, str]]:
        """The forward takes its regions of elementwise ops, then its runs, before a norm takes a sum."""
        return [
            (Position.BEFORE("add_norm"), "elementwise_regions"),
            (Position.BEFORE("add_norm"), "elementwise_chains"),
        ]

    @staticmethod
    def q8_product(op: Operation) -> bool:
        """Whether a product reads Q8_0 rows: the forward's int8 projection."""
        return isinstance(op, MatmulOp) and ggml_type_of(op.w) == "q8_0"

    def activation(self, consumer: Operation, operand: int) -> QuantFormat | None:
        """Operand 0 of a Q8_0 matmul or a MoE is read quantized: one_word under INT8_ACT,
        two_words under TWO_PASS_INT8; nothing under DEQUANT."""
        if self.kind is Q8MatKind.DEQUANT:
            return None
        fmt = QuantFormat.ONE_WORD if self.kind is Q8MatKind.INT8_ACT else QuantFormat.TWO_WORDS
        if operand == 0 and (self.q8_product(consumer) or isinstance(consumer, MoeOp)):
            return fmt
        return None

    def numerics(self) -> Contract:
        """The contract: activations per the kind, caches and state f32, exact fusion, 32-bit sums."""
        activations = {
            Q8MatKind.DEQUANT: None,
            Q8MatKind.INT8_ACT: Scheme.of(QuantFormat.ONE_WORD),
            Q8MatKind.TWO_PASS_INT8: Scheme.of(QuantFormat.TWO_WORDS),
        }[self.kind]
        return Contract(point=f"the older forward: {self.kind.seed_name} activations", activations=activations)
