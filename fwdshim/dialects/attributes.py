"""Attributes and types of the `fwd` dialect.

- `#fwd.ggml<q8_0>`: a GGML tensor type, one member per `gguf.GGMLQuantizationType` (lowercased).
- `#fwd.qformat<one_word>` / `<two_words>`: an int8 activation block's words (the seed's `QuantFormat`).
- `#fwd.access<whole>`: how a stage reads one operand (the seed's `Access`).
- `#fwd.elementwise_kind<add>` and the other enum properties.
- `!fwd.weights<576x576, q8_0>`: a weight matrix stored row-wise in a GGML type (the seed's
  `Weights::Rows`); MoE expert stacks are rank 3 (`8x1536x576`).
- `!fwd.qact<576, one_word>`: an activation quantized into int8 blocks of 32.

Enum attributes print `#fwd.ggml<q8_0>` standing alone and as a bare keyword (`q8_0`) inside an op's
custom syntax (the `Kw` directive in `fwd.py`).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from enum import StrEnum
from typing import TYPE_CHECKING, ClassVar

from xdsl.dialects.builtin import ArrayAttr, IntAttr
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

if TYPE_CHECKING:
    import gguf


def _gguf_constants():
    """`gguf.constants`, without importing the `gguf` package when it is not loaded yet: its
    `__init__` imports numpy and the reader and writer (~0.25 s of every `fwdshim-opt` start-up),
    and the dialect needs only the names of the quantization types."""
    loaded = sys.modules.get("gguf.constants")
    if loaded is not None:
        return loaded
    package = importlib.util.find_spec("gguf")
    if package is None or not package.submodule_search_locations:
        import gguf.constants

        return gguf.constants
    path = f"{list(package.submodule_search_locations)[0]}/constants.py"
    spec = importlib.util.spec_from_file_location("fwdshim._gguf_constants", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GgmlType = StrEnum(  # type: ignore[misc]
    "GgmlType", [(m.name, m.name.lower()) for m in _gguf_constants().GGMLQuantizationType], module=__name__
)
GgmlType.__doc__ = "Every member of `gguf.GGMLQuantizationType`, valued by its lowercase name."


def ggml_of(qtype: gguf.GGMLQuantizationType) -> GgmlType:
    """The `GgmlType` of a gguf quantization type."""
    return GgmlType(qtype.name.lower())


def gguf_of(ggml: GgmlType) -> gguf.GGMLQuantizationType:
    """The `gguf.GGMLQuantizationType` of a `GgmlType`."""
    import gguf

    return gguf.GGMLQuantizationType[ggml.name]


class QuantFormat(StrEnum):
    """An int8 activation block's words: one (scale) or two (scale and sum, as ggml's q8_1)."""

    ONE_WORD = "one_word"
    TWO_WORDS = "two_words"


class Access(StrEnum):
    """How a stage reads an operand (the seed's `Access`); the forward reads `whole` buffers only."""

    WHOLE = "whole"
    STRIDED = "strided"
    ROWS = "rows"
    PART = "part"


class ElementwiseKind(StrEnum):
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    MAX = "max"
    MIN = "min"


class GateAct(StrEnum):
    SILU = "silu"
    SIGMOID = "sigmoid"


class MoeAct(StrEnum):
    SWIGLU = "swiglu"
    SWIGLU_CLAMPED = "swiglu_clamped"


class MoeScoring(StrEnum):
    SOFTMAX = "softmax"
    SIGMOID = "sigmoid"


class _AngleEnum:
    """Prints `<value>` after the attribute name and parses it back (`#fwd.ggml<q8_0>`)."""

    enum_type: ClassVar[type[StrEnum]]
    data: StrEnum

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string(f"<{self.data.value}>")

    @classmethod
    def parse_parameter(cls, parser: AttrParser):  # type: ignore[override]
        with parser.in_angle_brackets():
            return parser.parse_str_enum(cls.enum_type)


@irdl_attr_definition
class GgmlTypeAttr(_AngleEnum, EnumAttribute[GgmlType]):
    name = "fwd.ggml"


@irdl_attr_definition
class QuantFormatAttr(_AngleEnum, EnumAttribute[QuantFormat]):
    name = "fwd.qformat"


@irdl_attr_definition
class AccessAttr(_AngleEnum, EnumAttribute[Access]):
    name = "fwd.access"


@irdl_attr_definition
class ElementwiseKindAttr(_AngleEnum, EnumAttribute[ElementwiseKind]):
    name = "fwd.elementwise_kind"


@irdl_attr_definition
class GateActAttr(_AngleEnum, EnumAttribute[GateAct]):
    name = "fwd.gate"


@irdl_attr_definition
class MoeActAttr(_AngleEnum, EnumAttribute[MoeAct]):
    name = "fwd.moe_act"


@irdl_attr_definition
class MoeScoringAttr(_AngleEnum, EnumAttribute[MoeScoring]):
    name = "fwd.scoring"


MAX_ELEMENTS = 2**63 - 1
"""The most elements a tensor or weights type may hold (MLIR's: shapes are signed 64-bit)."""


def _dims_problem(dims: tuple[int, ...]) -> str | None:
    """Why `dims` cannot shape a `!fwd.weights` (None when they can)."""
    if not 2 <= len(dims) <= 3:
        return "weights have rank 2 or 3"
    if any(d <= 0 for d in dims):
        return "weights have positive dimensions"
    if math.prod(dims) > MAX_ELEMENTS:
        return f"weights of {'x'.join(map(str, dims))} hold {math.prod(dims)} values, past {MAX_ELEMENTS} (2^63 - 1, a shape's limit)"
    return None


def _parse_dims(parser: AttrParser) -> list[int]:
    """A `NxK` (or `ExNxK`) dimension list; a bad one is a parse error at the list."""
    start = parser.pos
    dims = parser.parse_dimension_list()
    if not dims:
        parser.raise_error("expected the weights' dimensions (`NxK` or `ExNxK`)")
    if len(dims) < 3 and parser._current_token.text == "x":  # `4x-3`: the list stopped at what follows an `x`
        parser.raise_error("expected a dimension (a positive integer) after `x`", parser.pos + 1, parser.pos + 1)
    if (problem := _dims_problem(tuple(dims))) is not None:
        parser.raise_error(problem, start, parser.pos)
    return dims


@irdl_attr_definition
class WeightsType(ParametrizedAttribute, TypeAttribute):
    """`!fwd.weights<N x K, ggml>`: rows of K values in a GGML type (rank 2, or 3 for expert stacks).

    `shape` is in elements, outermost first; a Q8_0 row of K values is K/32 blocks of 34 bytes.
    """

    name = "fwd.weights"

    shape: ArrayAttr[IntAttr]
    ggml: GgmlTypeAttr

    def __init__(self, shape: tuple[int, ...] | list[int], ggml: GgmlType | GgmlTypeAttr):
        if not isinstance(ggml, GgmlTypeAttr):
            ggml = GgmlTypeAttr(ggml)
        super().__init__(ArrayAttr(IntAttr(d) for d in shape), ggml)

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(d.data for d in self.shape.data)

    @property
    def type(self) -> GgmlType:
        return self.ggml.data  # type: ignore[return-value]

    @classmethod
    def parse_parameters(cls, parser: AttrParser):
        with parser.in_angle_brackets():
            dims = _parse_dims(parser)
            parser.parse_punctuation(",")
            ggml = parser.parse_str_enum(GgmlType)
        return (ArrayAttr(IntAttr(d) for d in dims), GgmlTypeAttr(ggml))

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{'x'.join(map(str, self.dims))}, {self.type.value}>")

    def verify(self) -> None:
        if (problem := _dims_problem(self.dims)) is not None:
            raise VerifyException(problem)


@irdl_attr_definition
class QActType(ParametrizedAttribute, TypeAttribute):
    """`!fwd.qact<N, one_word>`: N activations quantized into int8 blocks of 32 (N a multiple of 32 or not)."""

    name = "fwd.qact"

    size: IntAttr
    format: QuantFormatAttr

    def __init__(self, size: int, format: QuantFormat | QuantFormatAttr):
        if not isinstance(format, QuantFormatAttr):
            format = QuantFormatAttr(format)
        super().__init__(IntAttr(size), format)

    @classmethod
    def parse_parameters(cls, parser: AttrParser):
        with parser.in_angle_brackets():
            size = parser.parse_integer(allow_boolean=False, allow_negative=False)
            parser.parse_punctuation(",")
            fmt = parser.parse_str_enum(QuantFormat)
        return (IntAttr(size), QuantFormatAttr(fmt))

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.size.data}, {self.format.data.value}>")

    def verify(self) -> None:
        if self.size.data <= 0:
            raise VerifyException("a quantized activation holds a positive number of values")
