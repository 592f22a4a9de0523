"""The generated parts of docs/passes.md (`fwdshim.tools.passes_doc`): the passes with their options and
the refusal catalogue are what the classes and the shim's branches write; every branch has a case."""

from __future__ import annotations

from fwdshim.shim.forward import ALL_BRANCHES
from fwdshim.tools import passes_doc


def test_the_passes_reference_is_what_the_classes_write():
    text = passes_doc.DOC.read_text()
    assert text == passes_doc.rendered(text), "docs/passes.md is stale: run `python -m fwdshim.tools.passes_doc`"
    assert passes_doc.main(["--check"]) == 0


def test_every_branch_is_in_the_catalogue_with_a_case_that_names_its_reason():
    text = passes_doc.catalogue_section()
    for b in ALL_BRANCHES:
        row = next(line for line in text.splitlines() if line.startswith(f"| {b.id} |"))
        case = passes_doc._first_case(b.reason)
        assert case is not None, b.id
        lines = (passes_doc.CASES / case[0]).read_text().splitlines()
        assert all(p in lines[case[1] - 1] for p in b.reason.split("{}") if p), b.id
        assert f"`{case[0]}:{case[1]}`" in row


def test_every_option_of_every_pass_is_documented():
    text = passes_doc.passes_section()
    for option in ("numerics", "mode", "explain", "disable", "order"):
        assert f"| `{option}` |" in text
    assert "| `<tuning>` (" in text and "|  |" not in text  # no option without its docstring
    assert "| `explain` | `false` |" in text  # an unset flag is off, as --help says
