"""The forward shim: what the compiled forward (CUDA kernels in one graph) computes.

Source: the seed `forward_shim.rs` — `ForwardShim::{name, supports, fits, rules, activation,
numerics}` and `kernel_refusal`, with the same branches, order of checks and reasons. A reason names
this dialect's syntax where the seed names its own (`capped at C` → the attention's `softcap C`).

Every refusing branch is a numbered `SeedBranch`: `KERNEL_REFUSAL` (K01–K23, `kernel_refusal`'s arms in
seed order), `FITS` (F01–F08), `SUPPORTS` (S01–S13, the `Refuse` arms of `supports`) and, after the
seed's, `BEYOND_SEED` (B01–B11: where fwdshim's kernels compute less than the seed's lane, or where
the seed hides the wording).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gguf
from xdsl.dialects.builtin import Float32Type, Float64Type, IntegerType, TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from fwdshim.classes import ClassId, Q8MatKind, Support
from fwdshim.diagnostics import where
from fwdshim.dialects.attributes import GgmlType, QActType, QuantFormat, WeightsType
from fwdshim.dialects.fwd import (
    REFUSED_PRIMITIVES,
    AttentionOp,
    ElementwiseOp,
    FusedOp,
    GatedDeltaOp,
    LayerNormOp,
    MatmulOp,
    MoeOp,
    QuantizeOp,
    RmsNormOp,
    RopeOp,
    RowReduceOp,
    SetRowOp,
    SiluOp,
    SoftcapOp,
    SoftmaxOp,
    StageOp,
    TransposeOp,
    ViewOp,
    dims_of,
    ggml_type_of,
    leaves,
    numel,
)
from fwdshim.ggml_blocks import GEMV_GGML, GEMV_TYPES, INT8_ACT_GGML, names
from fwdshim.limits import MOE_MAX_EXPERTS, MOE_MAX_TOP_K, STATIC_SHARED_BYTES, attention_limit
from fwdshim.shim.fused_shapes import fused_shape_refusal
from fwdshim.shim.protocol import Contract, Position, Scheme
from fwdshim.shim.refusal import Refusal, SeedBranch

B = SeedBranch

# ---------------------------------------------------------------------------------------------
# the seed's refusing branches, in seed order

ATTN_STATIC_SHARED_BYTES = STATIC_SHARED_BYTES
"""The static shared memory one attention block may declare (`sc[L]` scores plus the 32-float
reduction row): `limits.STATIC_SHARED_BYTES`."""

K01 = B("K01", "an elementwise op over a row combined with every row of a block — its kernel reads both at one index", 43)
K02 = B("K02", "a bias on an RMSNorm — its kernel scales and never shifts", 47)
K03 = B("K03", "a weight, residual or bias on a softmax", 49)
K04 = B("K04", "a residual added before a layernorm", 51)
K05 = B("K05", "a rope reading its angles from a position in a cache of angles", 54)
K06 = B("K06", "a rope with a table row per row of the query — its kernel reads one row of angles", 55)
K07 = B("K07", "a partial rotary — its kernel turns every dimension of the head", 56)
K08 = B("K08", "a soft-capped attention (`softcap C`) — its kernel caps no score", 58)
K09 = B("K09", "a gated delta gated by a sigmoid (`gate sigmoid`) — its kernel gates by SiLU", 59)
K10 = B("K10", "a masked attention (`pos P`) — its kernel attends every cached position", 60)
K11 = B("K11", "a soft-capped tensor (`cap C`) — no kernel caps one", 61)
K12 = B("K12", "an attention with sinks (`sinks(S)`) — its kernel's softmax has no sink", 62)
K13 = B("K13", "a windowed attention (`window W`) — its kernel attends every cached position", 64)
K14 = B("K14", "an attention whose values are narrower than its keys — its kernel reads values as wide as keys", 67)
K15 = B("K15", "an attention with a given scale (`scale S`) — its kernel scales the scores by 1/√HD", 70)
K16 = B("K16", "a causal block of query rows — its kernel attends for one query", 72)
K17 = B("K17", "query heads that do not group evenly over the key/value heads", 73)
K18 = B("K18", "a cache longer than the score row its kernel holds in static shared memory", 75)
K19 = B("K19", "an expert mixture with biases — its kernels add none", 78)
K20 = B("K20", "an expert mixture without renormalizing — its router renormalizes the kept experts' weights", 80)
K21 = B("K21", "an expert mixture with a clamped SwiGLU — its kernels gate with SwiGLU", 82)
K22 = B("K22", "an expert mixture whose router is not a softmax weighting its experts' outputs — scored by sigmoids, biased in its choice, limited to groups, scaled, or weighting its inputs", 84)
K23 = B("K23", "this lane has no kernel for the op", 106)
KERNEL_REFUSAL: tuple[SeedBranch, ...] = (
    K01, K02, K03, K04, K05, K06, K07, K08, K09, K10, K11, K12,
    K13, K14, K15, K16, K17, K18, K19, K20, K21, K22, K23,
)  # fmt: skip

F01 = B("F01", "the forward's stages read and write whole buffers", 168)
F02 = B("F02", "moe stage `{}` has no entry in the MoE weight manifest", 172)
F03 = B("F03", "the forward reads no view into another buffer", 175)
F04 = B("F04", "the forward's precise numerics read no activation quantized", 176)
F05 = B("F05", "the forward adds into a norm only where the norm is the next stage", 190)
F06 = B("F06", "the forward adds into the norm that follows, over the whole of the sum", 191)
F07 = B("F07", "the forward carries a chain's result through each step, as exactly one operand", 202)
F08 = B("F08", "the forward's attention quantizes its result only where each head's values are whole 32-value blocks", 207)
FITS: tuple[SeedBranch, ...] = (F01, F02, F03, F04, F05, F06, F07, F08)

S01 = B("S01", "the forward links no ReLU", 147)
S02 = B("S02", "the forward attends one query over a cache held in one block's shared scores", 148)
S03 = B("S03", "the forward's attention takes no mask, window, sink, soft cap or given scale", 150)
S04 = B("S04", "the forward attends a cache in one block, never in chunks", 152)
S05 = B("S05", "the forward routes by one top-k over every expert", 153)
S06 = B("S06", "the forward computes logits and picks no token", 154)
S07 = B("S07", "the forward links no delta rule", 155)
S08 = B("S08", "the forward holds its caches in f32", 156)
S09 = B("S09", "the forward sums its residual in f32, uncompensated", 157)
S10 = B("S10", "the forward keeps every buffer on the device", 158)
S11 = B("S11", "the forward runs one sequence's row through its kept experts", 159)
S12 = B("S12", "the forward replays a graph of a kernel a stage", 160)
S13 = B("S13", "the forward's stages read and write whole buffers", 161)
SUPPORTS: tuple[SeedBranch, ...] = (S01, S02, S03, S04, S05, S06, S07, S08, S09, S10, S11, S12, S13)

# ---------------------------------------------------------------------------------------------
# branches beyond the seed (seed_line 0), worded in the seed's manner. Their places in the order:
#   B01 first of all, where the seed calls `holds_accumulator(op, g, 32)` (the seed hides its words);
#   B02, B03, B04 in the primitive arm, after `kernel_refusal` (which computes every matmul): the
#   seed's lane dequantizes more GGML types than fwdshim's GEMV, and reads no int8 block elsewhere;
#   B05 last in the primitive arm and in the quantize arm: the seed's tensors are f32 throughout
#   (DESIGN.md §3 names f32 element types a limit of the kernels, refused by legality);
#   B06 in the fused arm, after the leaves, where the seed's `_ => Ok(())` takes the other classes:
#   five Native classes are ones the forward forms itself (its GEMV, its graph, its mixture's three
#   kernels), so a `fwd.fused` of one in input IR is no kernel the lowering can build;
#   B07 last in the fused arm, after the seed's class checks (F05–F08 win): a native class whose
#   parts are not the shape its one kernel computes (`fwdshim.shim.fused_shapes`, the lowering's checks
#   too), e.g. a hand-written `norm_weight` of a silu and a softmax;
#   B08, B09, B10 in the primitive arm after B04, before B05: the limits of the attention and MoE
#   kernels beyond the seed's K18 (`fwdshim.limits`, the factories' own checks): the attention's static
#   shared memory also holds each warp's partial row of the head (heads of 12288 values do not fit),
#   the router keeps at most 32 experts (top_k 33 computed a top-32 mixture) and ranks at most 2048;
#   B11 there too: the block GEMVs and the mixture read rows of whole blocks — 32 values, 256 for the
#   K-quants (Q8_0 rows of 40 values were legal, then fwd-lower-numba failed).
# Whether a block-quantized read matches the contract's `activation()` is no legality verdict (the seed
# checks none): `ForwardShim.read_mismatch`, raised by the lowering and the reference executor.

B01 = B("B01", "an op over 64-bit values — the forward's kernels accumulate in 32 bits")
B02 = B("B02", "a matmul over {} weights — its kernels dequantize " + names(GEMV_TYPES) + " rows only")
B03 = B("B03", "a matmul over a {} tensor — its dense kernel multiplies f32 and f16 rows only")
B04 = B("B04", "`{}` reading a quantized activation — only a block-quantized matmul's and a mixture's kernels read int8 blocks, as their input")
B05 = B("B05", "an op over {} tensors — the forward's kernels read and write f32 buffers")
B06 = B("B06", "a fused {} — the forward forms that class itself, never from fused parts")
B07 = B("B07", "a fused {} of parts its kernel does not compute — {}")
B08 = B("B08", "an attention over heads of {} values — its kernel holds a split's scores and each warp's partial row of the head in 48 KiB of static shared memory")
B09 = B("B09", "an expert mixture keeping {} experts — its router keeps at most " + str(MOE_MAX_TOP_K) + ", one a lane of one warp")
B10 = B("B10", "an expert mixture of {} experts — its router ranks at most " + str(MOE_MAX_EXPERTS) + ", 64 a lane of one warp")
B11 = B("B11", "a matmul or mixture over {} rows of {} values — its kernels read whole blocks of {}")
BEYOND_SEED: tuple[SeedBranch, ...] = (B01, B02, B03, B04, B05, B06, B07, B08, B09, B10, B11)

ALL_BRANCHES: tuple[SeedBranch, ...] = KERNEL_REFUSAL + FITS + SUPPORTS + BEYOND_SEED

_GEMV_TYPES = GEMV_GGML
"""The weight types a matmul's GEMV reads (`fwdshim.ggml_blocks`, one place for the limits)."""
_DENSE_DTYPES = {"f32", "f16"}

# ---------------------------------------------------------------------------------------------
# kernel_refusal: the seed's match, arm by arm (an arm with branch None computes the op)


def _always(op: Operation) -> bool:
    return True


def _rope_partial(r: RopeOp) -> bool:
    return r.hd.value.data != 2 * r.half.value.data


def _attn_groups_unevenly(a: AttentionOp) -> bool:
    h, kv = a.h.value.data, a.kv.value.data
    return kv == 0 or h % kv != 0


def _attn_too_long(a: AttentionOp) -> bool:
    return a.l.value.data * 4 + 32 * 4 > ATTN_STATIC_SHARED_BYTES


_Arm = tuple[tuple[type, ...], Callable[..., bool], SeedBranch | None]
_KERNEL_ARMS: tuple[_Arm, ...] = (
    ((MatmulOp, SiluOp, TransposeOp), _always, None),
    ((ElementwiseOp,), lambda e: e.row is not None, K01),
    ((ElementwiseOp,), _always, None),
    ((RmsNormOp,), lambda r: r.bias is not None, K02),
    ((SoftmaxOp,), lambda r: r.weight is not None or r.residual is not None or r.bias is not None, K03),
    ((LayerNormOp,), lambda r: r.residual is not None, K04),
    ((RowReduceOp,), _always, None),
    ((RopeOp,), lambda r: r.from_ is not None, K05),
    ((RopeOp,), lambda r: r.rows.value.data != 1, K06),
    ((RopeOp,), _rope_partial, K07),
    ((RopeOp,), _always, None),
    ((AttentionOp,), lambda a: a.softcap is not None, K08),
    ((GatedDeltaOp,), lambda g: g.gate.data.value == "sigmoid", K09),
    ((AttentionOp,), lambda a: a.pos is not None, K10),
    ((SoftcapOp,), _always, K11),
    ((AttentionOp,), lambda a: a.sinks is not None, K12),
    ((AttentionOp,), lambda a: a.window is not None, K13),
    ((AttentionOp,), lambda a: a.vd.value.data != a.hd.value.data, K14),
    ((AttentionOp,), lambda a: a.scale is not None, K15),
    ((AttentionOp,), lambda a: a.rows.value.data != 1, K16),
    ((AttentionOp,), _attn_groups_unevenly, K17),
    ((AttentionOp,), _attn_too_long, K18),
    ((AttentionOp,), _always, None),
    ((MoeOp,), lambda m: m.router_bias is not None or any(b is not None for b in m.biases), K19),
    ((MoeOp,), lambda m: m.renormalize is None, K20),
    ((MoeOp,), lambda m: m.act.data.value != "swiglu", K21),
    ((MoeOp,), lambda m: not m.weighs_outputs_by_softmax(), K22),
    ((MoeOp,), _always, None),
    ((*REFUSED_PRIMITIVES, GatedDeltaOp), _always, K23),
)


def owns_destination(op: StageOp) -> bool:
    """The seed's `dst.own()`: a stage owns its output buffer unless it writes into rows of another —
    `fwd.set_row` always does, any stage with `into` does (DESIGN.md §2)."""
    return op.into is None and not isinstance(op, SetRowOp)


def is_primitive(op: Operation) -> bool:
    """A primitive stage (the seed's `Sym::Prim`): a stage other than quantize, view and fused."""
    return isinstance(op, StageOp) and not isinstance(op, QuantizeOp | ViewOp | FusedOp)


def _operation(op: object) -> None:
    """TypeError unless `op` is an xDSL Operation (a None answer must mean "computed", never "not an op")."""
    if not isinstance(op, Operation):
        raise TypeError(f"expected an xDSL Operation, not {type(op).__name__} {op!r:.60}")


def _class_id(cls: object) -> ClassId:
    """`cls` as a ClassId: a ClassId, or its IR spelling. Raises ValueError / TypeError."""
    if isinstance(cls, ClassId):
        return cls
    if isinstance(cls, str):
        try:
            return ClassId(cls)
        except ValueError:
            raise ValueError(f"`{cls}` is not a kernel class (ClassId)") from None
    raise TypeError(f"expected a ClassId or its name, not {type(cls).__name__} {cls!r:.60}")


def _specifics(op: Operation, branch: SeedBranch) -> str:
    """The numbers behind a `kernel_refusal` verdict, as a parenthesis after the seed's sentence
    (`… for the op (fwd.gelu)`, `… key/value heads (h 10 over kv 3)`), or "" where the sentence says
    it all. The seed's words stay as they are: a reason is its sentence, then these."""
    a = op
    match branch.id:
        case "K06" | "K16":
            return f" (rows {a.rows.value.data})"
        case "K07":
            return f" (hd {a.hd.value.data}, half {a.half.value.data})"
        case "K14":
            return f" (vd {a.vd.value.data} under hd {a.hd.value.data})"
        case "K17":
            return f" (h {a.h.value.data} over kv {a.kv.value.data})"
        case "K18":
            need = a.l.value.data * 4 + 32 * 4
            return f" (l {a.l.value.data}: {need} bytes of scores, {ATTN_STATIC_SHARED_BYTES} held)"
        case "K23":
            return f" ({op.name})"
    return ""


def kernel_reason(op: Operation) -> tuple[SeedBranch, str] | None:
    """The `kernel_refusal` branch that refuses primitive `op` and the reason a user reads (its
    sentence, then the op's numbers: `_specifics`), or None when the kernels compute it."""
    branch = kernel_branch(op)
    return None if branch is None else (branch, branch.reason + _specifics(op, branch))


def kernel_branch(op: Operation) -> SeedBranch | None:
    """The `kernel_refusal` branch that refuses primitive `op`, or None when its kernels compute it
    (and for anything that is not a primitive: `fits` judges those). Raises: TypeError when `op` is
    not an xDSL Operation."""
    _operation(op)
    for types, guard, branch in _KERNEL_ARMS:
        if isinstance(op, types) and guard(op):
            return branch
    return None


def kernel_refusal(op: Operation) -> str | None:
    """Why the forward's kernels do not compute the primitive `op`, or None when they do (seed
    `kernel_refusal`). A property of the op the kernel does not implement is a refusal, never a
    property the kernel ignores."""
    branch = kernel_branch(op)
    return None if branch is None else branch.reason


# ---------------------------------------------------------------------------------------------
# the seed's helpers


def _is_64bit(t: Attribute) -> bool:
    if isinstance(t, TensorType):
        e = t.element_type
        return isinstance(e, Float64Type) or (isinstance(e, IntegerType) and e.width.data == 64)
    if isinstance(t, WeightsType):
        return t.type in (GgmlType.F64, GgmlType.I64)
    return isinstance(t, Float64Type) or (isinstance(t, IntegerType) and t.width.data == 64)


def holds_accumulator(op: Operation) -> bool:
    """Whether every value `op` reads or produces fits the forward's 32-bit accumulators."""
    return not any(_is_64bit(v.type) for v in (*op.operands, *op.results))


@dataclass(frozen=True)
class Norm:
    """The seed's `norm(op)`: `part` — the norm normalizes rows narrower than the sum (per head);
    `pre` — the norm carries a residual operand of its own."""

    part: bool
    pre: bool


def norm(op: Operation) -> Norm | None:
    """The norm of a fused op — its first RMS or layer norm leaf — or None when it holds none.

    `part` compares the norm's row with the first leaf's result (the sum of an add_norm)."""
    found = [p for p in leaves(op) if isinstance(p, RmsNormOp | LayerNormOp)]
    if not found:
        return None
    n = found[0]
    first = leaves(op)[0]
    row = (dims_of(n.x.type) or (0,))[-1]
    whole = numel(first.results[0].type) if first.results and first is not n else numel(n.x.type)
    return Norm(part=whole is not None and row < whole, pre=n.residual is not None)


def _not_f32(op: Operation) -> Refusal | None:
    """B05: a tensor of `op` (a matmul's `w` aside: B02/B03 judge it) whose elements are not f32."""
    values = [v for i, v in enumerate(op.operands) if not (i == 1 and isinstance(op, MatmulOp))]
    for v in (*values, *op.results):
        t = v.type
        if isinstance(t, TensorType) and not isinstance(t.element_type, Float32Type):
            return Refusal.of(op, B05, B05.why(str(t.element_type)))
    return None


def _q8_weights(value: SSAValue) -> bool:
    return ggml_type_of(value) == "q8_0"


def _int8_weights(value: SSAValue) -> bool:
    """Weights whose GEMV reads an int8 activation (`ggml_blocks.INT8_ACT_TYPES`)."""
    t = value.type
    return isinstance(t, WeightsType) and t.type in INT8_ACT_GGML


def _stage_name(op: Operation) -> str:
    hint = op.results[0].name_hint if op.results else None
    return f"%{hint}" if hint else f"{op.name} at {where(op)}"


# ---------------------------------------------------------------------------------------------
# the supports table

C = ClassId
_N, _D = Support.NATIVE, Support.DECOMPOSE

_NATIVE = {C.NORM_WEIGHT, C.ADD_NORM, C.ELEMENTWISE_CHAINS, C.ELEMENTWISE_REGIONS,
           C.GEMM_DEQUANT_INKERNEL, C.CUDA_GRAPHS, C.ROUTER_TOPK, C.MOE_GATE_UP_ACT,
           C.MOE_DOWN_COMBINE}  # fmt: skip
_PRODUCER_QUANT = {C.NORM_QUANT, C.ADD_NORM_QUANT, C.ATTN_OUTPUT_QUANT}
_SELF_FORMED = {C.GEMM_DEQUANT_INKERNEL, C.CUDA_GRAPHS, C.ROUTER_TOPK, C.MOE_GATE_UP_ACT, C.MOE_DOWN_COMBINE}
"""Native classes no `fwd.fused` op holds: the GEMV, the graph, and a `fwd.moe`'s three kernels (B06)."""
REFUSED_CLASSES: dict[ClassId, SeedBranch] = {
    C.RELU_SQR: S01,
    C.FLASH_DECODE: S02, C.FLASH_PREFILL: S02,
    C.ATTENTION_VARIANTS_INLINE: S03, C.SOFTCAP: S03, C.MIXED_BATCH_ATTENTION: S03, C.SPARSE_ATTENTION: S03,
    C.ATTN_GQA_ROW_PACKING: S04, C.ATTN_LSE_MERGE: S04,
    C.GROUPED_TOPK: S05,
    C.SAMPLING: S06,
    C.GDN_STEP: S07,
    C.KV_CACHE_QUANT: S08, C.HADAMARD_ROTATION: S08,
    C.COMPENSATED_RESIDUAL: S09,
    C.HOST_RESIDENT_KV: S10,
    C.MOE_DIRECT_PAIRS: S11,
    C.PERSISTENT_LAYER_MEGAKERNEL: S12,
    C.STRIDED_READ: S13, C.ROW_WRITE: S13, C.JOIN_IN_PLACE: S13, C.STRIDED_VALUES: S13,
}  # fmt: skip
"""The 22 classes the forward refuses, each with its `supports` branch (S01–S13)."""


@dataclass(frozen=True)
class ForwardShim:
    """The older compiled forward under its numerics `kind` (the seed's `ForwardShim`)."""

    kind: Q8MatKind = Q8MatKind.DEQUANT

    def __post_init__(self) -> None:
        # the spelling of a pass option is accepted (`ForwardShim("int8-act")`); anything else is a
        # TypeError here, not an AttributeError from the first method called
        if isinstance(self.kind, str):
            object.__setattr__(self, "kind", Q8MatKind.parse(self.kind))
        elif not isinstance(self.kind, Q8MatKind):
            raise TypeError(f"ForwardShim(kind): a Q8MatKind or its spelling, not {self.kind!r}")

    def name(self) -> str:
        """`cuda-forward:Dequant`, `cuda-forward:Int8Act` or `cuda-forward:TwoPassInt8`."""
        return f"cuda-forward:{self.kind.seed_name}"

    def supports(self, cls: ClassId | str) -> Support:
        """The seed's `supports` table: 9 native classes (12 under INT8_ACT), 22 refused, the rest
        DECOMPOSE. `cls` may be given as the IR spells it (`"norm_weight"`). Raises: ValueError for
        a name that is no class, TypeError for anything else (never a silent DECOMPOSE)."""
        cls = _class_id(cls)
        if cls in _NATIVE:
            return _N
        if cls in _PRODUCER_QUANT:
            return _N if self.kind is Q8MatKind.INT8_ACT else _D
        if cls in REFUSED_CLASSES:
            return Support.REFUSE(REFUSED_CLASSES[cls].reason)
        return _D

    def fits(self, op: Operation) -> str | None:
        """None when the forward computes the stage `op`, else the reason it does not (seed `fits`).
        Raises: TypeError when `op` is not an xDSL Operation (None is the answer "it fits")."""
        r = self.refusal(op)
        return None if r is None else r.reason

    def refusal(self, op: Operation) -> Refusal | None:
        """`fits` as data: the refusal of stage `op` with its branch, or None when it fits.

        Order (the seed's): 64-bit values (B01); access and ownership (F01); then by kind — a MoE
        outside the manifest (its kernel reason, else F02), a primitive (`kernel_refusal`, then
        B02–B05), a view (F03), a quantize under DEQUANT (F04, else B05), a fused op (each leaf, then its
        class: a self-formed class B06, add_norm F05/F06, elementwise_chains F07, attn_output_quant F08, then
        the shape its kernel computes B07). `supports` is not
        consulted here: the legality pass asks it first."""
        _operation(op)
        if not isinstance(op, StageOp):
            return None
        if not holds_accumulator(op):
            return Refusal.of(op, B01)
        if any(a != "whole" for a in op.accesses()) or not owns_destination(op):
            return Refusal.of(op, F01)
        if isinstance(op, MoeOp) and not all(_q8_weights(w) for w in op.operands[1:5]):
            found = kernel_reason(op)
            if found is not None:
                return Refusal.of(op, *found)
            return Refusal.of(op, F02, F02.why(_stage_name(op)))
        if is_primitive(op):
            found = kernel_reason(op)
            if found is not None:
                return Refusal.of(op, *found)
            return self._beyond_seed(op)
        if isinstance(op, ViewOp):
            return Refusal.of(op, F03)
        if isinstance(op, QuantizeOp):
            return Refusal.of(op, F04) if self.kind is Q8MatKind.DEQUANT else _not_f32(op)
        assert isinstance(op, FusedOp)
        return self._fused(op)

    def _beyond_seed(self, op: Operation) -> Refusal | None:
        """B02–B04, B11, B08–B10, B05 for a primitive `kernel_refusal` passes."""
        if isinstance(op, MatmulOp):
            w = op.w.type
            if isinstance(w, WeightsType) and w.type not in _GEMV_TYPES:
                return Refusal.of(op, B02, B02.why(w.type.name))
            if isinstance(w, TensorType) and str(w.element_type) not in _DENSE_DTYPES:
                return Refusal.of(op, B03, B03.why(str(w.element_type)))
        for i, v in enumerate(op.operands):
            if not isinstance(v.type, QActType):
                continue
            reads_blocks = i == 0 and (isinstance(op, MoeOp) or (isinstance(op, MatmulOp) and _int8_weights(op.w)))
            if not reads_blocks:
                return Refusal.of(op, B04, B04.why(op.name))
        for w in op.operands[1:5] if isinstance(op, MoeOp | MatmulOp) else ():
            t = w.type
            k = (dims_of(t) or (0,))[-1] if isinstance(t, WeightsType) else 0
            if isinstance(t, WeightsType) and t.type.value not in _DENSE_DTYPES | {"bf16"}:
                block = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[t.type.name]][0]
                if k % block:
                    return Refusal.of(op, B11, B11.why(t.type.name, k, block))
        if isinstance(op, AttentionOp):
            h, kv, hd, l = (getattr(op, n).value.data for n in ("h", "kv", "hd", "l"))  # noqa: E741
            if attention_limit(h, kv, hd, l) is not None:
                return Refusal.of(op, B08, B08.why(hd))
        if isinstance(op, MoeOp):
            e, top_k = op.n_expert.value.data, op.top_k.value.data
            if top_k > MOE_MAX_TOP_K:
                return Refusal.of(op, B09, B09.why(top_k))
            if e > MOE_MAX_EXPERTS:
                return Refusal.of(op, B10, B10.why(e))
        return _not_f32(op)

    def read_mismatch(self, op: Operation) -> str | None:
        """Why stage `op` (or a leaf of a fused `op`) reads its activation in another format than
        the contract's `activation()` says — a block-quantized matmul or a mixture reading f32 under
        int8-act (IR that skipped `fwd-quantize-activations`), `one_word` blocks under two-pass-int8,
        or any quantized activation under dequant; None when every read matches. Not a verdict of
        `fits`: the seed places its quantizes by `activation()` and checks none of them, so
        legality answers as the seed does, and the lowering (`codegen.plan`) and the reference
        executor, which use the numerics, raise this as a located error: a plan never runs
        numerics other than its contract."""
        for leaf in leaves(op) if isinstance(op, FusedOp) else [op]:
            why = self._read_mismatch(leaf)
            if why is not None:
                return why
        return None

    def _read_mismatch(self, op: Operation) -> str | None:
        if not (self.q8_product(op) or isinstance(op, MoeOp)):
            return None
        want = self.activation(op, 0)
        t = op.operands[0].type
        have = t.format.data if isinstance(t, QActType) else None
        if have == want:
            return None
        element = str(t.element_type) if isinstance(t, TensorType) else str(t)
        has = f"a {have.value}" if have is not None else f"{'an' if element[0] in 'fi' else 'a'} {element}"
        if want is None:
            if isinstance(op.operands[0].owner, QuantizeOp | FusedOp):
                return None  # the quantize that made it is refused (F04): one error, at the quantize
            made = "int8-act" if have is QuantFormat.ONE_WORD else "two-pass-int8"
            reads = (f"every activation as f32 (fwd-quantize-activations{{numerics={made}}} makes {have.value} blocks: "
                     "run the pipeline on the IR from before it)")  # fmt: skip
        else:
            fix = (  # the pass quantizes f32 reads only: a read quantized otherwise is the IR's own
                f"fwd-quantize-activations{{numerics={self.kind.value}}} places their quantizes"
                if have is None
                else f"this one was quantized for other numerics: run fwd-quantize-activations{{numerics={self.kind.value}}} "
                "on the IR from before that"
            )
            reads = f"a block-quantized matmul's and a mixture's activation as {want.value} blocks ({fix})"
        return f"`{op.name}` reading {has} activation — the {self.kind.value} numerics read {reads}"

    def _fused(self, op: FusedOp) -> Refusal | None:
        for leaf in leaves(op):
            r = self.refusal(leaf)
            if r is not None:
                return Refusal(op.name, where(op), r.reason, r.branch)
        cls = op.class_id
        if cls in _SELF_FORMED:
            return Refusal.of(op, B06, B06.why(cls.value))
        r = None
        if cls is C.ADD_NORM:
            r = self._add_norm(op)
        elif cls is C.ELEMENTWISE_CHAINS:
            r = self._chain(op)
        elif cls is C.ATTN_OUTPUT_QUANT:
            r = self._attn_quant(op)
        if r is not None:
            return r
        what = fused_shape_refusal(op)
        return None if what is None else Refusal.of(op, B07, B07.why(cls.value, what))

    @staticmethod
    def _attn_quant(op: FusedOp) -> Refusal | None:
        host = op.parts()[0]
        ok = isinstance(host, AttentionOp) and host.hd.value.data % 32 == 0
        return None if ok else Refusal.of(op, F08)

    @staticmethod
    def _add_norm(op: FusedOp) -> Refusal | None:
        covers = op.part_covers()
        nxt = covers[0][-1] + 1 == covers[-1][0]
        n = norm(op)
        if n is None or n.part or n.pre:
            return Refusal.of(op, F06)
        return None if nxt else Refusal.of(op, F05)

    @staticmethod
    def _chain(op: FusedOp) -> Refusal | None:
        parts = op.parts()
        for prev, step in zip(parts, parts[1:]):
            out = set(prev.results)
            carried = isinstance(step, ElementwiseOp) and ((step.a in out) ^ (step.b in out))
            if not (carried or isinstance(step, SiluOp)):
                return Refusal.of(op, F07)
        return None

    def rules(self) -> list[tuple[Position, str]]:
        """The forward takes its regions of elementwise ops, then its runs, before a norm takes a sum."""
        return [
            (Position.BEFORE("add_norm"), "elementwise_regions"),
            (Position.BEFORE("add_norm"), "elementwise_chains"),
        ]

    @staticmethod
    def q8_product(op: Operation) -> bool:
        """Whether a product reads block-quantized rows (Q8_0 and the affine types of
        `ggml_blocks`): the forward's int8 projections, read against an int8 activation."""
        return isinstance(op, MatmulOp) and _int8_weights(op.w)

    def activation(self, consumer: Operation, operand: int) -> QuantFormat | None:
        """Operand 0 of a block-quantized matmul or a MoE is read quantized: one_word under INT8_ACT,
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
