"""`fwd` attributes and types: parse/print round-trip of every enum member, `!fwd.weights`, `!fwd.qact`."""

from __future__ import annotations

from io import StringIO

import gguf
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError, VerifyException

from fwdshim.dialects.attributes import (
    Access,
    AccessAttr,
    ElementwiseKind,
    ElementwiseKindAttr,
    GateAct,
    GateActAttr,
    GgmlType,
    GgmlTypeAttr,
    MoeAct,
    MoeActAttr,
    MoeScoring,
    MoeScoringAttr,
    QActType,
    QuantFormat,
    QuantFormatAttr,
    WeightsType,
    ggml_of,
    gguf_of,
)
from fwdshim.dialects.fwd import Fwd

GGUF_TYPES = list(gguf.GGMLQuantizationType)


def _ctx() -> Context:
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Fwd)
    return ctx


def parse_attr(text: str):
    return Parser(_ctx(), text).parse_attribute()


def printed(attr) -> str:
    out = StringIO()
    Printer(stream=out).print_attribute(attr)
    return out.getvalue()


def test_ggml_type_mirrors_gguf():
    assert [m.name for m in GgmlType] == [m.name for m in GGUF_TYPES]
    assert len(GgmlType) == len(GGUF_TYPES)


@pytest.mark.parametrize("qtype", GGUF_TYPES, ids=lambda q: q.name.lower())
def test_ggml_attr_round_trip(qtype: gguf.GGMLQuantizationType):
    text = f"#fwd.ggml<{qtype.name.lower()}>"
    attr = parse_attr(text)
    assert attr == GgmlTypeAttr(ggml_of(qtype))
    assert printed(attr) == text
    assert gguf_of(attr.data) is qtype


@pytest.mark.parametrize("qtype", GGUF_TYPES, ids=lambda q: q.name.lower())
def test_weights_type_round_trip_every_ggml_type(qtype: gguf.GGMLQuantizationType):
    name = qtype.name.lower()
    text = f"!fwd.weights<1536x576, {name}>"
    t = parse_attr(text)
    assert isinstance(t, WeightsType)
    assert t.dims == (1536, 576)
    assert t.type == GgmlType(name)
    assert t == WeightsType((1536, 576), ggml_of(qtype))
    assert printed(t) == text


@pytest.mark.parametrize(
    ("attr_cls", "enum", "prefix"),
    [
        (QuantFormatAttr, QuantFormat, "#fwd.qformat"),
        (AccessAttr, Access, "#fwd.access"),
        (ElementwiseKindAttr, ElementwiseKind, "#fwd.elementwise_kind"),
        (GateActAttr, GateAct, "#fwd.gate"),
        (MoeActAttr, MoeAct, "#fwd.moe_act"),
        (MoeScoringAttr, MoeScoring, "#fwd.scoring"),
    ],
)
def test_enum_attrs_round_trip(attr_cls, enum, prefix):
    for member in enum:
        text = f"{prefix}<{member.value}>"
        attr = parse_attr(text)
        assert attr == attr_cls(member)
        assert printed(attr) == text


def test_enum_values_are_the_seed_names():
    assert [m.value for m in QuantFormat] == ["one_word", "two_words"]
    assert [m.value for m in Access] == ["whole", "strided", "rows", "part"]
    assert [m.value for m in ElementwiseKind] == ["add", "sub", "mul", "div", "max", "min"]


def test_access_array_round_trip():
    text = "[#fwd.access<whole>, #fwd.access<strided>, #fwd.access<rows>]"
    attr = parse_attr(text)
    assert [a.data for a in attr.data] == [Access.WHOLE, Access.STRIDED, Access.ROWS]
    assert printed(attr) == text


@pytest.mark.parametrize("dims", [(576, 576), (192, 576), (8, 1536, 576), (8, 576, 1536), (1, 1)])
def test_weights_type_dims(dims):
    text = f"!fwd.weights<{'x'.join(map(str, dims))}, q8_0>"
    t = parse_attr(text)
    assert t.dims == dims
    assert t.type is GgmlType.Q8_0
    assert printed(t) == text
    assert printed(WeightsType(dims, GgmlType.Q8_0)) == text


@pytest.mark.parametrize(
    ("dims", "message"),
    [
        ((576,), "weights have rank 2 or 3"),
        ((2, 8, 1536, 576), "weights have rank 2 or 3"),
        ((0, 576), "weights have positive dimensions"),
        ((8, -1, 576), "weights have positive dimensions"),
    ],
)
def test_weights_type_verify(dims, message):
    with pytest.raises(VerifyException, match=f"^{message}$"):
        WeightsType(dims, GgmlType.Q8_0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("!fwd.weights<576, q8_0>", "weights have rank 2 or 3"),
        ("!fwd.weights<0x576, q8_0>", "weights have positive dimensions"),
        ("!fwd.weights<576x-3, q8_0>", "expected a dimension (a positive integer) after `x`"),  # was "rank 2 or 3"
        ("!fwd.weights<8x576x, q8_0>", "expected a dimension (a positive integer) after `x`"),
        ("!fwd.weights<8x576x-1, q8_0>", "expected a dimension (a positive integer) after `x`"),
        ("!fwd.weights<q8_0>", "expected the weights' dimensions"),
        ("!fwd.weights<576x576, q9_0>", "Expected `f32`, `f16`"),
        ("#fwd.ggml<Q8_0>", "Expected `f32`"),
        ("#fwd.access<diagonal>", "Expected `whole`, `strided`, `rows`, or `part`"),
        ("!fwd.qact<576, one_byte>", "Expected `one_word`, or `two_words`"),
    ],
)
def test_bad_attribute_text_is_a_parse_error(text, message):
    with pytest.raises(ParseError) as e:
        parse_attr(text)
    assert message in e.value.msg


@pytest.mark.parametrize("fmt", list(QuantFormat))
@pytest.mark.parametrize("size", [32, 576, 1536, 100])
def test_qact_round_trip(size, fmt):
    text = f"!fwd.qact<{size}, {fmt.value}>"
    t = parse_attr(text)
    assert isinstance(t, QActType)
    assert t.size.data == size
    assert t.format == QuantFormatAttr(fmt)
    assert t == QActType(size, fmt)
    assert printed(t) == text
