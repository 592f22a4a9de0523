"""`docs/dialect.md` is what the op definitions write (`fwdshim.tools.dialect_doc`): a definition or a
docstring changed without the reference failing here, as MLIR's generated op docs would."""

from __future__ import annotations

from fwdshim.dialects.fwd import Fwd
from fwdshim.tools import dialect_doc


def test_the_dialect_reference_is_what_the_definitions_write():
    assert dialect_doc.DOC.read_text() == dialect_doc.markdown(), "docs/dialect.md is stale: run `python -m fwdshim.tools.dialect_doc`"
    assert dialect_doc.main(["--check"]) == 0


def test_every_op_has_a_description_syntax_and_an_example():
    text = dialect_doc.markdown()
    sections = text.split("\n### ")
    for op in Fwd.operations:
        section = next(s for s in sections if s.startswith(f"`{op.name}`\n"))
        lines = section.splitlines()
        assert lines[2] and not lines[2].startswith(("Syntax", "Operands", "|")), f"{op.name} has no description"
        assert f"```\n{op.name} " in section and "```mlir\n" in section, op.name


def test_examples_take_the_first_use_and_a_region_whole():
    got = dialect_doc._examples(
        "// fwd.silu in a comment\n"
        "  %a = fwd.silu %x : tensor<4xf32> -> tensor<4xf32>\n"
        "  %b = fwd.silu %a : tensor<4xf32> -> tensor<4xf32>\n"
        "  %f = fwd.fused silu covers [0] ins(%x) : (tensor<4xf32>) -> tensor<4xf32> {\n"
        "  ^bb0(%p: tensor<4xf32>):\n"
        "    fwd.yield %p : tensor<4xf32>\n"
        "  }\n"
    )
    assert got["fwd.silu"] == "%a = fwd.silu %x : tensor<4xf32> -> tensor<4xf32>"
    assert got["fwd.fused"].splitlines()[-1] == "}" and len(got["fwd.fused"].splitlines()) == 4
    assert got["fwd.yield"] == "fwd.yield %p : tensor<4xf32>"
