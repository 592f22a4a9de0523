"""`docs/dialect.md`, the `fwd` dialect's reference, written from the op and attribute definitions (as
MLIR writes its op docs from ODS): for each op its description (the class docstring), its syntax (the
declarative assembly format), operands, properties (their kinds, optional or not) and one example, the
first use of the op in the round-trip test files (`filecheck_tests/dialect/roundtrip_{ops,fused,
refused}.mlir`, parsed and printed back by lit, so every example parses); then the types and attributes.

    python -m fwdshim.tools.dialect_doc            # rewrites docs/dialect.md
    python -m fwdshim.tools.dialect_doc --check    # exit 1 when docs/dialect.md is stale

`tests/dialects/test_dialect_doc.py` fails when the file is stale."""

from __future__ import annotations

import argparse
import inspect
import sys
from enum import Enum
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "dialect.md"
EXAMPLES = tuple(ROOT / "filecheck_tests" / "dialect" / f"roundtrip_{name}.mlir" for name in ("ops", "fused", "refused"))

_KINDS = {
    "StringAttr": "a string",
    "UnitAttr": "a flag (the keyword present or not)",
    "IntegerAttr": "an i64 integer",
    "FloatAttr": "an f32 number",
    "DenseArrayBase": "an array of i64 (`array<i64: 0, 1>`)",
}


def _kind(constr) -> str:
    """A property constraint in the IR's words."""
    name = type(constr).__name__
    if name == "ArrayOfConstraint":
        return f"a list `[...]` of {_kind(constr.elem_range_constraint.constr)}"
    base = getattr(constr, "attr", None) or getattr(constr, "base_attr", None)
    if base is None:
        return f"`{constr}`"
    enum = getattr(base, "enum_type", None)
    if isinstance(enum, type) and issubclass(enum, Enum):
        return f"`#{base.name}`: " + ", ".join(f"`{m.value}`" for m in enum)
    return _KINDS.get(base.__name__, f"`{getattr(base, 'name', base.__name__)}`")


def _examples(text: str) -> dict[str, str]:
    """The first use of each op in `text` (`%r = fwd.x ...`, `fwd.x ...`), its region's lines too
    for an op that opens one (`fwd.fused`), comments and CHECK lines left out."""
    found: dict[str, str] = {}
    lines = [ln for ln in text.splitlines() if not ln.strip().startswith("//")]
    for i, line in enumerate(lines):
        code = line.strip()
        word = next((w for w in code.split() if w.startswith("fwd.") and w[4:].replace("_", "").isalnum()), None)
        if word is None or word in found:
            continue
        if code.endswith("{"):  # the region, up to its closing brace
            depth, block = 0, []
            for ln in lines[i:]:
                depth += ln.count("{") - ln.count("}")
                block.append(ln)
                if depth <= 0:
                    break
            pad = len(line) - len(line.lstrip())
            code = "\n".join(ln[pad:] for ln in block)
        found[word] = code
    return found


def _doc(obj) -> str:
    return inspect.cleandoc(obj.__doc__) if obj.__doc__ else ""


def verifier_rules(op: type) -> list[str]:
    """The errors `op`'s own verifier gives (the message of each `_want(condition, message)` and
    `raise VerifyException(message)` of the `verify_` and `verify_shapes` its class defines), each
    formatted value as its expression in braces, `self.` and `.type` left out."""
    import ast
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(op)))
    except (OSError, TypeError):
        return []
    rules = []
    for fn in tree.body[0].body:  # type: ignore[attr-defined]
        if not (isinstance(fn, ast.FunctionDef) and fn.name in ("verify_", "verify_shapes")):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_want" and len(node.args) > 1:
                rules.append(_message(node.args[1]))
            elif isinstance(node, ast.Raise) and node.exc is not None and "VerifyException" in ast.unparse(node.exc):
                call = node.exc
                if isinstance(call, ast.Call) and call.args:
                    rules.append(_message(call.args[0]))
    return list(dict.fromkeys(r for r in rules if r))


def _as_text(message: str) -> str:
    """`message` as Markdown text: `*` and `_` outside its backtick spans escaped (not emphasis)."""
    parts = message.split("`")
    return "`".join(p if i % 2 else p.replace("*", "\\*").replace("_", "\\_") for i, p in enumerate(parts))


def _message(node) -> str:
    """A verifier's error message with each value it formats shown as the expression in braces
    (`attention q has {numel(q)} values, not rows*h*hd = {rows * h * hd}`)."""
    import ast

    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(p.value if isinstance(p, ast.Constant) else "{" + _code(p.value) + "}" for p in node.values)
    return ""


def _code(node) -> str:
    import ast
    import re

    text = " ".join(ast.unparse(node).split())
    return re.sub(r"\bself\.", "", text).replace(".type", "")


def markdown(examples_text: str | None = None) -> str:
    """The reference as Markdown (the module docstring); `examples_text` the text examples come from
    (default: the round-trip files of the repository)."""
    from fwdshim.dialects.fwd import Fwd

    texts = [p.read_text() for p in EXAMPLES] if examples_text is None else [examples_text]
    examples: dict[str, str] = {}
    for text in texts:
        for name, code in _examples(text).items():
            examples.setdefault(name, code)
    out = [
        "# The `fwd` dialect",
        "",
        "<!-- Written by `python -m fwdshim.tools.dialect_doc` from the op definitions "
        "(`fwdshim/dialects/fwd.py`, `attributes.py`); edit those, not this file. -->",
        "",
        "Every op of a decode step, the types of its values and the attributes of its properties. An op's",
        "*syntax* is its custom form (xDSL's declarative assembly format: `$x` an operand, `type($x)` its",
        "type, `(... $p^)?` an optional group present when `p` is); the generic form",
        '(`"fwd.silu"(%x) : (tensor<64xf32>) -> tensor<64xf32>`) reads every op too. What the forward\'s',
        "kernels compute of each op is the legality pass's to say (`fwdshim-opt -p fwd-legalize --explain`).",
        "",
        "## Ops",
        "",
    ]
    for op in Fwd.operations:
        d = op.get_irdl_definition()
        out += [f"### `{op.name}`", ""]
        doc = _doc(op)
        if doc:
            out += [doc, ""]
        fmt = getattr(op, "assembly_format", None)
        if fmt:
            out += ["Syntax:", "", "```", f"{op.name} {fmt}", "```", ""]
        if d.operands:
            out.append("Operands: " + ", ".join(f"`{n}`{' (optional)' if 'Opt' in type(o).__name__ else ''}"
                                                f"{' (any number)' if 'Var' in type(o).__name__ else ''}"
                                                for n, o in d.operands) + ".")  # fmt: skip
            out.append("")
        props = [(n, p) for n, p in d.properties.items() if n != "operandSegmentSizes"]
        if props:
            out += ["| property | takes | |", "|---|---|---|"]
            out += [f"| `{n}` | {_kind(p.constr)} | {'optional' if 'Opt' in type(p).__name__ else 'required'} |" for n, p in props]
            out.append("")
        rules = verifier_rules(op)
        if rules:
            out += ["The verifier's errors (besides the operand and property kinds; `{…}` the value it names):", ""]
            out += ["- " + _as_text(r) for r in rules]
            out.append("")
        if op.name in examples:
            out += ["Example:", "", "```mlir", examples[op.name], "```", ""]
    out += ["## Types", ""]
    attrs = list(Fwd.attributes)
    for a in (a for a in attrs if getattr(a, "enum_type", None) is None):
        out += [f"### `!{a.name}`", "", _doc(a) or "(no description)", ""]
    out += ["## Attributes", ""]
    for a in (a for a in attrs if getattr(a, "enum_type", None) is not None):
        values = ", ".join(f"`{m.value}`" for m in a.enum_type)
        doc = _doc(a.enum_type) if a.enum_type.__doc__ and a.enum_type.__doc__ != Enum.__doc__ else ""
        out += [f"### `#{a.name}`", "", (doc + " " if doc else "") + f"Values: {values}.", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fwdshim.tools.dialect_doc", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/dialect.md is not what the definitions write")
    args = ap.parse_args(argv)
    text = markdown()
    if args.check:
        if not DOC.exists() or DOC.read_text() != text:
            print(f"{DOC}: stale; run `python -m fwdshim.tools.dialect_doc`", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
