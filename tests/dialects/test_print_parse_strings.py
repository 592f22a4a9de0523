"""Printed IR parses back (issue 10, item 5): print → parse → print is a fixed point for every string
the `fwd` dialect holds — a weight's name, an `into` buffer name, a fused op's class keyword, a
refusal reason, a dictionary key, a symbol name — in the custom and the generic form.

xDSL's printer writes each byte outside printable ASCII as an escape (`"blk.0.\\C3\\A9"` for
`blk.0.é`, MLIR's form); xDSL 0.74's lexer read such a literal as bytes, which no string accepts."""

from __future__ import annotations

import io

import pytest
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp
from xdsl.printer import Printer

from fwdshim.diagnostics import LocatingParser
from fwdshim.dialects.fwd import ElementwiseOp, FusedOp, WeightOp
from fwdshim.tools.driver import FwdOptMain

TEMPLATE = """\
func.func @f(%x: tensor<64xf32>) -> tensor<64xf32> {
  %w = fwd.weight "w" : tensor<64xf32>
  %m = fwd.elementwise mul %x, %w into "buf" {key = "value"} : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %f = fwd.fused elementwise_chains covers [2] ins(%m) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%a: tensor<64xf32>):
    %s = fwd.silu %a : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return %f : tensor<64xf32>
}
"""

STRINGS = {
    "latin": "blk.0.é",
    "cjk": "層.0.重み",
    "emoji (4 bytes)": "blk.🦙.weight",
    "em dash (a refusal reason)": "a bias on an RMSNorm — its kernel scales and never shifts",
    "quote and backslash": 'a "b" \\c\\',
    "escape-like text": "\\C3\\A9 \\n",
    "control characters": "tab\there\nnew line\x00\x7f",
    "empty": "",
    "a keyword": "covers",
}


def _ctx():
    return FwdOptMain(args=[]).ctx


def _print(module: ModuleOp, generic: bool) -> str:
    out = io.StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(module)
    return out.getvalue()


def _parse(text: str) -> ModuleOp:
    return LocatingParser(_ctx(), text, "t.mlir").parse_module()


def _with_string(s: str) -> ModuleOp:
    """The template with `s` in every place a string stands (not verified: a class must be known)."""
    module = _parse(TEMPLATE)
    ops = list(module.walk())
    func = next(op for op in ops if isinstance(op, FuncOp))
    func.sym_name = StringAttr(s)
    next(op for op in ops if isinstance(op, WeightOp)).properties["name"] = StringAttr(s)
    ew = next(op for op in ops if isinstance(op, ElementwiseOp))
    ew.properties["into"] = StringAttr(s)
    del ew.attributes["key"]
    ew.attributes[f"k{s}"] = StringAttr(s)
    next(op for op in ops if isinstance(op, FusedOp)).properties["class"] = StringAttr(s)
    return module


def _strings(module: ModuleOp) -> list[str]:
    """Every string of the template's places, in a fixed order."""
    ops = list(module.walk())
    ew = next(op for op in ops if isinstance(op, ElementwiseOp))
    (key,) = ew.attributes
    return [
        next(op for op in ops if isinstance(op, FuncOp)).sym_name.data,
        next(op for op in ops if isinstance(op, WeightOp)).tensor_name.data,
        ew.into.data,  # type: ignore[union-attr]
        key[1:],
        ew.attributes[key].data,  # type: ignore[attr-defined]
        next(op for op in ops if isinstance(op, FusedOp)).class_.data,
    ]


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
@pytest.mark.parametrize("s", list(STRINGS.values()), ids=list(STRINGS))
def test_print_parse_print_is_a_fixed_point(s, generic):
    module = _with_string(s)
    first = _print(module, generic)
    parsed = _parse(first)
    assert _strings(parsed) == [s] * 6
    assert _print(parsed, generic) == first


def test_non_ascii_prints_as_escapes_that_parse_as_a_string():
    """The form the printer writes (MLIR's) is the one read back: a StringAttr, not bytes."""
    text = _print(_with_string("blk.0.é"), generic=False)
    assert 'fwd.weight "blk.0.\\C3\\A9"' in text
    assert _strings(_parse(text))[1] == "blk.0.é"


def test_bytes_that_are_not_utf8_stay_bytes():
    """A literal whose escapes make bytes that are not UTF-8 is still a bytes attribute: a weight
    name of it is a located error that says so, not a mangled string."""
    with pytest.raises(Exception, match=r'"blk.\\FF" is not UTF-8 text'):
        _parse('%w = fwd.weight "blk.\\FF" : tensor<64xf32>')


def test_marks_read_back_by_xdsls_own_parser_keep_their_text():
    """xDSL's stock parser (xdsl-opt, a user's pipeline) reads a printed non-ASCII string — the seed's
    reasons hold `—` — as a BytesAttr: fwd-lower-numba called such a `fwd.refused` mark malformed and
    the report dropped `fwd.remark`s. Both read it as the text it was."""
    from xdsl.parser import Parser

    from fwdshim.passes.legalize import LegalizePass
    from fwdshim.passes.lower_numba import LowerNumbaPass
    from fwdshim.shim.refusal import REFUSED_ATTR, mark_text

    text = """func.func @f(%x: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {
  %n = fwd.rms_norm %x bias(%b : tensor<64xf32>) eps 1.0e-05 : tensor<64xf32> -> tensor<64xf32>
  func.return %n : tensor<64xf32>
}
"""
    ctx = _ctx()
    m = _parse(text)
    LegalizePass(mode="mark").apply(ctx, m)
    back = Parser(ctx, _print(m, False)).parse_module()
    ops = [o for o in back.walk() if REFUSED_ATTR in o.attributes]
    assert len(ops) == 1 and mark_text(ops[0], REFUSED_ATTR) == "a bias on an RMSNorm — its kernel scales and never shifts"
    with pytest.raises(Exception, match="a bias on an RMSNorm — its kernel scales and never shifts \\(refused by fwd-legalize\\)"):
        LowerNumbaPass().apply(ctx, back)
