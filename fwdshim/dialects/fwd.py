"""The `fwd` dialect: the decode step of a transformer as the seed's stages.

One op per seed `TensorOpSpec` variant (the seed's `FusedRow` is three ops: `fwd.rms_norm`,
`fwd.softmax`, `fwd.layer_norm`), plus `fwd.weight`, `fwd.quantize`, `fwd.view`, `fwd.fused` and
`fwd.yield`. Activations are builtin `tensor<...xf32>` values; weights are `!fwd.weights` values.

Every stage may carry `access` (one `#fwd.access` per operand, default whole) and `into` (the name of
a buffer it writes rows of, so it does not own its destination).

Verifiers check structure only (operand shapes against each other and the properties). A limit of the
forward's kernels (`h % kv`, a partial rotary, f64, the 48 KiB score row, ...) is not a verify error:
such IR parses and verifies and the legality pass refuses it with the seed's reason.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Iterator, Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    DenseArrayBase,
    FloatAttr,
    Float32Type,
    IntegerAttr,
    StringAttr,
    TensorType,
    UnitAttr,
    UnrankedTensorType,
    f32,
    i64,
)
from xdsl.ir import Attribute, BlockArgument, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    irdl_custom_directive,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
    ConditionallySpeculatable,
    EffectInstance,
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    MemoryEffect,
    MemoryEffectKind,
    Pure,
    get_effects,
    is_speculatable,
)
from xdsl.utils.exceptions import VerifyException

from fwdshim.classes import ClassId, class_named
from fwdshim.dialects.attributes import (
    AccessAttr,
    ElementwiseKindAttr,
    GateActAttr,
    GgmlTypeAttr,
    MoeActAttr,
    MoeScoringAttr,
    QActType,
    QuantFormat,
    QuantFormatAttr,
    WeightsType,
)


@irdl_custom_directive
class Kw(CustomDirective):
    """An enum (or a string) property written as a bare keyword: `fwd.elementwise add %a, %b`."""

    attribute: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> bool:
        name = self.attribute.name
        kind = _KEYWORD_PROPS[name]
        start = parser.pos
        if kind is StringAttr and (text := parser.parse_optional_str_literal()) is not None:
            self.attribute.set(state, StringAttr(text))  # as `print_identifier_or_string_literal` prints
            return True
        word = parser.parse_optional_identifier()
        if word is None:
            parser.raise_error(f"expected a `{name}` keyword")
        if kind is StringAttr:
            self.attribute.set(state, StringAttr(word))
            return True
        try:
            self.attribute.set(state, kind(kind.enum_type(word)))
        except ValueError:
            allowed = ", ".join(m.value for m in kind.enum_type)
            parser.raise_error(f"unknown {name} `{word}` (expected one of: {allowed})", start, start + len(word))
        return True

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        attr = self.attribute.get(op)
        state.print_whitespace(printer)
        if isinstance(attr, StringAttr):
            printer.print_identifier_or_string_literal(attr.data)
        else:
            printer.print_string(attr.data.value)  # type: ignore[union-attr]

    def is_present(self, op: IRDLOperation) -> bool:
        return self.attribute.get(op) is not None


_KEYWORD_PROPS: dict[str, type] = {
    "kind": ElementwiseKindAttr,
    "gate": GateActAttr,
    "act": MoeActAttr,
    "scoring": MoeScoringAttr,
    "format": QuantFormatAttr,
    "class": StringAttr,
}

_STAGE_SUFFIX = "(`access` $access^)? (`into` $into^)? attr-dict"


# ---------------------------------------------------------------------------------------------
# shape helpers


def dims_of(t: Attribute) -> tuple[int, ...] | None:
    """The static shape of a tensor or weights type, or None for other types."""
    if isinstance(t, TensorType):
        return tuple(t.get_shape())
    if isinstance(t, WeightsType):
        return t.dims
    if isinstance(t, QActType):
        return (t.size.data,)
    return None


def numel(t: Attribute) -> int | None:
    d = dims_of(t)
    if d is None:
        return None
    n = 1
    for x in d:
        n *= x
    return n


def _int(op: Operation, name: str) -> int | None:
    a = op.properties.get(name)
    return a.value.data if isinstance(a, IntegerAttr) else None


def _float(op: Operation, name: str) -> float | None:
    a = op.properties.get(name)
    return a.value.data if isinstance(a, FloatAttr) else None


def _f32_text(v: float) -> str:
    """The shortest text of `v` that rounds to the same f32 (`-1.0e-05` parses to -9.99999974e-06 as
    an f32 attribute, and is said as `-1e-05`)."""
    try:
        want = struct.pack("<f", v)
    except OverflowError:
        return repr(v)
    for digits in range(1, 10):
        text = f"{v:.{digits}g}"
        try:  # "3.4028235e+38" (FLT_MAX's shortest text) is past FLT_MAX as a double: struct refuses it
            if struct.pack("<f", float(text)) == want:
                return text
        except OverflowError:
            continue
    return repr(v)


def _finite_f32(v: float) -> bool:
    """Whether `v` is a finite float32 once rounded (`1.0e999` is inf, `1e39` overflows f32)."""
    try:
        return math.isfinite(struct.unpack("<f", struct.pack("<f", v))[0])
    except OverflowError:
        return False


def _dims(t) -> str:
    """A type's shape as written (`9x64`), or the type itself when it has none."""
    d = dims_of(t)
    return "x".join(map(str, d)) if d is not None else str(t)


def _want(cond: bool, message: str) -> None:
    if not cond:
        raise VerifyException(message)


# ---------------------------------------------------------------------------------------------
# base classes


class StageOp(IRDLOperation):
    """A stage of the decode step: an op that computes (not `fwd.weight`, not `fwd.yield`).

    Every stage reads and yields ranked tensors of static shapes, `!fwd.qact` or `!fwd.weights` (no
    memref, vector or scalar). A typed stage (not an op the forward never computes, not
    a fused op) reads `!fwd.weights` only at its `WEIGHT_OPERANDS` and yields no `!fwd.weights`; only
    `fwd.quantize` yields a `!fwd.qact`; its tensors hold values (but at its `EMPTY_OPERANDS`)."""

    access = opt_prop_def(ArrayAttr[AccessAttr])
    into = opt_prop_def(StringAttr)

    WEIGHT_OPERANDS: ClassVar[frozenset[int]] = frozenset()
    """The operand positions that may be `!fwd.weights` (a matmul's `w`, a mixture's matrices)."""

    EMPTY_OPERANDS: ClassVar[frozenset[int]] = frozenset()
    """The operand positions that may hold no values (an attention's k, v and caches: `l = 1`,
    `kv = 0`); every other tensor of a typed stage is non-empty."""

    TYPED: ClassVar[bool] = True
    """Whether the weights/quantized-activation/non-empty rules above apply (not to refused or fused
    ops)."""

    def accesses(self) -> list[str]:
        """One access per operand (`whole` where none is given)."""
        if self.access is None:
            return ["whole"] * len(self.operands)
        return [a.data.value for a in self.access.data]

    def verify_stage(self) -> None:
        for name, a in self.properties.items():  # eps, scale, cap, ...: an f32 the kernels read as is
            if isinstance(a, FloatAttr) and not _finite_f32(a.value.data):
                raise VerifyException(f"{self.name} {name} is {a.value.data}: not a finite f32 value")
        if self.access is not None:
            _want(
                len(self.access.data) == len(self.operands),
                f"`access` gives {len(self.access.data)} entries for {len(self.operands)} operands",
            )
        for what, v in self._values():
            t = v.type
            if isinstance(t, UnrankedTensorType):
                raise VerifyException(f"{self.name} {what} is an unranked tensor ({t})")
            if isinstance(t, TensorType) and any(d < 0 for d in t.get_shape()):
                raise VerifyException(f"{self.name} {what} has a dynamic shape ({t})")
        if self.TYPED:
            self.verify_value_kinds()

    def _values(self) -> Iterator[tuple[str, SSAValue]]:
        """(`operand i` / `result`, value) of every operand and result."""
        for i, v in enumerate(self.operands):
            yield f"operand {i}", v
        for i, r in enumerate(self.results):
            yield ("result" if len(self.results) == 1 else f"result {i}"), r

    def verify_value_kinds(self) -> None:
        """The weights, quantized-activation and non-empty rules (messages built on failure only)."""
        for i, v in enumerate(self.operands):
            t = v.type
            if isinstance(t, WeightsType) and i not in self.WEIGHT_OPERANDS:
                raise VerifyException(
                    f"{self.name} operand {i} is {t}: a stage reads weights only as a matmul's `w` or a mixture's matrices"
                )
            if isinstance(t, TensorType) and numel(t) == 0 and i not in self.EMPTY_OPERANDS:
                raise VerifyException(f"{self.name} operand {i} holds no values ({t})")
        for r in self.results:
            t = r.type
            if isinstance(t, TensorType) and numel(t) == 0:
                raise VerifyException(f"{self.name} yields no values ({t})")
            if isinstance(t, WeightsType):
                raise VerifyException(f"{self.name} yields {t}: only fwd.weight declares weights")
            if isinstance(t, QActType) and not isinstance(self, QuantizeOp):
                raise VerifyException(f"{self.name} yields {t}: only fwd.quantize makes a quantized activation")

    def verify_(self) -> None:
        self.verify_stage()
        self.verify_shapes()  # an op's own message for a scalar where it reads a tensor first, then any
        for what, v in self._values():  # memref, vector or scalar left (`fwd.silu` over a memref)
            if not isinstance(v.type, TensorType | QActType | WeightsType):
                raise VerifyException(f"{self.name} {what} is {v.type}: a stage reads and yields tensors (and !fwd.qact, !fwd.weights)")

    def verify_shapes(self) -> None:
        pass




class StageEffects(MemoryEffect):
    """A stage's memory effects, for xDSL's `cse`, `dce` and `canonicalize` (and `fwd-fuse`'s ordering):
    none — a stage computes values from values — unless it writes rows of a named buffer (`into`: a
    write, which dce keeps and cse does not merge); a fused op has its parts' effects as well."""

    @classmethod
    def get_effects(cls, op: Operation):
        effects: set[EffectInstance] = set()
        if getattr(op, "into", None) is not None:
            effects.add(EffectInstance(MemoryEffectKind.WRITE))
        for region in op.regions:
            for block in region.blocks:
                for child in block.ops:
                    got = get_effects(child)
                    if got is None:
                        return None
                    effects |= set(got)
        return effects


class StageSpeculatable(ConditionallySpeculatable):
    """A stage may be moved or computed ahead (xDSL's speculation) unless it writes into a named
    buffer; a fused op when its parts may."""

    @classmethod
    def is_speculatable(cls, op: Operation) -> bool:
        if getattr(op, "into", None) is not None:
            return False
        return all(is_speculatable(o) for r in op.regions for b in r.blocks for o in b.ops)

class UnaryOp(StageOp):
    x = operand_def()
    result = result_def()
    traits = traits_def(StageEffects(), StageSpeculatable())
    assembly_format = "$x " + _STAGE_SUFFIX + " `:` type($x) `->` type($result)"

    def verify_shapes(self) -> None:
        _want(
            numel(self.x.type) == numel(self.result.type),
            f"{self.name} result has {numel(self.result.type)} values for {numel(self.x.type)} inputs",
        )


class GenericStageOp(StageOp):
    """An op the forward never computes: it parses, verifies and is refused by legality."""

    traits = traits_def(StageEffects(), StageSpeculatable())

    TYPED: ClassVar[bool] = False

    ins = var_operand_def()
    res = var_result_def()
    assembly_format = "$ins " + _STAGE_SUFFIX + " `:` functional-type($ins, $res)"


# ---------------------------------------------------------------------------------------------
# declarations


_ROW_SLICE = re.compile(r"(.+)\[(\d+):(\d+)\]")


def row_slice(name: str) -> tuple[str, int, int] | None:
    """`(tensor, start, stop)` of a weight name `tensor[start:stop]` (rows `start` to `stop - 1` of
    the tensor: a part of a fused projection, as Phi-3's q of `attn_qkv`); None for a plain name."""
    m = _ROW_SLICE.fullmatch(name)
    return (m.group(1), int(m.group(2)), int(m.group(3))) if m else None


@irdl_op_definition
class WeightOp(IRDLOperation):
    """`%w = fwd.weight "blk.0.attn_q.weight" : !fwd.weights<576x576, q8_0>` — a GGUF tensor by name.

    Not a stage. The result type gives the shape and GGML type (or a builtin tensor for f32 data). A
    name `tensor[start:stop]` is rows `start` to `stop - 1` of the tensor (`row_slice`): as many rows
    as the result type's first dimension."""

    name = "fwd.weight"
    tensor_name = prop_def(StringAttr, prop_name="name")
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$name attr-dict `:` type($result)"

    def verify_(self) -> None:
        _want(
            isinstance(self.result.type, WeightsType | TensorType),
            "fwd.weight result is !fwd.weights or a tensor",
        )
        name = self.tensor_name.data
        _want(name != "", 'fwd.weight name is empty: it names a GGUF tensor')
        bad = next((c for c in name if ord(c) < 0x20 or ord(c) == 0x7F), None)
        _want(
            bad is None,
            f"fwd.weight names a GGUF tensor: its name {StringAttr(name)} holds the control character "
            f"{bad!r} (byte 0x{ord(bad or ' '):02x})",
        )
        part = row_slice(name)
        if part is not None:
            _, start, stop = part
            _want(start < stop, f"fwd.weight {StringAttr(name)} names no rows: a row slice [start:stop] needs start < stop")
            dims = dims_of(self.result.type)
            _want(
                not dims or dims[0] == stop - start,
                f"fwd.weight {StringAttr(name)} names {stop - start} rows, its type {_dims(self.result.type)} holds {dims[0] if dims else 0}",
            )


# ---------------------------------------------------------------------------------------------
# the primitives the forward computes


@irdl_op_definition
class MatmulOp(StageOp):
    """`y = x · wᵀ`: x `[K]` (or `[R, K]`), w `[N, K]` rows, y `[N]` (or `[R, N]`): y has x's
    leading dims. Each row's N values may be typed as heads, `[H, N/H]` (`[R, H, N/H]`): the same
    values in the same order (a projection whose heads a per-head norm reads, `fwd.rms_norm` rows)."""

    name = "fwd.matmul"
    WEIGHT_OPERANDS: ClassVar[frozenset[int]] = frozenset({1})
    x = operand_def()
    w = operand_def()
    result = result_def()
    traits = traits_def(StageEffects(), StageSpeculatable())
    assembly_format = "$x `,` $w " + _STAGE_SUFFIX + " `:` type($x) `,` type($w) `->` type($result)"

    def verify_shapes(self) -> None:
        xd, wd, yd = dims_of(self.x.type), dims_of(self.w.type), dims_of(self.result.type)
        _want(wd is not None and len(wd) == 2, f"matmul w must be a rank-2 weight [N, K], not {self.w.type}")
        _want(bool(xd) and bool(yd), f"matmul x and result must be tensors of rank >= 1, not {self.x.type} -> {self.result.type}")
        n, k = wd  # type: ignore[misc]
        _want(xd[-1] == k, f"matmul x rows have {xd[-1]} values, w rows have {k}")  # type: ignore[index]
        lead = len(xd) - 1  # type: ignore[arg-type]
        heads = len(yd) == lead + 2  # type: ignore[arg-type]
        if len(yd) > lead + 2:  # type: ignore[arg-type]
            want = "x".join(map(str, (*xd[:-1], n)))  # type: ignore[index]
            raise VerifyException(
                f"matmul result is {_dims(self.result.type)}, not {want} (one row of {n} for each row of x, {_dims(self.x.type)}), nor its rows as heads"
            )
        if heads:
            h, width = yd[lead], yd[lead + 1]  # type: ignore[index]
            _want(h * width == n, f"matmul result heads {h}x{width} hold {h * width} values, w has {n} rows")
        else:
            _want(yd[-1] == n, f"matmul result rows have {yd[-1]} values, w has {n} rows")  # type: ignore[index]
        if tuple(xd[:-1]) != tuple(yd[:lead]) or (not heads and len(yd) != lead + 1):  # type: ignore[index,arg-type]
            want = "x".join(map(str, (*xd[:-1], n)))  # type: ignore[index]
            raise VerifyException(
                f"matmul result is {_dims(self.result.type)}, not {want} (one row of {n} for each row of x, {_dims(self.x.type)})"
            )


@irdl_op_definition
class SiluOp(UnaryOp):
    """`x · sigmoid(x)` at each index: as many values out as in."""

    name = "fwd.silu"


@irdl_op_definition
class TransposeOp(UnaryOp):
    """`[R, C] -> [C, R]`: the result's dims are x's reversed (a rank-1 x is its own transpose)."""

    name = "fwd.transpose"

    def verify_shapes(self) -> None:
        super().verify_shapes()
        xd, yd = dims_of(self.x.type), dims_of(self.result.type)
        if xd is None or yd is None:
            raise VerifyException(f"transpose x and result are tensors, not {self.x.type} -> {self.result.type}")
        want = tuple(reversed(xd))
        if yd != want:
            raise VerifyException(
                f"transpose result is {_dims(self.result.type)}, not {'x'.join(map(str, want))}"
                f" (x is {_dims(self.x.type)}, its dims reversed)"
            )


@irdl_op_definition
class ElementwiseOp(StageOp):
    """`fwd.elementwise add %a, %b`: a op b at each index; with `row`, a row combined with every row."""

    name = "fwd.elementwise"
    kind = prop_def(ElementwiseKindAttr)
    row = opt_prop_def(UnitAttr)
    a = operand_def()
    b = operand_def()
    result = result_def()
    traits = traits_def(StageEffects(), StageSpeculatable())
    custom_directives = (Kw,)
    assembly_format = (
        "custom<Kw>($kind) $a `,` $b (`row` $row^)? "
        + _STAGE_SUFFIX
        + " `:` type($a) `,` type($b) `->` type($result)"
    )

    def verify_shapes(self) -> None:
        if self.row is not None:
            self.verify_row()
            return
        _want(
            dims_of(self.a.type) == dims_of(self.b.type) == dims_of(self.result.type),
            "elementwise operands and result agree in shape unless `row`",
        )

    def verify_row(self) -> None:
        """With `row`: the operand of fewer values (`b` when both hold as many) is one row, as wide as
        the other's rows (its last dim); the result has the other's shape."""
        a, b = self.a.type, self.b.type
        if not dims_of(a) or not dims_of(b):
            raise VerifyException(f"elementwise `row` operands are tensors of rank 1 or more, not {a} and {b}")
        b_is_row = numel(b) <= numel(a)  # type: ignore[operator]
        (row, rt), (block, bt) = (("b", b), ("a", a)) if b_is_row else (("a", a), ("b", b))
        width = dims_of(bt)[-1]  # type: ignore[index]
        if numel(rt) != width:
            raise VerifyException(
                f"elementwise row {row} has {numel(rt)} values for rows of {width} ({block} is {_dims(bt)})"
            )
        if dims_of(self.result.type) != dims_of(bt):
            raise VerifyException(
                f"elementwise row result has the shape of {block} ({_dims(self.result.type)} is not {_dims(bt)})"
            )


DEFAULT_EPS = 1e-5
"""The `eps` of a norm that gives none (the executor and the kernels both read it from here)."""


class RowReduceOp(StageOp):
    """The seed's `FusedRow`: a row reduction with optional `weight`, `residual` and `bias`."""

    x = operand_def()
    weight = opt_operand_def()
    residual = opt_operand_def()
    bias = opt_operand_def()
    eps = opt_prop_def(FloatAttr[Float32Type])
    result = result_def()
    traits = traits_def(StageEffects(), StageSpeculatable())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = (
        "$x (`weight` `(` $weight^ `:` type($weight) `)`)? (`residual` `(` $residual^ `:` type($residual) `)`)? (`bias` `(` $bias^ `:` type($bias) `)`)? (`eps` $eps^)? "
        + _STAGE_SUFFIX
        + " `:` type($x) `->` type($result)"
    )

    def verify_shapes(self) -> None:
        xd = dims_of(self.x.type)
        _want(bool(xd), f"{self.name} x must be a tensor of rank >= 1, not {self.x.type}")
        row = xd[-1]  # type: ignore[index]
        eps = _float(self, "eps")
        _want(eps is None or eps >= 0, f"{self.name} eps is negative ({_f32_text(eps) if eps is not None else eps})")
        for name, v in (("weight", self.weight), ("bias", self.bias)):
            if v is not None:
                if not isinstance(v.type, TensorType):
                    raise VerifyException(f"{self.name} {name} is a tensor, not {v.type}")
                _want(numel(v.type) == row, f"{self.name} {name} has {numel(v.type)} values for rows of {row}")
        if self.residual is not None:
            _want(dims_of(self.residual.type) == xd, f"{self.name} residual has the shape of x ({_dims(self.residual.type)} is not {_dims(self.x.type)})")
        _want(dims_of(self.result.type) == xd, f"{self.name} result has the shape of x ({_dims(self.result.type)} is not {_dims(self.x.type)})")


@irdl_op_definition
class RmsNormOp(RowReduceOp):
    """Each row `h = x (+ residual)` as `h / sqrt(mean(h²) + eps)`, `(· weight) (+ bias)`; the row is
    the last axis, `eps` defaults to 1e-05, `weight`/`bias` one row each."""

    name = "fwd.rms_norm"


@irdl_op_definition
class SoftmaxOp(RowReduceOp):
    """Each row `h = x (+ residual)` as `exp(h - max h) / Σ exp(h - max h)`, `(· weight) (+ bias)`
    (`eps` is not read)."""

    name = "fwd.softmax"


@irdl_op_definition
class LayerNormOp(RowReduceOp):
    """Each row `h = x (+ residual)` centred, `c / sqrt(mean(c²) + eps)` with `c = h - mean h`
    (population variance), `(· weight) (+ bias)`."""

    name = "fwd.layer_norm"


@irdl_op_definition
class RopeOp(StageOp):
    """Turn pairs `(i, i + half)` of every `hd`-wide head of x by one row of angles (cos, sin).

    `angles` holds `[2, half]` (cos then sin) per row; `from` reads them at a position of a cache."""

    name = "fwd.rope"
    x = operand_def()
    angles = operand_def()
    hd = prop_def(IntegerAttr[I64])
    half = prop_def(IntegerAttr[I64])
    rows = prop_def(IntegerAttr[I64])
    from_ = opt_prop_def(IntegerAttr[I64], prop_name="from")
    result = result_def()
    traits = traits_def(StageEffects(), StageSpeculatable())
    assembly_format = (
        "$x `,` $angles `hd` $hd `half` $half `rows` $rows (`from` $from^)? "
        + _STAGE_SUFFIX
        + " `:` type($x) `,` type($angles) `->` type($result)"
    )

    def verify_shapes(self) -> None:
        hd, half, rows = _int(self, "hd"), _int(self, "half"), _int(self, "rows")
        _want(hd > 0 and half > 0 and rows > 0, "rope hd, half and rows are positive")  # type: ignore[operator]
        _want(2 * half <= hd, f"rope half {half} turns pairs (i, i + half) past a head of {hd} (2*half <= hd)")  # type: ignore[operator]
        n = numel(self.x.type)
        _want(n is not None and n % hd == 0, f"rope x of {n} values is not made of {hd}-wide heads")  # type: ignore[operator]
        _want(dims_of(self.result.type) == dims_of(self.x.type), f"rope result has the shape of x ({_dims(self.result.type)} is not {_dims(self.x.type)})")
        at = _int(self, "from")
        _want(at is None or at >= 0, f"rope from {at} is not a position of its cache of angles (from >= 0)")  # type: ignore[operator]
        if rows == 1 and self.from_ is None and hd == 2 * half:  # type: ignore[operator]
            a = numel(self.angles.type)
            _want(a == 2 * half, f"rope angles hold {a} values, not [2, half] = {2 * half} (a row of cos, a row of sin)")  # type: ignore[operator]


@irdl_op_definition
class AttentionOp(StageOp):
    """Single-query GQA attention over a cache of `l - 1` rows plus the current position.

    q `[rows*h*hd]`, k `[rows*kv*hd]`, v `[rows*kv*vd]`, k_cache `[l-1, kv*hd]`,
    v_cache `[l-1, kv*vd]`, result `[rows*h*vd]`. Optional: `sinks` operand, `scale`, `softcap`,
    `pos` (attend up to P), `window` (W positions)."""

    name = "fwd.attention"
    EMPTY_OPERANDS: ClassVar[frozenset[int]] = frozenset({1, 2, 3, 4})
    q = operand_def()
    k = operand_def()
    v = operand_def()
    k_cache = operand_def()
    v_cache = operand_def()
    sinks = opt_operand_def()
    h = prop_def(IntegerAttr[I64])
    kv = prop_def(IntegerAttr[I64])
    hd = prop_def(IntegerAttr[I64])
    vd = prop_def(IntegerAttr[I64])
    l = prop_def(IntegerAttr[I64])  # noqa: E741 - the seed's name
    rows = prop_def(IntegerAttr[I64])
    scale = opt_prop_def(FloatAttr[Float32Type])
    softcap = opt_prop_def(FloatAttr[Float32Type])
    pos = opt_prop_def(IntegerAttr[I64])
    window = opt_prop_def(IntegerAttr[I64])
    result = result_def()
    traits = traits_def(StageEffects(), StageSpeculatable())
    assembly_format = (
        "$q `,` $k `,` $v `,` $k_cache `,` $v_cache (`sinks` `(` $sinks^ `:` type($sinks) `)`)? "
        "`h` $h `kv` $kv `hd` $hd `vd` $vd `l` $l `rows` $rows "
        "(`scale` $scale^)? (`softcap` $softcap^)? (`pos` $pos^)? (`window` $window^)? "
        + _STAGE_SUFFIX
        + " `:` type($q) `,` type($k) `,` type($v) `,` type($k_cache) `,` type($v_cache) `->` type($result)"
    )

    def verify_shapes(self) -> None:
        h, kv, hd, vd, l, rows = (_int(self, n) for n in ("h", "kv", "hd", "vd", "l", "rows"))
        given = f"(h {h} kv {kv} hd {hd} vd {vd} l {l} rows {rows})"
        _want(min(h, kv, hd, vd, rows) >= 0 and l >= 1, f"attention sizes are non-negative and l >= 1 {given}")  # type: ignore[type-var,operator]
        _want(min(h, hd, vd, rows) >= 1, f"attention h, hd, vd and rows are positive {given}")  # type: ignore[type-var,operator]
        _want(numel(self.q.type) == rows * h * hd, f"attention q has {numel(self.q.type)} values, not rows*h*hd = {rows * h * hd}")  # type: ignore[operator]
        _want(numel(self.k.type) == rows * kv * hd, f"attention k has {numel(self.k.type)} values, not rows*kv*hd = {rows * kv * hd}")  # type: ignore[operator]
        _want(numel(self.v.type) == rows * kv * vd, f"attention v has {numel(self.v.type)} values, not rows*kv*vd = {rows * kv * vd}")  # type: ignore[operator]
        _want(dims_of(self.k_cache.type) == (l - 1, kv * hd), f"attention k_cache is {_dims(self.k_cache.type)}, not (l-1) x kv*hd = {l - 1}x{kv * hd}")  # type: ignore[operator]
        _want(dims_of(self.v_cache.type) == (l - 1, kv * vd), f"attention v_cache is {_dims(self.v_cache.type)}, not (l-1) x kv*vd = {l - 1}x{kv * vd}")  # type: ignore[operator]
        _want(numel(self.result.type) == rows * h * vd, f"attention result has {numel(self.result.type)} values, not rows*h*vd = {rows * h * vd}")  # type: ignore[operator]
        pos, window, cap = _int(self, "pos"), _int(self, "window"), _float(self, "softcap")
        _want(pos is None or 0 <= pos < l, f"attention pos {pos} is not a position of its l = {l} (0 <= pos < l)")  # type: ignore[operator]
        _want(window is None or window >= 1, f"attention window {window} is not a count of positions (window >= 1)")  # type: ignore[operator]
        _want(cap is None or cap > 0, f"attention softcap {_f32_text(cap) if cap is not None else cap} is not positive (c·tanh(s/c) caps at c > 0)")


@irdl_op_definition
class MoeOp(StageOp):
    """A sparse mixture of experts: router `[E, d]`, gate/up `[E, ff, d]`, down `[E, d, ff]`.

    `renormalize`: the kept experts' weights are renormalized; `weight_inputs`: the router weights the
    experts' inputs (not outputs). Optional `router_bias`, `selection_bias` and expert biases."""

    name = "fwd.moe"
    WEIGHT_OPERANDS: ClassVar[frozenset[int]] = frozenset({1, 2, 3, 4})
    x = operand_def()
    router = operand_def()
    gate_exps = operand_def()
    up_exps = operand_def()
    down_exps = operand_def()
    router_bias = opt_operand_def()
    selection_bias = opt_operand_def()
    gate_bias = opt_operand_def()
    up_bias = opt_operand_def()
    down_bias = opt_operand_def()
    n_expert = prop_def(IntegerAttr[I64])
    top_k = prop_def(IntegerAttr[I64])
    renormalize = opt_prop_def(UnitAttr)
    act = prop_def(MoeActAttr)
    scoring = prop_def(MoeScoringAttr)
    groups = opt_prop_def(IntegerAttr[I64])
    scale = opt_prop_def(FloatAttr[Float32Type])
    weight_inputs = opt_prop_def(UnitAttr)
    result = result_def()
    traits = traits_def(StageEffects(), StageSpeculatable())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    custom_directives = (Kw,)
    assembly_format = (
        "$x `,` $router `,` $gate_exps `,` $up_exps `,` $down_exps "
        "(`router_bias` `(` $router_bias^ `:` type($router_bias) `)`)? (`selection_bias` `(` $selection_bias^ `:` type($selection_bias) `)`)? "
        "(`gate_bias` `(` $gate_bias^ `:` type($gate_bias) `)`)? (`up_bias` `(` $up_bias^ `:` type($up_bias) `)`)? (`down_bias` `(` $down_bias^ `:` type($down_bias) `)`)? "
        "`n_expert` $n_expert `top_k` $top_k (`renormalize` $renormalize^)? "
        "`act` custom<Kw>($act) `scoring` custom<Kw>($scoring) (`groups` $groups^)? (`scale` $scale^)? "
        "(`weight_inputs` $weight_inputs^)? "
        + _STAGE_SUFFIX
        + " `:` type($x) `,` type($router) `,` type($gate_exps) `,` type($up_exps) `,` type($down_exps)"
        " `->` type($result)"
    )

    @property
    def biases(self) -> tuple[SSAValue | None, ...]:
        return (self.gate_bias, self.up_bias, self.down_bias)

    def weighs_outputs_by_softmax(self) -> bool:
        """DESIGN.md §3: softmax scoring, no selection bias, one group, scale 1, outputs weighted."""
        return (
            self.scoring.data.value == "softmax"
            and self.selection_bias is None
            and (self.groups is None or self.groups.value.data == 1)
            and (self.scale is None or self.scale.value.data == 1.0)
            and self.weight_inputs is None
        )

    def verify_shapes(self) -> None:
        e, k = _int(self, "n_expert"), _int(self, "top_k")
        _want(e >= 1 and 1 <= k, "moe n_expert and top_k are positive")  # type: ignore[operator]
        _want(k <= e, f"moe top_k = {k} exceeds n_expert = {e}")  # type: ignore[operator]
        d = numel(self.x.type)
        rd = dims_of(self.router.type)
        _want(rd == (e, d), f"moe router is not n_expert x d = {e}x{d}")
        gd, ud, dd = (dims_of(v.type) for v in (self.gate_exps, self.up_exps, self.down_exps))
        _want(gd is not None and len(gd) == 3 and gd[0] == e and gd[2] == d, f"moe gate_exps is not {e} x ff x {d}")
        ff = gd[1]  # type: ignore[index]
        _want(ud == gd, f"moe up_exps is not {e}x{ff}x{d}, like gate_exps")
        _want(dd == (e, d, ff), f"moe down_exps is not {e}x{d}x{ff}")
        _want(numel(self.result.type) == d, "moe result has the size of x")


@irdl_op_definition
class GatedDeltaOp(StageOp):
    """A gated delta-rule recurrence step (linear attention's state update), `gate` its activation:
    a stage the forward refuses; its operands are not checked."""

    name = "fwd.gated_delta"
    traits = traits_def(StageEffects(), StageSpeculatable())
    gate = prop_def(GateActAttr)
    ins = var_operand_def()
    res = var_result_def()
    custom_directives = (Kw,)
    assembly_format = "custom<Kw>($gate) $ins " + _STAGE_SUFFIX + " `:` functional-type($ins, $res)"


@irdl_op_definition
class SoftcapOp(StageOp):
    """`c·tanh(x/c)` at each index: as many values out as in (as `fwd.silu`)."""

    name = "fwd.softcap"
    x = operand_def()
    cap = prop_def(FloatAttr[Float32Type])
    result = result_def()
    traits = traits_def(StageEffects(), StageSpeculatable())
    assembly_format = "$x `cap` $cap " + _STAGE_SUFFIX + " `:` type($x) `->` type($result)"

    def verify_shapes(self) -> None:
        _want(
            numel(self.x.type) == numel(self.result.type),
            f"{self.name} result has {numel(self.result.type)} values for {numel(self.x.type)} inputs",
        )
        cap = _float(self, "cap")
        _want(cap is not None and cap > 0, f"{self.name} cap {_f32_text(cap) if cap is not None else cap} is not positive (c·tanh(x/c) caps at c > 0)")


# ---------------------------------------------------------------------------------------------
# the primitives the forward never computes (the seed's last kernel_refusal arm)


def _generic(op_name: str, class_name: str) -> type[GenericStageOp]:
    cls = type(class_name, (GenericStageOp,), {"name": op_name, "__doc__": f"`{op_name}`: refused by the forward."})
    return irdl_op_definition(cls)


SwiGluOp = _generic("fwd.swiglu", "SwiGluOp")
SigmoidOp = _generic("fwd.sigmoid", "SigmoidOp")
GeluOp = _generic("fwd.gelu", "GeluOp")
ScaleOp = _generic("fwd.scale", "ScaleOp")
DecayOp = _generic("fwd.decay", "DecayOp")
L2NormOp = _generic("fwd.l2_norm", "L2NormOp")
HeadSliceOp = _generic("fwd.head_slice", "HeadSliceOp")
JoinOp = _generic("fwd.join", "JoinOp")
HeadMatmulOp = _generic("fwd.head_matmul", "HeadMatmulOp")
CausalConvOp = _generic("fwd.causal_conv", "CausalConvOp")
FullAttentionOp = _generic("fwd.full_attention", "FullAttentionOp")
RowGatherOp = _generic("fwd.row_gather", "RowGatherOp")
RowsGatherOp = _generic("fwd.rows_gather", "RowsGatherOp")
ArgmaxOp = _generic("fwd.argmax", "ArgmaxOp")
SetRowOp = _generic("fwd.set_row", "SetRowOp")
IntRequantOp = _generic("fwd.int_requant", "IntRequantOp")
IntClampOp = _generic("fwd.int_clamp", "IntClampOp")
ReluOp = _generic("fwd.relu", "ReluOp")
LutAttentionOp = _generic("fwd.lut_attention", "LutAttentionOp")

REFUSED_PRIMITIVES: tuple[type[GenericStageOp], ...] = (
    SwiGluOp, SigmoidOp, GeluOp, ScaleOp, DecayOp, L2NormOp, HeadSliceOp, JoinOp, HeadMatmulOp,
    CausalConvOp, FullAttentionOp, RowGatherOp, RowsGatherOp, ArgmaxOp, SetRowOp, IntRequantOp,
    IntClampOp, ReluOp, LutAttentionOp,
)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# the shim's own stages


@irdl_op_definition
class QuantizeOp(StageOp):
    """`%q = fwd.quantize %x one_word : tensor<576xf32> -> !fwd.qact<576, one_word>`.

    Int8 blocks of 32: `d = amax/127`, `q = round half away from zero (x/d)`; `one_word` keeps `d`,
    `two_words` keeps `d` and `d·Σq` (ggml's q8_1)."""

    name = "fwd.quantize"
    x = operand_def()
    format = prop_def(QuantFormatAttr)
    result = result_def(QActType)
    traits = traits_def(StageEffects(), StageSpeculatable())
    custom_directives = (Kw,)
    assembly_format = "$x custom<Kw>($format) " + _STAGE_SUFFIX + " `:` type($x) `->` type($result)"

    def verify_shapes(self) -> None:
        t = self.result.type
        assert isinstance(t, QActType)
        if not isinstance(self.x.type, TensorType):
            raise VerifyException(f"quantize x is a tensor of activations, not {self.x.type}")
        _want(t.size.data == numel(self.x.type), f"quantize result holds {t.size.data} values, x has {numel(self.x.type)}")
        _want(t.format == self.format, "quantize result format differs from `format`")


@irdl_op_definition
class ViewOp(StageOp):
    """A view into another buffer at `offset` values (the forward refuses views).

    Read `whole` (the default), its values are `offset ... offset + size - 1` of the flattened `x`,
    all inside it. Another access (`strided`, `rows`, `part`) does not say how far the view reaches,
    so only its first value is checked to lie inside `x`."""

    name = "fwd.view"
    x = operand_def()
    offset = opt_prop_def(IntegerAttr[I64])
    result = result_def()
    traits = traits_def(StageEffects(), StageSpeculatable())
    assembly_format = "$x (`offset` $offset^)? " + _STAGE_SUFFIX + " `:` type($x) `->` type($result)"

    def verify_shapes(self) -> None:
        for what, t in (("x", self.x.type), ("result", self.result.type)):
            if not isinstance(t, TensorType):
                raise VerifyException(f"view {what} is a tensor, not {t}")
        offset = _int(self, "offset") or 0
        _want(offset >= 0, f"view offset is negative ({offset})")
        n, size = numel(self.x.type), numel(self.result.type)
        if self.accesses()[0] != "whole":
            _want(offset < n, f"view offset {offset} is past the end of x ({n} values)")  # type: ignore[operator]
            return
        if offset + size > n:  # type: ignore[operator]
            raise VerifyException(
                f"view of {size} values at offset {offset} reads past the end of x ({offset} + {size} > {n})"
            )


class FusedBodyIsolated(IsolatedFromAbove):
    """xDSL's `IsolatedFromAbove`, its error in the dialect's words (xDSL's names the part by its
    Python repr). A nested fused op checks its own body."""

    def verify(self, op: Operation) -> None:
        for part in _parts_within(op):
            for i, v in enumerate(part.operands):
                if op.is_ancestor(v.owner) and v.owner is not op:
                    continue
                name = f"%{v.name_hint}" if v.name_hint else "a value"
                where = "the fused op's own result" if v.owner is op else "defined outside it"
                raise VerifyException(
                    f"fused body uses {name} ({part.name} operand {i}), {where}:"
                    " a fused op's body sees only its own arguments"
                )


def _parts_within(op: Operation) -> Iterator[Operation]:
    """The ops in `op`'s regions, nested ones too, but not inside an op isolated from above itself."""
    regions = list(op.regions)
    while regions:
        for block in regions.pop().blocks:
            for child in block.ops:
                yield child
                if not child.has_trait(IsolatedFromAbove):
                    regions += child.regions


@irdl_op_definition
class FusedOp(StageOp):
    """One fused kernel of class `class`: its parts in a region, in program order, ending in `fwd.yield`.

    `covers` holds the stage numbers of the original stages, one per leaf part (a nested fused part
    covers as many as its own leaves). A generic pass may merge identical parts of the region (xDSL's
    `cse`: the parts are pure): the op then covers more stages than it has leaves, each nested fused
    part still its own covers, in order. The region's arguments are the op's operands."""

    name = "fwd.fused"
    class_ = prop_def(StringAttr, prop_name="class")
    covers = prop_def(DenseArrayBase[I64])
    ins = var_operand_def()
    res = var_result_def()
    body = region_def("single_block")
    traits = traits_def(FusedBodyIsolated(), StageEffects(), StageSpeculatable())
    custom_directives = (Kw,)
    TYPED: ClassVar[bool] = False
    assembly_format = (
        "custom<Kw>($class) `covers` $covers (`ins` `(` $ins^ `)`)? "
        + _STAGE_SUFFIX
        + " `:` functional-type($ins, $res) $body"
    )

    def __init__(self, cls: ClassId, covers: Sequence[int], ins: Sequence[SSAValue], result_types: Sequence[Attribute], body: Region):
        super().__init__(
            operands=[ins],
            result_types=[result_types],
            properties={"class": StringAttr(cls.value), "covers": DenseArrayBase.from_list(i64, list(covers))},
            regions=[body],
        )

    @property
    def class_id(self) -> ClassId:
        c = class_named(self.class_.data)
        assert c is not None, "verified"
        return c

    @property
    def cover_list(self) -> tuple[int, ...]:
        return tuple(self.covers.get_values())

    def parts(self) -> list[Operation]:
        """The stages of the region, without the terminator."""
        return [op for op in self.body.block.ops if not isinstance(op, YieldOp)]

    def part_covers(self) -> list[tuple[int, ...]]:
        """The stage numbers of each part (a primitive one, a nested fused part its own). Where parts
        were merged (fewer leaves than covers: which part stands for which stage is no longer known)
        each nested part keeps its own numbers and each run of primitive parts shares the numbers
        between them, one a part and the surplus to the run's first."""
        parts = self.parts()
        covers = list(self.cover_list)
        if sum(len(p.cover_list) if isinstance(p, FusedOp) else 1 for p in parts) == len(covers):
            out: list[tuple[int, ...]] = []
            it = iter(covers)
            for p in parts:
                n = len(p.cover_list) if isinstance(p, FusedOp) else 1
                out.append(tuple(next(it, -1) for _ in range(n)))
            return out
        out, i = [], 0
        for k, p in enumerate(parts):
            if isinstance(p, FusedOp):
                own = p.cover_list
                j = covers.index(own[0], i) if own and own[0] in covers[i:] else i
                out.append(tuple(covers[j : j + len(own)]))
                i = j + len(own)
                continue
            later = list(parts[k + 1 :])
            nxt = next((q for q in later if isinstance(q, FusedOp) and q.cover_list), None)
            stop = covers.index(nxt.cover_list[0], i) if nxt is not None and nxt.cover_list[0] in covers[i:] else len(covers)
            prims_before = sum(1 for q in later[: later.index(nxt)] if not isinstance(q, FusedOp)) if nxt is not None else len(later)
            take = max(1, stop - i - prims_before)
            out.append(tuple(covers[i : i + take]))
            i += take
        return out

    def verify_shapes(self) -> None:
        _want(class_named(self.class_.data) is not None, f"unknown fused class `{self.class_.data}`")
        covers = self.cover_list
        _want(all(c >= 0 for c in covers), f"fused covers hold a negative number ({min(covers, default=0)}): they are stage numbers, from 0")
        _want(all(a < b for a, b in zip(covers, covers[1:])), "fused covers are not strictly increasing")
        last = self.body.block.last_op  # before the parts are counted: another terminator is not a part
        _want(isinstance(last, YieldOp), f"fused region ends in {last.name if last is not None else 'nothing'}, not in fwd.yield")
        parts = self.parts()
        _want(bool(parts), "fused op has no parts")
        n_leaves = sum(len(p.cover_list) if isinstance(p, FusedOp) else 1 for p in parts)
        _want(n_leaves <= len(covers), f"fused covers list {len(covers)} stages for {n_leaves} parts")
        block = self.body.block
        _want(
            [a.type for a in block.args] == [v.type for v in self.ins],
            "fused region arguments do not match its operands",
        )
        _want(
            [v.type for v in last.operands] == [r.type for r in self.res],  # type: ignore[union-attr]
            "fused yield does not match its results",
        )
        for v in last.operands:  # type: ignore[union-attr]
            _want(
                not isinstance(v, BlockArgument) or v.owner is not block,
                "fused op yields one of its own arguments: a fused kernel stores only what its parts compute",
            )
        for p in parts:
            own = getattr(p, "op_name", None)  # an unregistered op by its own name, not `builtin.unregistered`
            _want(isinstance(p, StageOp), f"fused part {own.data if hasattr(own, 'data') else p.name} is not a stage")
        for p, own in zip(parts, self.part_covers()):
            if isinstance(p, FusedOp) and p.cover_list != own:
                raise VerifyException(f"nested fused covers {list(p.cover_list)} where its place says {list(own)}")
        for r in self.res:
            if isinstance(r.type, WeightsType):
                raise VerifyException(f"{self.name} yields {r.type}: only fwd.weight declares weights")


@irdl_op_definition
class YieldOp(IRDLOperation):
    """The end of a `fwd.fused` region: the values the fused op yields, in its results' order."""

    name = "fwd.yield"
    values = var_operand_def()
    traits = traits_def(IsTerminator(), HasParent(FusedOp), Pure())
    assembly_format = "($values^ `:` type($values))? attr-dict"


# ---------------------------------------------------------------------------------------------
# stages


def is_stage(op: Operation) -> bool:
    """Stages are primitives, `fwd.quantize`, `fwd.view` and `fwd.fused` (DESIGN.md §3)."""
    return isinstance(op, StageOp)


def stages(root: Operation) -> Iterator[StageOp]:
    """The top-level stages under `root` in program order (parts of a fused op are not visited)."""
    for op in root.walk():
        if isinstance(op, StageOp) and not isinstance(op.parent_op(), FusedOp):
            yield op


def stage_numbers(root: Operation) -> dict[Operation, int]:
    """The top-level stages of `root` numbered in program order, from 0 (a fused op counts once).

    These are positions in the IR as it stands; a fused op's `covers` keep the numbers its parts had
    before they were fused (`fwdshim.passes.rules.number_stages` numbers IR that already holds fused
    ops by their covers)."""
    return {op: i for i, op in enumerate(stages(root))}


def leaves(op: Operation) -> list[Operation]:
    """The primitive stages of an op (the seed's `leaves`): a fused op's parts, recursively."""
    if isinstance(op, FusedOp):
        return [leaf for p in op.parts() for leaf in leaves(p)]
    return [op]


def ggml_type_of(value: SSAValue) -> str | None:
    """The GGML type name of a weight value (`q8_0`, `f32`, ...), or None for an activation."""
    t = value.type
    if isinstance(t, WeightsType):
        return t.type.value
    return None


Fwd = Dialect(
    "fwd",
    [
        WeightOp, MatmulOp, SiluOp, TransposeOp, ElementwiseOp, RmsNormOp, SoftmaxOp, LayerNormOp,
        RopeOp, AttentionOp, GatedDeltaOp, SoftcapOp, MoeOp, *REFUSED_PRIMITIVES,
        QuantizeOp, ViewOp, FusedOp, YieldOp,
    ],
    [GgmlTypeAttr, QuantFormatAttr, AccessAttr, ElementwiseKindAttr, GateActAttr, MoeActAttr,
     MoeScoringAttr, WeightsType, QActType],
)  # fmt: skip
